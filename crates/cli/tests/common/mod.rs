//! What every cli test needs: the built binary, with no ambient OTLP endpoint or log filter.
#![allow(dead_code)]

use std::process::Command;

/// The built `compaction` binary, with no ambient OTLP endpoint or `COMPACTION_LOG`.
pub(crate) fn compaction() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_compaction"));
    command
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("COMPACTION_LOG");
    command
}

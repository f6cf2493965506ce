//! `compaction`: the composition root of adaptive-compaction, with the built-in adapters.
//!
//! Everything is in the library (`cli::run_with`), so that a downstream crate can build the
//! same binary with an extra adapter registered (see `examples/compaction_with_extra_adapter.rs`).

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::run_with(cli::Registry::builtin())
}

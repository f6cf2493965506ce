//! The library half of the `compaction` binary: the transcript format and the replay driver,
//! shared by the binary, its end-to-end tests and its benchmarks.
//!
//! The binary (`src/main.rs`) is the composition root: it wires config-ssot settings and the
//! adapters into compaction-core's engine. Nothing here decides anything about compaction; the
//! rules live in compaction-core.
#![warn(missing_docs)]

pub mod replay;
pub mod transcript;

//! The library half of the `compaction` binary: the transcript format, the replay driver, the
//! adapter [`registry`] and, with the `http` feature, the whole command line as
//! [`run_with`], so that a downstream crate builds its own `compaction` binary with an extra
//! adapter (example: `examples/compaction_with_extra_adapter.rs`).
//!
//! The binary (`src/main.rs`) is `run_with(Registry::builtin())`: the composition root that
//! wires config-ssot settings and the registered adapters into compaction-core's engine.
//! Nothing here decides anything about compaction; the rules live in compaction-core.
//!
//! # Features
//! - `http` (default): the command line ([`run_with`]), the HTTP adapters, the OTLP exporter
//!   and `compaction serve`. Without it: [`transcript`], [`replay`] and [`registry`], and no
//!   reqwest (what xtask uses).
//! - `postgres` (default): session databases on PostgreSQL (`--db postgres://…`). Without it
//!   a PostgreSQL URL is refused naming the feature, and no PostgreSQL driver is built.
#![warn(missing_docs)]

pub mod registry;
pub mod replay;
pub mod transcript;

pub use registry::Registry;

// The command line: the one place that prints.
#[cfg(feature = "http")]
#[allow(clippy::print_stderr, clippy::print_stdout)]
mod commands;
#[cfg(feature = "http")]
#[allow(clippy::print_stderr, clippy::print_stdout)]
mod database;
#[cfg(feature = "http")]
mod descriptors;
#[cfg(feature = "http")]
#[allow(clippy::print_stderr, clippy::print_stdout)]
mod error;
#[cfg(feature = "http")]
#[allow(clippy::print_stderr, clippy::print_stdout)]
mod render;
#[cfg(feature = "http")]
#[allow(clippy::print_stderr, clippy::print_stdout)]
mod shadow;
#[cfg(feature = "http")]
#[allow(clippy::print_stderr, clippy::print_stdout)]
mod wiring;

#[cfg(feature = "http")]
pub use commands::{run_with, run_with_args};

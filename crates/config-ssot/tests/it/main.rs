//! Integration tests of config-ssot against real files, real locks and real OS processes.

mod corrupt;
mod fuzz;
mod hardening;
mod multiprocess;
#[cfg(unix)]
mod permissions;
mod python;
mod roundtrip;
mod support;
mod watch;

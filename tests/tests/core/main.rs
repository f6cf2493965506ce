//! Integration tests of the pure core, driven through the in-memory fakes of every port.
//!
//! - `section_11`: the nine verification tests of the spec's section 11, under their names.
//! - `properties`: proptest invariants over generated sessions and settings.
//! - `snapshots`: what a model or a person sees (probe body, summarizer prompt, context).
//! - `races`: the session changing between the gate and the read.
//! - `contract`: what a consuming service relies on (timestamps, typed failures, deadlines).

mod contract;
mod fixtures;
mod properties;
mod races;
mod section_11;
mod shadow;
mod snapshots;

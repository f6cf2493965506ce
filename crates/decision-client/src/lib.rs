//! Decision-model adapters for compaction-core's `DecisionModel` port.
//!
//! Holds (being built): the Decisions API ("System One") adapter, the chat-logprobs judge, the
//! offline lexical model, and a factory that picks one from settings and the environment. The
//! [`http`] module is the HTTP plumbing every remote adapter in the workspace shares.
//!
//! Never: retries inside the time budget, fail-open decisions (the engine's job), or an API key
//! in any log, error or Debug output.
#![warn(missing_docs)]

pub mod http;

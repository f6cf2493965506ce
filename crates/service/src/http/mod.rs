//! The reference service (feature `http`): `compaction serve`'s routes on axum, the
//! coordinator port with its offline stand-in (and, with feature `openai`, its
//! OpenAI-compatible client), and the chat and preferences page at `/` (plain HTML,
//! CSS and JavaScript modules embedded in the binary; the preferences are kept in sync with
//! the settings file through config-ssot). The lane it drives is framework-free
//! ([`crate::Lanes`]).

mod api;
mod chat;
mod coordinator;
mod guard;
mod history;
mod listener;
mod llm_span;
mod open_turns;
#[cfg(feature = "openai")]
mod openai;
#[cfg(feature = "openai")]
mod openai_stream;
mod page;
mod recall;
mod recall_tool;
mod relay;
mod server;
mod sessions;
mod settings;
mod shape;
mod token_series;

pub use coordinator::config::KEYS as COORDINATOR_KEYS;
pub use coordinator::{
    Coordinator, CoordinatorConfig, CoordinatorConfigError, CoordinatorMessage, CoordinatorRequest,
    OfflineCoordinator, RecallTool, ReplyChunk, ReplyStream, SelectedCoordinator,
    select_coordinator,
};
pub use guard::{GuardOptions, Token};
pub use listener::Limits;
pub use open_turns::{DEFAULT_QUIET_FOR, OpenTurnSweep};
#[cfg(feature = "openai")]
pub use openai::OpenAiCompatible;
pub use server::{DEFAULT_MAX_MESSAGE_BYTES, ServeOptions, Server, shutdown_signal};

//! The reference service (feature `http`): `compaction serve`'s routes on axum, the
//! coordinator port and its adapters. The lane it drives is framework-free
//! ([`crate::lane`]).

pub mod coordinator;
mod server;

pub use coordinator::{
    ChatMessage, Coordinator, CoordinatorConfig, CoordinatorConfigError, CoordinatorRequest,
    OfflineCoordinator, OpenAiCompatible, ReplyChunk, ReplyStream, SelectedCoordinator,
    select_coordinator,
};
pub use server::{DEFAULT_MAX_MESSAGE_BYTES, ServeOptions, Server, shutdown_signal};

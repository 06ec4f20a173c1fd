//! botfleet-actors: the fleet's actors and the turn engine.
//!
//! ```text
//! Fleet (root supervisor)
//! └── Router            routes admitted inputs, activates and passivates bots
//!     └── Bot(id) × N   queue, one turn at a time, interrupts, debounce
//!         └── Turn      a supervised task running the engine for one turn
//! ```
//!
//! This crate knows nothing of HTTP or the CLI; the host drives it through
//! [`FleetHandle`].

#[doc(hidden)]
pub mod bench_support;
mod bot;
mod bot_queue;
mod engine;
mod error;
mod fleet;
pub mod group;
mod memory;
mod message_text;
pub mod model;
mod prompts;
mod protocol;
mod router;
mod runtime;
pub mod safety;
pub mod scheduler;
mod settings;
pub mod tools;
mod vault;

pub use bot::BotActor;
pub use bot::BotMsg;
pub use bot::BotStatus;
pub use bot::CancelAnswer;
pub use bot::RunningTurn;
pub use bot_queue::QueuedInput;
pub use engine::budget_paused_until;
pub use engine::stored_budget_pause;
pub use error::ActorError;
pub use error::Result;
pub use fleet::FleetActor;
pub use fleet::FleetHandle;
pub use fleet::FleetMsg;
pub use fleet::claims::check_fleet_file_bots;
pub use fleet::claims::room_id_clashes;
pub use fleet::claims::room_member_clashes;
pub use memory::ExtractError;
pub use memory::ExtractReport;
pub use memory::MemoryState;
pub use memory::RejectedOp;
pub use memory::extract_after_turn;
pub use memory::render_memory;
pub use memory::render_memory_update;
pub use memory::spawn_extract_after_turn;
pub use memory::writable_scope;
pub use message_text::message_text;
pub use prompts::PromptError;
pub use prompts::Prompts;
pub use prompts::Template;
pub use prompts::prompts;
pub use protocol::nonce_time_ms;
pub use protocol::user_message;
pub use protocol::user_message_digest;
pub use router::RouterActor;
pub use router::RouterMsg;
pub use runtime::MemoryReach;
pub use runtime::Runtime;
pub use runtime::StateBlock;
pub use runtime::StateProvider;
pub use settings::ContextSettings;
pub use settings::FleetSettings;
pub use settings::ShellLauncher;
pub use settings::ShellSandbox;
pub use vault::BotSecrets;
pub use vault::Vault;
pub use vault::secret_name_problem;
pub use vault::secret_name_shape_problem;
pub use vault::valid_secret_name;

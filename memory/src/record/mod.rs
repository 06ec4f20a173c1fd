//! The records the store persists: bots, sessions, transcript entries,
//! admissions, turns and tool calls. This module is the whole vocabulary that
//! crosses the store, the actors and the API.

mod admission;
mod approval;
mod bots;
mod collaboration;
mod entries;
mod secrets;
mod sessions;
mod turns;

pub use admission::AdmitOutcome;
pub use admission::AdmitRequest;
pub use admission::AdmittedRecord;
pub use admission::InboxItem;
pub use admission::Priority;
pub use approval::ApprovalDecision;
pub use approval::ApprovalRecord;
pub use approval::ApprovalRequestOutcome;
pub use approval::ApprovalStatus;
pub use approval::ExpiryCause;
pub use approval::NewApproval;
pub use approval::ReviewRecord;
pub use bots::BotRecord;
pub use bots::REMOVED_AT;
pub use collaboration::CatchUp;
pub use collaboration::RoomRecord;
pub use collaboration::RoomRunRecord;
pub use collaboration::RoomRunStatus;
pub use collaboration::RoutineOrigin;
pub use collaboration::RoutineRecord;
pub use collaboration::SubagentRecord;
pub use collaboration::SubagentStatus;
pub use collaboration::SubagentStop;
pub use collaboration::SubagentTaskHold;
pub use entries::AskedBy;
pub use entries::ChainOrigin;
pub use entries::Change;
pub use entries::Entry;
pub use entries::EntryKind;
pub use entries::NewEntry;
pub use entries::ToolCallBody;
pub use secrets::SecretValue;
pub use sessions::ROOM_TIMELINE_PEER;
pub use sessions::SessionKey;
pub use sessions::SessionKind;
pub use sessions::SessionRecord;
pub use sessions::SessionView;
pub use sessions::covers_to_seq;
pub use sessions::room_timeline;
pub use turns::TokenUsage;
pub use turns::ToolCallRecord;
pub use turns::ToolCallStatus;
pub use turns::TurnRecord;
pub use turns::TurnStatus;

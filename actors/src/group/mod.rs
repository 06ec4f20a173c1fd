//! Group rooms: a public timeline shared by up to six bots, run by
//! deterministic host code — no model decides who speaks.
//!
//! ```text
//! Fleet
//! └── RoomsActor          activates, passivates and revives room coordinators;
//!     │                   one change-signal dispatcher for every room
//!     └── GroupActor × G  one per active room: drives run.rs with member turns
//! ```
//!
//! - [`room`]: creating rooms, who may use them, posting a user message
//!   (ledger + the run it starts, one transaction).
//! - `admin`: the owner changes a room's members or closes it.
//! - `given`: a start whose config gives a member of a room of one owner
//!   to another user shares the room as a change of members would.
//! - `audience`: a member of a user who gained the room later is shown
//!   it from where its owner reads it.
//! - [`mentions`]: `@Name` / `@everyone` → who is addressed.
//! - [`run`]: the pure state machine of one run (rounds, limits, order).
//! - `member`: a member's turn input and reading the end of its turn.
//! - `live`: a member's replies published while its turn runs.
//! - [`held`]: what a member sends when it is not its turn (held, and
//!   said so), and whose turn it is.
//! - [`publish`]: what a member sends in its turn past the room's limit
//!   per member turn (kept back, and said so when it sends it).
//! - `absent`: members that take no turns (removed from the config, or
//!   stopped subagents).
//! - `unshared`: a member whose owner stopped sharing it leaves the rooms
//!   of other users at the next start.
//! - `failure`: the timeline notice of a member turn that failed (its
//!   error only where its owner alone reads it).
//! - `outcome`: how each member of a finished run did, for clients.
//! - `actor`: the coordinator; `rooms`: the supervisor and registry.
//!
//! A room's public timeline is the session `{bot: <room id>, kind: Room,
//! peer: "timeline"}` owned by the room's owner; its entries are the user
//! messages, the members' published replies (`delivery` entries authored
//! by the member, the same kind SendMessage writes, so clients render a
//! room like a DM with several authors), notices, and one `turn_end` per
//! run listing the user message it answered. Member `m` works in its own
//! session `{bot: m, kind: Group, peer: <room id>}`.

mod absent;
mod actor;
mod admin;
mod asked;
mod audience;
mod era;
mod error;
mod failure;
mod given;
pub mod held;
mod live;
mod member;
pub mod mentions;
mod outcome;
pub mod publish;
mod refused;
pub mod room;
mod rooms;
pub mod run;
mod run_surface;
mod steps;
mod unshared;

pub use absent::absence;
pub use actor::GroupActor;
pub use actor::GroupArgs;
pub use actor::GroupMsg;
pub use actor::GroupState;
pub use admin::CLOSED_CODE;
pub use admin::MEMBERS_CHANGED_CODE;
pub use admin::close_room;
pub use admin::set_members;
pub use era::BEFORE_SHARING_CODE;
pub use error::GroupError;
pub(crate) use given::share_given_rooms;
pub use held::Floor;
pub(crate) use member::input_author;
pub(crate) use member::is_input_author;
pub use outcome::member_outcomes;
pub use room::NewRoom;
pub use room::Posted;
pub use room::create_room;
pub use room::post_message;
pub use room::retried_post;
pub use room::room_for;
pub use room::room_message_digest;
pub use room::rooms_for;
pub use rooms::GroupRegistry;
pub use rooms::RoomsActor;
pub use rooms::RoomsMsg;
pub(crate) use rooms::start_supervisor;
pub use run::Limits;
pub use run_surface::discussion_was_shared;
pub(crate) use unshared::withdraw_unshared;

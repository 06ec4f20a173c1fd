//! Collaboration: group rooms and their runs, subagents, and routines.

use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use super::SessionKey;
use super::room_timeline;
use crate::ids::BotId;
use crate::ids::RoomId;
use crate::ids::SessionId;
use crate::ids::UserId;

/// A group room: a public timeline shared by up to six member bots that a
/// deterministic coordinator runs one at a time (actors/src/group).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomRecord {
    /// Stable id (bot id rules).
    pub id: RoomId,
    /// Display name.
    pub name: String,
    /// The user who created the room.
    pub owner: UserId,
    /// Members in the order they speak in. The owner may replace them
    /// (`PUT /v1/groups/{group}/members`); a discussion already running
    /// keeps the members it started with.
    pub members: Vec<BotId>,
    /// Whether the members belong to more than one user.
    pub shared: bool,
    /// Creation time (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
    /// When its owner closed it (ms), if closed: a closed room takes no
    /// more messages and no member changes; its timeline stays readable.
    #[serde(default)]
    pub closed_at: Option<i64>,
}

impl RoomRecord {
    /// The key of the room's public timeline session:
    /// `{bot: <room id>, kind: Room, peer: "timeline"}`.
    pub fn timeline(&self) -> SessionKey {
        room_timeline(&self.id)
    }
}

/// Progress of one run of a room (the work one user message started).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoomRunStatus {
    /// Not finished (or cut off by a crash: the coordinator resumes it).
    Running,
    /// Ended; its end is in the timeline.
    Done,
}

impl RoomRunStatus {
    /// Stable text form.
    pub fn as_str(self) -> &'static str {
        match self {
            RoomRunStatus::Running => "running",
            RoomRunStatus::Done => "done",
        }
    }

    /// Parses the text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => RoomRunStatus::Running,
            "done" => RoomRunStatus::Done,
            _ => return None,
        })
    }
}

/// One run of a room as stored: which user message started it and the
/// coordinator's checkpoint (owned by actors/src/group, like a turn's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomRunRecord {
    /// The room.
    pub room: RoomId,
    /// Seq of the user message in the room timeline that started the run.
    pub trigger_seq: i64,
    /// Progress.
    pub status: RoomRunStatus,
    /// The coordinator's state after its last step.
    pub state: Value,
    /// Creation time (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
}

/// Status of a subagent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubagentStatus {
    /// Working on its task (or waiting for input).
    Running,
    /// Reported its result.
    Done,
    /// Its turn failed for good.
    Failed,
    /// Stopped by its parent.
    Stopped,
}

impl SubagentStatus {
    /// Stable text form.
    pub fn as_str(self) -> &'static str {
        match self {
            SubagentStatus::Running => "running",
            SubagentStatus::Done => "done",
            SubagentStatus::Failed => "failed",
            SubagentStatus::Stopped => "stopped",
        }
    }

    /// Parses the text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => SubagentStatus::Running,
            "done" => SubagentStatus::Done,
            "failed" => SubagentStatus::Failed,
            "stopped" => SubagentStatus::Stopped,
            _ => return None,
        })
    }
}

/// A subagent: a child bot with a delegated task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubagentRecord {
    /// The child bot's id.
    pub id: BotId,
    /// The delegating bot.
    pub parent: BotId,
    /// The parent's session its reports go to.
    pub parent_session: SessionId,
    /// What it was asked to do.
    pub description: String,
    /// Where it is.
    pub status: SubagentStatus,
    /// Its last report or error.
    pub result: Option<String>,
    /// Created (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
}

/// A subagent whose task title and report a start must withhold from its
/// owner or show again (`Store::subagent_task_holds`): its task session
/// is read from a change of owner on while they are shown (`floored`),
/// or they are withheld while it is read whole again (the bot was given
/// back).
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentTaskHold {
    /// The subagent as stored (withheld or not).
    pub record: SubagentRecord,
    /// Whether its task session has a floor: read by its owner from an
    /// owner change on.
    pub floored: bool,
    /// Its task's title before it was withheld; `None` when not withheld.
    pub withheld_description: Option<String>,
}

/// How a subagent was stopped, written with its stop
/// (`Mutation::StopSubagent`): what the stop found, read back by the call
/// that stopped it, also when it runs again after a crash cut it off
/// before its answer was recorded (it answers what it did then, not
/// "already stopped").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentStop {
    /// The call that stopped it: `<turn id>:<call id>`.
    pub call: String,
    /// Its status when the stop committed (`running`, `done`, `failed`):
    /// a task that ended before the stop landed keeps that it finished.
    pub from: SubagentStatus,
    /// Since when it was in that status (ms): its record's last change
    /// before the stop.
    pub since: i64,
    /// How many of its open approvals the stop expired.
    pub expired: usize,
}

/// Between a subagent's parent's name and its task's title in its name.
const SUBAGENT_NAME_SEPARATOR: &str = " · ";

/// Ends a subagent's name cut to fit.
const SUBAGENT_NAME_CUT: char = '…';

impl SubagentRecord {
    /// The display name of a subagent of a parent named `parent_name` for
    /// the task titled `description`: both, `Boss · audit the logs`, cut
    /// between graphemes with `…` to a name's
    /// [`MAX_DISPLAY_NAME_CHARS`](crate::MAX_DISPLAY_NAME_CHARS). Task
    /// names it so, and the store names it again whenever its parent's
    /// name changes (`Writer::subagent_names_follow`).
    pub fn name_under(parent_name: &str, description: &str) -> String {
        fitted(&format!(
            "{parent_name}{SUBAGENT_NAME_SEPARATOR}{description}"
        ))
    }
}

/// `name` if it fits in a display name; else its start, cut between
/// graphemes, and [`SUBAGENT_NAME_CUT`].
fn fitted(name: &str) -> String {
    use unicode_segmentation::UnicodeSegmentation;
    let max = crate::MAX_DISPLAY_NAME_CHARS;
    if name.chars().count() <= max {
        return name.to_owned();
    }
    let mut out = String::new();
    let mut chars = 0;
    for g in name.graphemes(true) {
        let n = g.chars().count();
        if chars + n >= max {
            break;
        }
        out.push_str(g);
        chars += n;
    }
    let kept = out.trim_end().len();
    out.truncate(kept);
    out.push(SUBAGENT_NAME_CUT);
    out
}

/// What a routine does about slots it missed while the host was down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Run once, late, for all the slots missed together; then follow the
    /// schedule again.
    #[default]
    Once,
    /// Do not run for missed slots; wait for the next one.
    Skip,
}

impl CatchUp {
    /// Stable text form.
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Once => "once",
            CatchUp::Skip => "skip",
        }
    }

    /// Parses the text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "once" => CatchUp::Once,
            "skip" => CatchUp::Skip,
            _ => return None,
        })
    }
}

/// Where a routine was defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutineOrigin {
    /// fleet.toml: registered again at every start, changed only there.
    Config,
    /// The HTTP API: persists until deleted.
    Api,
}

impl RoutineOrigin {
    /// Stable text form.
    pub fn as_str(self) -> &'static str {
        match self {
            RoutineOrigin::Config => "config",
            RoutineOrigin::Api => "api",
        }
    }

    /// Parses the text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "config" => RoutineOrigin::Config,
            "api" => RoutineOrigin::Api,
            _ => return None,
        })
    }
}

/// A bot's routine as stored: a prompt bound to a cron schedule in a time
/// zone, with the schedule's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineRecord {
    /// The bot it wakes.
    pub bot: BotId,
    /// Name, unique per bot (also the peer of its session).
    pub name: String,
    /// Cron expression: 5 fields, or 6 with seconds first.
    pub cron: String,
    /// IANA time zone the expression is read in.
    pub timezone: String,
    /// What the bot is asked to do.
    pub prompt: String,
    /// Whether a run may end without reporting (SendMessage).
    pub silent_ok: bool,
    /// What to do about slots missed while the host was down.
    pub catch_up: CatchUp,
    /// Where it was defined.
    pub origin: RoutineOrigin,
    /// The next slot to fire (ms since epoch, UTC); `None` when the
    /// expression has no future slot.
    pub next_fire_ms: Option<i64>,
    /// The slot of the last fire (ms), if any.
    pub last_fire_ms: Option<i64>,
    /// Creation time (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
}

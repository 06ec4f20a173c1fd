//! Tool surfaces: which tools a turn's model is shown, from who runs the
//! turn ([`Runner`]), the bot's allowed tools and fleet policy.
//!
//! A tool the runner may not use is not shown to the model at all, and is
//! still refused when called anyway ([`check_call`], run by the gate):
//! the model may have seen the tool in an earlier turn of another runner,
//! or invent the name.
//!
//! The matrix (docs/security.md has the same table; `MATRIX` below is
//! what the code uses and what the tests check):
//!
//! | tool kind | main | subagent | group | shared group | routine | hook |
//! | --- | --- | --- | --- | --- | --- | --- |
//! | delivery (SendMessage) | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ |
//! | reaction (ReactToMessage) | ✓ | ✓ | –³ | –³ | ✓ | ✓ |
//! | file read (Read) | ✓ | ✓ | ✓ | – | ✓ | ✓ |
//! | file write (Write, Edit) | ✓ | ✓ | ✓ | – | ✓ | – |
//! | shell (Shell) | ✓ | ✓ | ✓ | – | ✓ | – |
//! | agent message (SendToAgent) | ✓ | – | ✓ | – | ✓ | – |
//! | agent admin (CreateAgent, UpdateAgent) | ✓ | – | – | – | – | – |
//! | subagent launch (Task) | ✓ | – | – | – | ✓ | – |
//! | subagent control (Check/Message/StopSubagent) | ✓ | – | check, stop² | – | ✓ | – |
//! | recall (SearchTranscript, ReadTranscript) | ✓ | ✓ | ✓ | – | ✓ | ✓ |
//! | memory write (Remember, Forget) | ✓ | – | ✓ | agent scope¹ | ✓ | – |
//! | extension (MCP, script, any other name) | ✓ | ✓ | ✓ | – | ✓ | – |
//!
//! ¹ A member of a shared room may `Remember` with `scope = "agent"` only,
//! and may not `Forget` (an id does not say which scope it deletes from):
//! `Forget` is not shown there ([`tool_access`]), so neither the tool list
//! nor a refusal's advice offers a tool that is always refused.
//!
//! ² A room member's turn may not give a subagent work (Task,
//! MessageSubagent): the subagent's report comes back to the
//! conversation that gave the work, later, as a new turn; in a room that
//! turn runs after the discussion ended, when nothing it says can be
//! published, so the result never reached the room and the person was not
//! told. CheckSubagent and StopSubagent answer within the turn: shown.
//!
//! ³ A room member's reaction would not reach the room: its turn runs in
//! the member's own session of the room, which the room's people do not
//! read, and the room's input shows the member no seq to aim at (a
//! reaction landed on the private session's entry of that number while
//! the tool said "reacted": QA). Not shown there; a call anyway is
//! refused saying to answer with SendMessage.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Runner;
use super::ToolError;

/// What a tool does, as far as surfaces and review are concerned. Names
/// the host does not know are [`ToolKind::Extension`] (conservative: never
/// shown to shared rooms or hooks, and reviewed as MCP/script tools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolKind {
    /// SendMessage: deliver to the session's people.
    Delivery,
    /// ReactToMessage.
    Reaction,
    /// Read.
    FileRead,
    /// Write, Edit.
    FileWrite,
    /// Shell.
    Shell,
    /// SendToAgent.
    AgentMessage,
    /// CreateAgent, UpdateAgent.
    AgentAdmin,
    /// Task.
    SubagentLaunch,
    /// CheckSubagent, MessageSubagent, StopSubagent.
    SubagentControl,
    /// SearchTranscript, ReadTranscript.
    Recall,
    /// Remember, Forget.
    MemoryWrite,
    /// MCP and script tools, and any name not listed here.
    Extension,
}

impl ToolKind {
    /// Every kind, in the order of the matrix.
    pub const ALL: [ToolKind; 12] = [
        ToolKind::Delivery,
        ToolKind::Reaction,
        ToolKind::FileRead,
        ToolKind::FileWrite,
        ToolKind::Shell,
        ToolKind::AgentMessage,
        ToolKind::AgentAdmin,
        ToolKind::SubagentLaunch,
        ToolKind::SubagentControl,
        ToolKind::Recall,
        ToolKind::MemoryWrite,
        ToolKind::Extension,
    ];

    /// The kind of a tool by name.
    pub fn of(name: &str) -> Self {
        match name {
            "SendMessage" => ToolKind::Delivery,
            "ReactToMessage" => ToolKind::Reaction,
            "Read" => ToolKind::FileRead,
            "Write" | "Edit" => ToolKind::FileWrite,
            "Shell" => ToolKind::Shell,
            "SendToAgent" => ToolKind::AgentMessage,
            "CreateAgent" | "UpdateAgent" => ToolKind::AgentAdmin,
            "Task" => ToolKind::SubagentLaunch,
            "CheckSubagent" | "MessageSubagent" | "StopSubagent" => ToolKind::SubagentControl,
            "SearchTranscript" | "ReadTranscript" => ToolKind::Recall,
            "Remember" | "Forget" => ToolKind::MemoryWrite,
            _ => ToolKind::Extension,
        }
    }
}

/// The runners in the order of the matrix's columns.
pub const RUNNERS: [Runner; 6] = [
    Runner::Main,
    Runner::Subagent,
    Runner::GroupMember { shared: false },
    Runner::GroupMember { shared: true },
    Runner::Routine,
    Runner::Hook,
];

/// May a runner use a kind of tool at all? `Partial` means only some
/// calls (checked on the arguments by [`check_call`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Shown and usable.
    Yes,
    /// Shown with limits: some arguments are refused, or only some tools
    /// of the kind are shown ([`tool_access`]).
    Partial,
    /// Not shown, refused.
    No,
}

/// The matrix: rows in [`ToolKind::ALL`] order, columns in [`RUNNERS`]
/// order.
const MATRIX: [[Access; 6]; 12] = {
    use Access::No as N;
    use Access::Partial as P;
    use Access::Yes as Y;
    [
        // main sub group shared routine hook
        [Y, Y, Y, Y, Y, Y], // delivery
        [Y, Y, N, N, Y, Y], // reaction
        [Y, Y, Y, N, Y, Y], // file read
        [Y, Y, Y, N, Y, N], // file write
        [Y, Y, Y, N, Y, N], // shell
        [Y, N, Y, N, Y, N], // agent message
        [Y, N, N, N, N, N], // agent admin
        [Y, N, N, N, Y, N], // subagent launch
        [Y, N, P, N, Y, N], // subagent control
        [Y, Y, Y, N, Y, Y], // recall
        [Y, N, Y, P, Y, N], // memory write
        [Y, Y, Y, N, Y, N], // extension
    ]
};

fn column(runner: Runner) -> usize {
    match runner {
        Runner::Main => 0,
        Runner::Subagent => 1,
        Runner::GroupMember { shared: false } => 2,
        Runner::GroupMember { shared: true } => 3,
        Runner::Routine => 4,
        Runner::Hook => 5,
    }
}

fn row(kind: ToolKind) -> usize {
    match kind {
        ToolKind::Delivery => 0,
        ToolKind::Reaction => 1,
        ToolKind::FileRead => 2,
        ToolKind::FileWrite => 3,
        ToolKind::Shell => 4,
        ToolKind::AgentMessage => 5,
        ToolKind::AgentAdmin => 6,
        ToolKind::SubagentLaunch => 7,
        ToolKind::SubagentControl => 8,
        ToolKind::Recall => 9,
        ToolKind::MemoryWrite => 10,
        ToolKind::Extension => 11,
    }
}

/// Whether `runner` may use tools of `kind`.
pub fn access(runner: Runner, kind: ToolKind) -> Access {
    MATRIX[row(kind)][column(runner)]
}

/// Fleet policy over the matrix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SurfacePolicy {
    /// Tools no runner is shown (removed fleet-wide by the operator).
    pub deny: BTreeSet<String>,
}

/// A short name of a runner for messages.
pub fn runner_name(runner: Runner) -> &'static str {
    match runner {
        Runner::Main => "a bot's own",
        Runner::Subagent => "a subagent's",
        Runner::GroupMember { shared: false } => "a group room's",
        Runner::GroupMember { shared: true } => "a shared room's",
        Runner::Routine => "a routine's",
        Runner::Hook => "a webhook's",
    }
}

/// The tools shown to the model of a turn: the bot's allowed tools that
/// the runner may use and policy does not deny, in the bot's order.
pub fn visible_tools<'a>(
    runner: Runner,
    allowed: &'a [String],
    policy: &SurfacePolicy,
) -> Vec<&'a str> {
    allowed
        .iter()
        .map(String::as_str)
        .filter(|name| is_visible(runner, name, policy))
        .collect()
}

/// Whether `runner` may use the tool `name`: its kind's [`access`],
/// narrowed per tool where a `Partial` kind leaves a tool no call that
/// [`check_call`] accepts (`Forget` in a shared room: it is always refused,
/// so it is [`Access::No`] there, and not shown), or every call
/// (CheckSubagent and StopSubagent in a room: [`Access::Yes`], while
/// MessageSubagent, which gives work whose report cannot reach the room,
/// is [`Access::No`]).
pub fn tool_access(runner: Runner, name: &str) -> Access {
    match (access(runner, ToolKind::of(name)), name) {
        // agent scope only
        (Access::Partial, "Remember") => Access::Partial,
        // answered within the turn
        (Access::Partial, "CheckSubagent" | "StopSubagent") => Access::Yes,
        // no other tool of a partial kind has an allowed call
        (Access::Partial, _) => Access::No,
        (Access::Yes, _) => Access::Yes,
        (Access::No, _) => Access::No,
    }
}

/// Whether one tool is shown to `runner`: not denied by policy, and not
/// always refused by [`check_call`] on this surface.
pub fn is_visible(runner: Runner, name: &str, policy: &SurfacePolicy) -> bool {
    !policy.deny.contains(name) && tool_access(runner, name) != Access::No
}

/// Refuses a call the runner may not make: a tool it is not shown (or
/// the bot is not allowed), or arguments its surface excludes.
pub fn check_call(
    runner: Runner,
    allowed: &[String],
    name: &str,
    args: &Value,
    policy: &SurfacePolicy,
) -> Result<(), ToolError> {
    let shown = allowed.iter().any(|t| t == name) && is_visible(runner, name, policy);
    if !shown {
        let usable = visible_tools(runner, allowed, policy);
        return Err(ToolError::new(
            format!(
                "the tool {name} is not available in {} turns{}",
                runner_name(runner),
                why_not(runner, name)
            ),
            if usable.is_empty() {
                "answer without tools".to_owned()
            } else {
                format!("use one of: {}", usable.join(", "))
            },
        ));
    }
    match (tool_access(runner, name), name) {
        (Access::Partial, "Remember") => {
            let scope = args.get("scope").and_then(Value::as_str).unwrap_or("agent");
            if scope == "agent" {
                Ok(())
            } else {
                Err(ToolError::new(
                    format!(
                        "in {} turns memory may only be written with scope \"agent\", not {scope:?}",
                        runner_name(runner)
                    ),
                    "Remember with scope \"agent\", or leave it for a private conversation",
                ))
            }
        }
        (Access::Partial, _) => Err(ToolError::new(
            format!(
                "the tool {name} is not available in {} turns",
                runner_name(runner)
            ),
            "leave it for a private conversation with your owner",
        )),
        (Access::Yes | Access::No, _) => Ok(()),
    }
}

/// Why a tool is not available on a surface, where the name alone does
/// not say it (empty otherwise): a room member that gives a subagent work
/// would get its report after the discussion ended, in a turn that can
/// publish nothing to the room.
fn why_not(runner: Runner, name: &str) -> &'static str {
    let gives_work = matches!(name, "Task" | "MessageSubagent");
    match runner {
        Runner::GroupMember { shared: false } if gives_work => {
            ": a subagent's report comes back after the room's discussion has ended, when \
             nothing can be published to the room; do the work yourself in this turn, or \
             offer to do it in a private conversation with your owner"
        }
        Runner::GroupMember { .. } if name == "ReactToMessage" => {
            ": the room's people see no reaction, only messages; to agree or answer, say so \
             with SendMessage"
        }
        Runner::Main
        | Runner::Subagent
        | Runner::GroupMember { .. }
        | Runner::Routine
        | Runner::Hook => "",
    }
}

#[cfg(test)]
#[path = "surface_tests.rs"]
mod tests;

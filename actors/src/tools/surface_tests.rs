#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

/// Every tool name the host has or will have, plus an unknown one.
const NAMES: &[&str] = &[
    "SendMessage",
    "ReactToMessage",
    "Read",
    "Write",
    "Edit",
    "Shell",
    "SendToAgent",
    "CreateAgent",
    "UpdateAgent",
    "Task",
    "CheckSubagent",
    "MessageSubagent",
    "StopSubagent",
    "SearchTranscript",
    "ReadTranscript",
    "Remember",
    "Forget",
    "mcp__github__create_issue",
];

fn all() -> Vec<String> {
    NAMES.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn the_matrix_as_a_table() {
    // the same table as docs/security.md and the module docs, per tool
    // (a `Partial` kind narrowed by `tool_access`)
    let mut out = format!("{:<26}main sub grp shr rtn hook\n", "tool");
    for name in NAMES {
        out.push_str(&format!("{name:<26}"));
        for runner in RUNNERS {
            let cell = match tool_access(runner, name) {
                Access::Yes => "Y",
                Access::Partial => "P",
                Access::No => "-",
            };
            out.push_str(&format!("{cell:<4}"));
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    }
    let expected = "\
tool                      main sub grp shr rtn hook
SendMessage               Y   Y   Y   Y   Y   Y
ReactToMessage            Y   Y   -   -   Y   Y
Read                      Y   Y   Y   -   Y   Y
Write                     Y   Y   Y   -   Y   -
Edit                      Y   Y   Y   -   Y   -
Shell                     Y   Y   Y   -   Y   -
SendToAgent               Y   -   Y   -   Y   -
CreateAgent               Y   -   -   -   -   -
UpdateAgent               Y   -   -   -   -   -
Task                      Y   -   -   -   Y   -
CheckSubagent             Y   -   Y   -   Y   -
MessageSubagent           Y   -   -   -   Y   -
StopSubagent              Y   -   Y   -   Y   -
SearchTranscript          Y   Y   Y   -   Y   Y
ReadTranscript            Y   Y   Y   -   Y   Y
Remember                  Y   -   Y   P   Y   -
Forget                    Y   -   Y   -   Y   -
mcp__github__create_issue Y   Y   Y   -   Y   -
";
    assert_eq!(out, expected);
}

#[test]
fn visible_tools_per_runner() {
    let allowed = all();
    let none = SurfacePolicy::default();
    assert_eq!(
        visible_tools(Runner::Hook, &allowed, &none),
        vec![
            "SendMessage",
            "ReactToMessage",
            "Read",
            "SearchTranscript",
            "ReadTranscript"
        ]
    );
    assert_eq!(
        visible_tools(Runner::GroupMember { shared: true }, &allowed, &none),
        vec!["SendMessage", "Remember"]
    );
    let sub = visible_tools(Runner::Subagent, &allowed, &none);
    for never in ["Task", "CreateAgent", "UpdateAgent", "SendToAgent"] {
        assert!(!sub.contains(&never), "a subagent must not see {never}");
    }
    assert_eq!(
        visible_tools(Runner::Main, &allowed, &none).len(),
        NAMES.len()
    );
    // only what the bot is allowed, in its order
    let some = vec!["Shell".to_owned(), "SendMessage".to_owned()];
    assert_eq!(
        visible_tools(Runner::Main, &some, &none),
        vec!["Shell", "SendMessage"]
    );
    // policy removes a tool everywhere
    let policy = SurfacePolicy {
        deny: ["Shell".to_owned()].into(),
    };
    assert_eq!(
        visible_tools(Runner::Main, &some, &policy),
        vec!["SendMessage"]
    );
}

#[test]
fn calls_are_checked_again() {
    let allowed = all();
    let none = SurfacePolicy::default();
    let shared = Runner::GroupMember { shared: true };
    let err = check_call(shared, &allowed, "Shell", &json!({"command": "ls"}), &none).unwrap_err();
    assert_eq!(
        err.message,
        "the tool Shell is not available in a shared room's turns"
    );
    assert_eq!(err.hint, "use one of: SendMessage, Remember");
    // a tool the bot is not allowed, even if the runner could use it
    let only = vec!["SendMessage".to_owned()];
    assert!(check_call(Runner::Main, &only, "Shell", &json!({}), &none).is_err());
    // memory in a shared room: agent scope only, no Forget
    assert!(
        check_call(
            shared,
            &allowed,
            "Remember",
            &json!({"scope": "agent", "text": "x"}),
            &none
        )
        .is_ok()
    );
    let err = check_call(
        shared,
        &allowed,
        "Remember",
        &json!({"scope": "user", "text": "x"}),
        &none,
    )
    .unwrap_err();
    assert!(err.message.contains("scope \"agent\""), "{err}");
    assert!(check_call(shared, &allowed, "Forget", &json!({"id": "f1"}), &none).is_err());
    // a private room keeps every scope
    assert!(
        check_call(
            Runner::GroupMember { shared: false },
            &allowed,
            "Remember",
            &json!({"scope": "project", "text": "x"}),
            &none
        )
        .is_ok()
    );
    // hooks: untrusted triggers get no side effects
    for name in [
        "Write",
        "Edit",
        "Shell",
        "Task",
        "SendToAgent",
        "Remember",
        "mcp__x__y",
    ] {
        assert!(
            check_call(Runner::Hook, &allowed, name, &json!({}), &none).is_err(),
            "{name}"
        );
    }
}

#[test]
fn unknown_names_are_extensions() {
    assert_eq!(ToolKind::of("mcp__fs__write"), ToolKind::Extension);
    assert_eq!(ToolKind::of("backup-all.tui"), ToolKind::Extension);
    assert_eq!(
        ToolKind::of("shell"),
        ToolKind::Extension,
        "names are exact"
    );
}

/// Arguments that some call of each tool would use (enough to find one
/// accepted call, when there is any).
fn sample_args() -> Vec<Value> {
    vec![
        json!({}),
        json!({"scope": "agent", "text": "x"}),
        json!({"scope": "user", "text": "x"}),
        json!({"id": "f1"}),
    ]
}

fn some_call_accepted(runner: Runner, allowed: &[String], name: &str) -> bool {
    let none = SurfacePolicy::default();
    sample_args()
        .iter()
        .any(|args| check_call(runner, allowed, name, args, &none).is_ok())
}

#[test]
fn a_tool_always_refused_on_a_surface_is_not_shown_there() {
    let allowed = all();
    let none = SurfacePolicy::default();
    let shared = Runner::GroupMember { shared: true };
    // a shared room: Remember (agent scope) yes, Forget (always refused) no
    let shown = visible_tools(shared, &allowed, &none);
    assert!(shown.contains(&"Remember"), "{shown:?}");
    assert!(!shown.contains(&"Forget"), "{shown:?}");
    // Forget is still refused when called anyway
    let err = check_call(shared, &allowed, "Forget", &json!({"id": "f1"}), &none).unwrap_err();
    assert!(!err.hint.contains("Forget"), "{err}");
    // everywhere: shown exactly when some call is accepted, and the advice
    // of a refusal lists only tools with an accepted call
    for runner in RUNNERS {
        for name in NAMES {
            assert_eq!(
                is_visible(runner, name, &none),
                some_call_accepted(runner, &allowed, name),
                "{name} in {} turns",
                runner_name(runner)
            );
        }
        let err = check_call(runner, &allowed, "NoSuchTool", &json!({}), &none).unwrap_err();
        let Some(list) = err.hint.strip_prefix("use one of: ") else {
            panic!("{err}")
        };
        for offered in list.split(", ") {
            assert!(
                some_call_accepted(runner, &allowed, offered),
                "{} turns offer {offered}, which is always refused",
                runner_name(runner)
            );
        }
    }
}

/// Regression: a room member could call Task (and MessageSubagent), but
/// the subagent's report woke it in the room after the discussion ended,
/// where nothing it said could be published: the result never reached
/// the room. Neither is shown to a room member; CheckSubagent and
/// StopSubagent, answered within the turn, are; a call anyway is refused
/// saying why.
#[test]
fn a_room_member_gives_no_subagent_work() {
    let allowed = all();
    let none = SurfacePolicy::default();
    let room = Runner::GroupMember { shared: false };
    let shown = visible_tools(room, &allowed, &none);
    for never in ["Task", "MessageSubagent"] {
        assert!(!shown.contains(&never), "{never} in {shown:?}");
    }
    for kept in ["CheckSubagent", "StopSubagent", "Shell", "SendToAgent"] {
        assert!(shown.contains(&kept), "{kept} not in {shown:?}");
    }
    let err = check_call(
        room,
        &allowed,
        "Task",
        &json!({"description": "d", "prompt": "p"}),
        &none,
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "the tool Task is not available in a group room's turns: a subagent's report comes \
         back after the room's discussion has ended, when nothing can be published to the \
         room; do the work yourself in this turn, or offer to do it in a private conversation \
         with your owner"
    );
    assert!(
        !err.hint.contains("Task") && !err.hint.contains("MessageSubagent"),
        "{err}"
    );
    assert!(check_call(room, &allowed, "MessageSubagent", &json!({}), &none).is_err());
    assert!(check_call(room, &allowed, "StopSubagent", &json!({"id": "x"}), &none).is_ok());
    // a bot's own, and a routine's, turns still delegate
    for runner in [Runner::Main, Runner::Routine] {
        assert!(check_call(runner, &allowed, "Task", &json!({}), &none).is_ok());
    }
}

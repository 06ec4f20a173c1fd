use botfleet_memory::BotId;
use botfleet_memory::UserId;

use super::*;

fn bot(id: &str, name: &str, owner: &str, origin: &str) -> BotRecord {
    BotRecord {
        id: BotId::new(id).unwrap(),
        name: name.into(),
        owner: UserId::new(owner).unwrap(),
        role: String::new(),
        provider: "p".into(),
        tools: vec!["SendMessage".into()],
        settings: serde_json::json!({}),
        origin: origin.into(),
        created_at: 0,
        updated_at: 0,
    }
}

#[test]
fn another_owners_made_bot_id_is_refused_and_the_same_owners_adopted() {
    let stored = [bot("scribe", "Scribe", "bob", "agent:helper")];
    let e = check_fleet_file_bots(&stored, &[bot("scribe", "S", "alice", "config")]).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("`scribe` (owner alice)") && text.contains("bob's bot made by helper"),
        "{text}"
    );
    // naming the key (QA: it named none)
    assert!(text.starts_with("key `bots[0].id`: "), "{text}");
    let notes = check_fleet_file_bots(&stored, &[bot("scribe", "S", "bob", "config")]).unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
}

/// QA, 2026-12-04: a file bot renamed to a made bot's name of the same
/// owner started, and the clash showed only when a room took both.
#[test]
fn a_file_bot_answering_to_the_same_owners_made_bot_is_refused() {
    let stored = [
        bot("scribe", "Scribe", "bob", "agent:helper"),
        bot("old", "Writer", "bob", "agent:helper"),
        bot("helper.sub-1", "Helper task", "bob", "subagent:helper"),
    ];
    let e =
        check_fleet_file_bots(&stored, &[bot("bobbot", " scribe ", "bob", "config")]).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("`bobbot`") && text.contains("bob's bot `scribe`") && text.contains("@"),
        "{text}"
    );
    assert!(text.contains("another `name`"), "{text}");
    // another owner's bot of that name is no clash; neither is a removed
    // made bot, nor a subagent
    assert!(check_fleet_file_bots(&stored, &[bot("a", "Scribe", "alice", "config")]).is_ok());
    let removed = [bot("scribe", "Scribe", "bob", "agent:helper").mark_removed(5)];
    assert!(check_fleet_file_bots(&removed, &[bot("b", "Scribe", "bob", "config")]).is_ok());
    assert!(check_fleet_file_bots(&stored, &[bot("b", "Helper task", "bob", "config")]).is_ok());
}

/// QA, 2026-12-04: `HELPER` in the file beside alice's made `helper` was
/// accepted and stored; ids must differ in more than case, whoever owns
/// either bot.
#[test]
fn a_file_bot_id_differing_only_in_case_from_a_made_bots_is_refused() {
    let stored = [bot("helper", "Helper", "alice", "agent:a1")];
    for owner in ["bob", "alice"] {
        let e =
            check_fleet_file_bots(&stored, &[bot("HELPER", "Helpy", owner, "config")]).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(&format!("`HELPER` (owner {owner}) differs only in case"))
                && text.contains("alice's bot `helper` made by a1"),
            "{text}"
        );
    }
    assert!(check_fleet_file_bots(&stored, &[bot("helper2", "Helpy", "bob", "config")]).is_ok());
}

#[test]
fn a_file_bot_with_a_rooms_id_is_warned_of_naming_both() {
    let notes = room_id_clashes(&[("Standup".to_owned(), "standup".to_owned())]);
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].starts_with("the fleet file's bot `Standup` has the id of the room `standup`")
            && notes[0].ends_with("Give that [[bots]] table another id"),
        "{notes:?}"
    );
    assert!(room_id_clashes(&[]).is_empty());
}

fn room(id: &str, owner: &str, members: &[&str]) -> RoomRecord {
    RoomRecord {
        id: botfleet_memory::RoomId::new(id).unwrap(),
        name: id.into(),
        owner: UserId::new(owner).unwrap(),
        members: members.iter().map(|m| BotId::new(*m).unwrap()).collect(),
        shared: false,
        created_at: 0,
        updated_at: 0,
        closed_at: None,
    }
}

/// Room members as the file names them: a file bot renamed or given
/// away into a clash is named as the one to change; a clash of made bots
/// only (renamed by UpdateAgent) is a warning, as only the running host
/// can fix it; a closed room, or a member the file drops, is none.
#[test]
fn room_members_that_would_answer_to_one_mention_are_named() {
    let stored = [
        bot("a1", "Ann", "alice", "config"),
        bot("a3", "Bea", "alice", "config"),
        bot("m1", "Max", "alice", "agent:a1"),
        bot("m2", "max", "bob", "agent:b1"),
    ];
    let rooms = [room("duo", "alice", &["a1", "a3", "m1"])];
    // a1 renamed as a3 is named, though listed first
    let file = [
        bot("a1", "Bea", "alice", "config"),
        bot("a3", "Bea", "bob", "config"),
    ];
    let mut unchanged_a3 = file.clone();
    unchanged_a3[1] = bot("a3", "Bea", "alice", "config");
    let e = room_member_clashes(&rooms, &stored, &unchanged_a3).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("room `duo` (alice's)"), "{text}");
    assert!(text.contains("the [[bots]] table `a1`"), "{text}");
    assert!(text.starts_with("key `bots[0].name`: "), "{text}");
    // both changed: the later
    let text = room_member_clashes(&rooms, &stored, &file)
        .unwrap_err()
        .to_string();
    assert!(text.contains("the [[bots]] table `a3`"), "{text}");
    // made bots only: a warning
    let made = [room("two", "alice", &["m1", "m2", "gone"])];
    let ok = [
        bot("a1", "Ann", "alice", "config"),
        bot("a3", "Bea", "alice", "config"),
    ];
    let notes = room_member_clashes(&made, &stored, &ok).unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("UpdateAgent"), "{notes:?}");
    // a clash the store had already (an earlier start made it), the file
    // unchanged: warned of, not refused (the host must start to fix it)
    let clashed = [
        bot("a1", "Bea", "alice", "config"),
        bot("a3", "Bea", "bob", "config"),
    ];
    let notes = room_member_clashes(&rooms, &clashed, &clashed).unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("its `name` in the fleet file"),
        "{notes:?}"
    );
    // closed, or the clashing file bot dropped: nothing
    let mut closed = rooms.clone();
    closed[0].closed_at = Some(1);
    assert!(
        room_member_clashes(&closed, &stored, &file)
            .unwrap()
            .is_empty()
    );
    assert!(
        room_member_clashes(&rooms, &stored, &ok[..1])
            .unwrap()
            .is_empty()
    );
}

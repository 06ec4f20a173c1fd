//! The tools of bots made by CreateAgent, and of subagents, as a start
//! brings them in line with the config.

use std::collections::HashMap;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;
use botfleet_memory::UserId;
use serde_json::json;

use super::follow_makers;
use super::follow_origins;

const NOW: i64 = 5_000;

fn bot(id: &str, origin: &str, tools: &[&str]) -> BotRecord {
    BotRecord {
        id: BotId::new(id).unwrap(),
        name: id.to_owned(),
        owner: UserId::new("alice").unwrap(),
        role: "r".into(),
        provider: "s".into(),
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        settings: json!({}),
        origin: origin.into(),
        created_at: 1,
        updated_at: 1,
    }
}

fn fleet(bots: Vec<BotRecord>) -> HashMap<BotId, BotRecord> {
    bots.into_iter().map(|b| (b.id.clone(), b)).collect()
}

/// The tools each write gives, by bot id.
fn written(writes: &[Mutation]) -> HashMap<String, Vec<String>> {
    writes
        .iter()
        .map(|w| {
            let Mutation::UpsertBot(b) = w else {
                panic!("not a bot's record: {w:?}");
            };
            assert_eq!(b.updated_at, NOW);
            (b.id.to_string(), b.tools.clone())
        })
        .collect()
}

#[test]
fn follow_makers_cuts_a_made_bot_and_the_bots_it_made_to_the_makers_tools() {
    let bots = fleet(vec![
        bot("maker", "config", &["SendMessage", "CreateAgent", "Read"]),
        bot(
            "helper",
            "agent:maker",
            &["SendMessage", "Write", "CreateAgent"],
        ),
        bot(
            "helper2",
            "agent:helper",
            &["Write", "SendMessage", "CreateAgent"],
        ),
    ]);
    let got = written(&follow_makers(&bots, NOW));
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got["helper"], ["SendMessage", "CreateAgent"]);
    assert_eq!(got["helper2"], ["SendMessage", "CreateAgent"]);
}

#[test]
fn follow_makers_leaves_send_message_to_the_bots_of_a_removed_or_gone_maker() {
    let bots = fleet(vec![
        bot("maker", "config", &["SendMessage", "Write"]).mark_removed(10),
        bot("helper", "agent:maker", &["SendMessage", "Write"]),
        bot("orphan", "agent:nobody", &["Read", "SendMessage"]),
    ]);
    let writes = follow_makers(&bots, NOW);
    for w in &writes {
        if let Mutation::UpsertBot(b) = w {
            assert!(b.removed_at().is_none(), "{b:?}");
        }
    }
    let got = written(&writes);
    assert_eq!(got["helper"], ["SendMessage"]);
    assert_eq!(got["orphan"], ["SendMessage"]);
}

#[test]
fn follow_makers_gives_nothing_back_and_writes_nothing_for_a_bot_within_its_makers_tools() {
    let bots = fleet(vec![
        bot(
            "maker",
            "config",
            &["SendMessage", "Write", "Read", "CreateAgent"],
        ),
        bot("helper", "agent:maker", &["SendMessage", "Read"]),
    ]);
    assert!(follow_makers(&bots, NOW).is_empty());
}

#[test]
fn follow_origins_cuts_a_subagent_of_a_made_bot_to_its_parents_tools_as_cut() {
    let bots = fleet(vec![
        bot("maker", "config", &["SendMessage", "Task"]),
        bot("helper", "agent:maker", &["SendMessage", "Task", "Shell"]),
        bot("helper.1", "subagent:helper", &["SendMessage", "Shell"]),
    ]);
    let got = written(&follow_origins(&bots, NOW));
    assert_eq!(got["helper"], ["SendMessage", "Task"]);
    assert_eq!(got["helper.1"], ["SendMessage"]);
}

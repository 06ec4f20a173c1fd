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

/// A made bot its owner removed, and its subagent with it: when a start
/// cuts the made bot's tools (its maker left the config), the removed
/// subagent's follow, and it stays removed. (Its list kept Shell: QA,
/// 2026-12-05.)
#[test]
fn follow_origins_cuts_a_removed_subagent_to_its_removed_parents_tools() {
    let removed = |mut b: BotRecord| {
        b.settings = json!({ "removed_at": 4_000 });
        b
    };
    let bots = fleet(vec![
        removed(bot(
            "helper",
            "agent:maker",
            &["SendMessage", "Task", "Shell"],
        )),
        removed(bot(
            "helper.1",
            "subagent:helper",
            &["SendMessage", "Shell"],
        )),
    ]);
    let writes = follow_origins(&bots, NOW);
    let got = written(&writes);
    assert_eq!(got["helper"], ["SendMessage"]);
    assert_eq!(got["helper.1"], ["SendMessage"]);
    for w in &writes {
        let Mutation::UpsertBot(b) = w else {
            unreachable!()
        };
        assert!(b.removed_at().is_some(), "{b:?}");
    }
}

/// `bot` with a daily token budget.
fn budgeted(mut b: BotRecord, budget: u64) -> BotRecord {
    b.settings = json!({ "daily_token_budget": budget, "created_by_call": "t:c" });
    b
}

/// The daily token budget each write gives, by bot id (the record's other
/// settings kept).
fn written_budgets(writes: &[Mutation]) -> HashMap<String, Option<u64>> {
    writes
        .iter()
        .map(|w| {
            let Mutation::UpsertBot(b) = w else {
                panic!("not a bot's record: {w:?}");
            };
            assert_eq!(b.updated_at, NOW);
            assert_eq!(b.settings["created_by_call"], "t:c", "{b:?}");
            (
                b.id.to_string(),
                b.settings
                    .get("daily_token_budget")
                    .and_then(|v| v.as_u64()),
            )
        })
        .collect()
}

/// A bot made by a budgeted bot spends at most what its maker may: when
/// the maker's budget is lowered in fleet.toml, the next start lowers its
/// bots' (and theirs, down the chain), leaving their tools alone; a bot
/// made before budgets were copied takes its maker's; a bot whose maker is
/// removed keeps its own; one already at its maker's budget is not written.
#[test]
fn follow_makers_gives_a_made_bot_its_makers_budget_as_it_now_is() {
    let tools = &["SendMessage", "CreateAgent"];
    let bots = fleet(vec![
        // lowered from 5,000 to 300 in fleet.toml
        budgeted(bot("maker", "config", tools), 300),
        budgeted(bot("helper", "agent:maker", tools), 5_000),
        budgeted(bot("helper2", "agent:helper", tools), 5_000),
        // made before a made bot took its maker's budget: none
        bot("older", "agent:maker", tools),
        budgeted(bot("gone", "config", tools), 10).mark_removed(10),
        budgeted(bot("orphan", "agent:gone", &["SendMessage"]), 900),
        budgeted(bot("within", "config", tools), 700),
        budgeted(bot("kept", "agent:within", tools), 700),
    ]);
    let mut older = bots[&BotId::new("older").unwrap()].clone();
    older.settings = json!({ "created_by_call": "t:c" });
    let bots = fleet(
        bots.into_values()
            .map(|b| {
                if b.id.as_str() == "older" {
                    older.clone()
                } else {
                    b
                }
            })
            .collect(),
    );
    let writes = follow_makers(&bots, NOW);
    let got = written_budgets(&writes);
    let want: HashMap<String, Option<u64>> = [
        ("helper".to_owned(), Some(300)),
        ("helper2".to_owned(), Some(300)),
        ("older".to_owned(), Some(300)),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, want);
    for w in &writes {
        if let Mutation::UpsertBot(b) = w {
            assert_eq!(b.tools, ["SendMessage", "CreateAgent"], "{b:?}");
        }
    }
    // brought in line: the next start writes nothing
    let after = fleet(
        bots.into_values()
            .map(|b| {
                writes
                    .iter()
                    .find_map(|w| match w {
                        Mutation::UpsertBot(n) if n.id == b.id => Some(n.clone()),
                        _ => None,
                    })
                    .unwrap_or(b)
            })
            .collect(),
    );
    assert!(follow_makers(&after, NOW).is_empty());
}

/// A maker without a budget: its bots have none either (the cap of no
/// budget); tools cut and budget dropped in one write.
#[test]
fn follow_makers_drops_the_budget_of_a_bot_whose_maker_has_none() {
    let bots = fleet(vec![
        bot("maker", "config", &["SendMessage"]),
        budgeted(bot("helper", "agent:maker", &["SendMessage", "Write"]), 50),
    ]);
    let writes = follow_makers(&bots, NOW);
    assert_eq!(written_budgets(&writes)["helper"], None);
    assert_eq!(written(&writes)["helper"], ["SendMessage"]);
}

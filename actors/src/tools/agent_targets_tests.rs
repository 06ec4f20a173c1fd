//! Which bots the agent tools address (round 20, H4 findings 1, 2, 3, 6
//! and 10): never a subagent, an unknown name answered with a short list,
//! and what CreateAgent may make.
#![allow(clippy::unwrap_used)]

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SubagentRecord;
use botfleet_memory::SubagentStatus;
use serde_json::Value;
use serde_json::json;

use super::super::tests::bot_of;
use super::super::tests::speaker;
use crate::tools::CreateAgent;
use crate::tools::SendMessage;
use crate::tools::SendToAgent;
use crate::tools::Tool;
use crate::tools::UpdateAgent;
use crate::tools::test_support::ToolFixture;

/// The caller `b` of [`speaker`], with the subagent tools too, stored.
async fn parent() -> ToolFixture {
    let mut f = speaker();
    f.bot.tools.extend(
        ["SendToAgent", "Task", "MessageSubagent"]
            .into_iter()
            .map(String::from),
    );
    f.rt.store
        .write(vec![Mutation::UpsertBot(f.bot.clone())])
        .await
        .unwrap();
    f
}

/// Writes subagent `id` of `parent` (a bot of the fixture's owner) in
/// `status`.
async fn subagent(f: &ToolFixture, parent: &str, id: &str, status: SubagentStatus) {
    let id = BotId::new(id).unwrap();
    f.rt.store
        .write(vec![
            Mutation::UpsertBot(BotRecord {
                id: id.clone(),
                name: format!("{parent} · task {id}"),
                owner: f.bot.owner.clone(),
                role: "You are a subagent.".into(),
                provider: "p".into(),
                tools: vec!["SendMessage".into()],
                settings: json!({ "parent": parent }),
                origin: format!("subagent:{parent}"),
                created_at: 0,
                updated_at: 0,
            }),
            Mutation::CreateSubagent(SubagentRecord {
                id,
                parent: BotId::new(parent).unwrap(),
                parent_session: f.scope.session.id,
                description: "task".into(),
                status,
                result: None,
                created_at: 0,
                updated_at: 0,
            }),
        ])
        .await
        .unwrap();
}

/// Regression (H4 finding 1 and its addendum): SendToAgent to the
/// caller's own finished subagent said "delivered" and ran it again
/// outside its task (CheckSubagent said `done` while it worked, past
/// `runtime.max_subagents`); to another bot's subagent it gave work that
/// bot could neither check nor stop. Any subagent is refused now, by id or
/// name, with what to do instead, and nothing is sent (the call has no
/// effect); so is SendMessage in a conversation with one.
#[tokio::test]
async fn send_to_agent_refuses_any_subagent_and_sends_nothing() {
    let mut f = parent().await;
    f.rt.store
        .write(vec![Mutation::UpsertBot(bot_of("p", "P", "u", json!({})))])
        .await
        .unwrap();
    subagent(&f, "b", "b.sub-aaa", SubagentStatus::Done).await;
    subagent(&f, "b", "b.sub-bbb", SubagentStatus::Stopped).await;
    subagent(&f, "p", "p.sub-ccc", SubagentStatus::Running).await;
    let send = |call: &'static str, agent: &str| {
        let args = json!({"agent": agent, "text": "one more thing"});
        let f = &f;
        async move { SendToAgent.call(&f.ctx(call), args).await }
    };
    let own = "error: b.sub-aaa is your subagent: it takes work only as a task, through your \
               subagent tools (so its status and your limit of running subagents hold); \
               nothing was sent. Next step: give it more work with MessageSubagent (it counts \
               against your running subagents), or start a new subagent with Task";
    for (call, agent) in [("c1", "b.sub-aaa"), ("c2", "b · task b.sub-aaa")] {
        assert_eq!(
            send(call, agent).await.unwrap_err().to_string(),
            own,
            "{agent}"
        );
    }
    assert_eq!(
        send("c3", "b.sub-bbb").await.unwrap_err().to_string(),
        "error: subagent b.sub-bbb was stopped and takes no more messages: nothing was sent. \
         Next step: start a new subagent with Task"
    );
    assert_eq!(
        send("c4", "p.sub-ccc").await.unwrap_err().to_string(),
        "error: p.sub-ccc is a subagent of p, and only p gives it work: nothing was sent. \
         Next step: message p, which started it, or tell your person instead"
    );
    // the bots that are no subagents are reached as before
    let sent = send("c5", "p").await.unwrap();
    assert!(
        sent.content.starts_with("delivered to p as message "),
        "{sent:?}"
    );

    // a conversation with a subagent (opened before this rule): a reply
    // there is refused the same way
    let key = SessionKey {
        bot: f.bot.id.clone(),
        kind: SessionKind::Agent,
        peer: "b.sub-aaa".into(),
    };
    f.scope.session.id = key.id();
    f.scope.session.key = key;
    let err = SendMessage
        .call(&f.ctx("c6"), json!({"text": "here you go"}))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), own);
}

/// Regression (H4 finding 2 and its addendum): UpdateAgent wrote tools a
/// subagent can never use into its record (`GET /v1/bots` then showed
/// them) and rewrote its role, its task and report instructions. A
/// subagent, the caller's own or another bot's, is refused, and nothing
/// changes (the call has no effect).
#[tokio::test]
async fn update_agent_refuses_a_subagent() {
    let f = parent().await;
    subagent(&f, "b", "b.sub-aaa", SubagentStatus::Done).await;
    subagent(&f, "p", "p.sub-ccc", SubagentStatus::Running).await;
    let update = |call: &'static str, args: Value| {
        let f = &f;
        async move { UpdateAgent.call(&f.ctx(call), args).await }
    };
    for (call, args) in [
        (
            "u1",
            json!({"agent": "b.sub-aaa", "tools": ["SendMessage", "Task"]}),
        ),
        (
            "u2",
            json!({"agent": "b.sub-aaa", "role": "no longer a subagent"}),
        ),
    ] {
        assert_eq!(
            update(call, args).await.unwrap_err().to_string(),
            "error: b.sub-aaa is your subagent: its role is its task and its tools were set \
             when Task made it, so UpdateAgent does not change it; nothing was changed. Next \
             step: give it more work with MessageSubagent (it counts against your running \
             subagents), or start a new subagent with Task"
        );
    }
    let err = update("u3", json!({"agent": "p.sub-ccc", "name": "Mine now"}))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "error: p.sub-ccc is a subagent of p: its task defines it and only p steers it; \
         nothing was changed. Next step: update an agent that is not a subagent, or message p"
    );
    let kept = f.rt.store.get_bot(&BotId::new("b.sub-aaa").unwrap()).await;
    let kept = kept.unwrap().unwrap();
    assert_eq!(kept.tools, vec!["SendMessage".to_owned()]);
    assert_eq!(kept.role, "You are a subagent.");
}

/// Regression (H4 finding 3): CreateAgent made `boss.sub-000000000000`,
/// listed among boss's subagents and reading as one (CheckSubagent knew
/// nothing of it). An id of a subagent's form is refused, in any case,
/// and nothing is made; an id merely holding `sub` is fine.
#[tokio::test]
async fn create_agent_refuses_an_id_of_a_subagents_form() {
    let f = speaker();
    for (call, id) in [("c1", "b.sub-000000000000"), ("c2", "Boss.SUB-ABC123")] {
        let args = json!({"name": "Kid", "role": "Helps.", "id": id});
        let err = CreateAgent.call(&f.ctx(call), args).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "error: the id {id:?} has the form of a subagent's id (`<bot>.sub-<hex \
                 digits>`), which only Task gives its subagents. Next step: pass another `id`, \
                 without `.sub-`, or leave `id` out to make one from the name"
            )
        );
        let none = f.rt.store.get_bot(&BotId::new(id).unwrap()).await;
        assert!(none.unwrap().is_none(), "{id}");
    }
    let args = json!({"name": "Kid", "role": "Helps.", "id": "b.sub-team"});
    CreateAgent.call(&f.ctx("c3"), args).await.unwrap();
}

/// Regression (H4 finding 10): CreateAgent had no limit (300 bots in one
/// turn). At `runtime.max_created_agents` made bots of the owner still in
/// the fleet it is refused, saying what to do; a removed one does not
/// count, and a creation run again after a crash still finds its bot.
#[tokio::test]
async fn create_agent_stops_at_the_owners_limit_of_made_bots() {
    let mut f = speaker();
    f.rt.settings.max_created_agents = 2;
    let create = |call: &'static str, id: &str| {
        let args = json!({"name": format!("Kid {id}"), "role": "Helps.", "id": id});
        let f = &f;
        async move { CreateAgent.call(&f.ctx(call), args).await }
    };
    create("c1", "kid-1").await.unwrap();
    let second = create("c2", "kid-2").await.unwrap();
    let refusal = "error: your owner already has 2 agents made by CreateAgent (the limit is 2, \
                   runtime.max_created_agents); no agent was created. Next step: give the work \
                   to an agent that exists (SendToAgent), or ask your person to remove agents \
                   no longer needed";
    assert_eq!(
        create("c3", "kid-3").await.unwrap_err().to_string(),
        refusal
    );
    assert!(
        f.rt.store
            .get_bot(&BotId::new("kid-3").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    // the call that made kid-2, run again after a crash: its own bot
    let again = create("c2", "kid-2").await.unwrap();
    assert_eq!(again.content, second.content);
    // bots of other owners and bots not made by CreateAgent do not count
    let other = BotRecord {
        origin: "agent:zed".into(),
        ..bot_of("their-kid", "Their Kid", "mallory", json!({}))
    };
    f.rt.store
        .write(vec![Mutation::UpsertBot(other)])
        .await
        .unwrap();
    assert_eq!(
        create("c4", "kid-4").await.unwrap_err().to_string(),
        refusal
    );
    // one taken out of the fleet makes room
    let kid1 = f.rt.store.get_bot(&BotId::new("kid-1").unwrap()).await;
    let removed = kid1.unwrap().unwrap().mark_removed(1);
    f.rt.store
        .write(vec![Mutation::UpsertBot(removed)])
        .await
        .unwrap();
    create("c5", "kid-5").await.unwrap();
}

/// Regression (H4 findings 6 and 10): an unknown agent's next step listed
/// every bot of the owner, subagents among them (3 KB at 327 bots). It
/// names at most ten, fleet.toml bots first, never a subagent or a
/// removed bot, and how many more there are.
#[tokio::test]
async fn an_unknown_agent_names_at_most_ten_likely_ones() {
    let f = parent().await;
    let owner = f.bot.owner.to_string();
    let mut bots = vec![
        Mutation::UpsertBot(bot_of("zz-cfg", "Zed", &owner, json!({}))),
        Mutation::UpsertBot(bot_of("zy-cfg", "Zy", &owner, json!({}))),
        Mutation::UpsertBot(bot_of("cfg-gone", "Gone", &owner, json!({"removed_at": 5}))),
    ];
    for n in 0..12 {
        bots.push(Mutation::UpsertBot(BotRecord {
            origin: "agent:zy-cfg".into(),
            ..bot_of(
                &format!("a-kid-{n:02}"),
                &format!("Made {n}"),
                &owner,
                json!({}),
            )
        }));
    }
    f.rt.store.write(bots).await.unwrap();
    subagent(&f, "b", "b.sub-aaa", SubagentStatus::Done).await;
    let err = SendToAgent
        .call(&f.ctx("c1"), json!({"agent": "nobody", "text": "hi"}))
        .await
        .unwrap_err();
    assert_eq!(err.message, "there is no agent \"nobody\"");
    // an empty one is said so, with the same next step (QA)
    for empty in ["", " ", "@"] {
        let said = SendToAgent
            .call(&f.ctx("c1"), json!({"agent": empty, "text": "hi"}))
            .await
            .unwrap_err();
        assert_eq!(
            said.message, "`agent` is empty: give the id or name of one of your bots",
            "{empty:?}"
        );
        assert_eq!(said.hint, err.hint, "{empty:?}");
    }
    // the two fleet.toml bots, then 8 of the 12 made bots (the latest:
    // the store stamps them as it writes them), never the subagent, the
    // removed bot, or the caller `b`, made before them
    let (ids, more) = err
        .hint
        .strip_prefix("message one of: ")
        .and_then(|h| h.split_once(" ("))
        .unwrap();
    let ids: Vec<&str> = ids.split(", ").collect();
    assert_eq!(ids.len(), 10, "{}", err.hint);
    assert_eq!(ids[..2], ["zy-cfg", "zz-cfg"], "{}", err.hint);
    assert!(
        ids[2..].iter().all(|id| id.starts_with("a-kid-")),
        "{}",
        err.hint
    );
    assert_eq!(
        more,
        "5 more not listed: pass the exact id or name of the one you mean; your person sees \
         them all with `botfleet bots`)"
    );
    let err = UpdateAgent
        .call(&f.ctx("c2"), json!({"agent": "nobody", "role": "r"}))
        .await
        .unwrap_err();
    assert!(
        err.hint.starts_with("pass one of: zy-cfg, zz-cfg, a-kid-")
            && err.hint.contains(" (5 more not listed: "),
        "{}",
        err.hint
    );
}

/// A bot written as it is mentioned, `@P` or `@p`, is that bot (models
/// write the `@` of a mention: "there is no agent" sent them looking for
/// another).
#[tokio::test]
async fn an_agent_written_with_its_mention_at_is_that_agent() {
    let f = parent().await;
    f.rt.store
        .write(vec![Mutation::UpsertBot(bot_of(
            "p",
            "Pal",
            "u",
            json!({}),
        ))])
        .await
        .unwrap();
    for (call, agent) in [("c1", "@p"), ("c2", "@Pal"), ("c3", " @ pal ")] {
        let sent = SendToAgent
            .call(&f.ctx(call), json!({"agent": agent, "text": "hi"}))
            .await
            .unwrap();
        assert!(
            sent.content.starts_with("delivered to p as message "),
            "{agent}: {sent:?}"
        );
    }
    let err = SendToAgent
        .call(&f.ctx("c4"), json!({"agent": "@", "text": "hi"}))
        .await
        .unwrap_err();
    // a mention's `@` alone names nobody: the agent is empty
    assert!(err.message.starts_with("`agent` is empty"), "{err}");
}

/// The bots an unknown agent's refusal names: fleet.toml bots by id, then
/// the others latest first; subagents and removed bots never.
#[test]
fn the_likely_bots_are_the_configs_then_the_latest_made() {
    let made = |id: &str, at: i64| BotRecord {
        origin: "agent:cfg".into(),
        created_at: at,
        ..bot_of(id, id, "u", json!({}))
    };
    let mut bots = vec![
        bot_of("cfg", "Cfg", "u", json!({})),
        bot_of("gone", "Gone", "u", json!({"removed_at": 1})),
        BotRecord {
            origin: "subagent:cfg".into(),
            created_at: 99,
            ..bot_of("cfg.sub-a1", "Cfg · x", "u", json!({}))
        },
    ];
    bots.extend((0..10).map(|n| made(&format!("old-{n}"), n)));
    bots.push(made("newest", 50));
    bots.push(made("newer", 40));
    assert_eq!(
        super::likely_meant(&bots, "message one of"),
        "message one of: cfg, newest, newer, old-9, old-8, old-7, old-6, old-5, old-4, old-3 \
         (3 more not listed: pass the exact id or name of the one you mean; your person sees \
         them all with `botfleet bots`)"
    );
    bots.truncate(4);
    assert_eq!(
        super::likely_meant(&bots, "pass one of"),
        "pass one of: cfg, old-0"
    );
}

#![allow(clippy::unwrap_used)]

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Mutation;

use super::*;
use crate::tools::test_support::ToolFixture;

/// `n` subagents of the fixture's bot, `b.sub-0` … created in that order;
/// those whose index `running` accepts are running, the rest done.
async fn with_subagents(f: &ToolFixture, n: usize, running: impl Fn(usize) -> bool) {
    let mut batch = Vec::new();
    for i in 0..n {
        let id = BotId::new(format!("b.sub-{i}")).unwrap();
        let at = i64::try_from(i).unwrap();
        batch.push(Mutation::UpsertBot(BotRecord {
            id: id.clone(),
            name: format!("B · task {i}"),
            owner: f.bot.owner.clone(),
            role: String::new(),
            provider: "p".into(),
            tools: vec!["SendMessage".into()],
            settings: json!({ "parent": "b" }),
            origin: "subagent:b".into(),
            created_at: at,
            updated_at: at,
        }));
        batch.push(Mutation::CreateSubagent(SubagentRecord {
            id,
            parent: f.bot.id.clone(),
            parent_session: f.scope.session.id,
            description: format!("task {i}"),
            status: if running(i) {
                SubagentStatus::Running
            } else {
                SubagentStatus::Done
            },
            result: None,
            created_at: at,
            updated_at: at,
        }));
    }
    f.rt.store.write(batch).await.unwrap();
}

async fn list(f: &ToolFixture) -> Vec<String> {
    let out = CheckSubagent
        .call(&f.ctx("c1"), json!({}))
        .await
        .unwrap()
        .content;
    out.lines().map(str::to_owned).collect()
}

/// Regression (round 19, H1): the list named every subagent the bot ever
/// made, 300 lines (15 KB) after 300 tasks, read into its context at each
/// check. It shows every running one and the 20 latest finished ones, in
/// creation order, and says how many it left out.
#[tokio::test]
async fn the_list_shows_running_tasks_and_the_latest_finished_ones() {
    let f = ToolFixture::new();
    // 300 tasks; 3 still running, one of them among the oldest
    with_subagents(&f, 300, |i| matches!(i, 5 | 150 | 299)).await;
    let lines = list(&f).await;
    assert_eq!(lines[0], "your delegated tasks:");
    let shown: Vec<&str> = lines[1..lines.len() - 1]
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    let mut expected = vec!["b.sub-5".to_owned(), "b.sub-150".to_owned()];
    expected.extend((279..299).map(|i| format!("b.sub-{i}")));
    expected.push("b.sub-299".into());
    assert_eq!(shown, expected);
    assert!(lines[2].ends_with("[running] task 150"), "{}", lines[2]);
    assert_eq!(
        lines.last().unwrap(),
        "(277 earlier finished tasks not shown; CheckSubagent with an id shows any of them)"
    );
    // one left out is still shown in detail by its id
    let one = CheckSubagent
        .call(&f.ctx("c2"), json!({ "id": "b.sub-7" }))
        .await
        .unwrap()
        .content;
    assert!(one.starts_with("subagent b.sub-7 [done]: task 7"), "{one}");
}

/// Twenty finished tasks or fewer: all shown, no note.
#[tokio::test]
async fn a_short_list_is_shown_whole() {
    let f = ToolFixture::new();
    with_subagents(&f, 21, |i| i == 0).await;
    let lines = list(&f).await;
    assert_eq!(lines.len(), 22, "{lines:?}");
    assert!(lines.iter().all(|l| !l.contains("not shown")));
}

/// Regression (round 20, H4 finding 6): an unknown id's refusal named
/// every subagent ever made (2.7 KB after 117 tasks, 23 KB after a
/// thousand), in the parent's context for good, from CheckSubagent,
/// StopSubagent and MessageSubagent alike. It names the running ones and
/// the five latest finished ones, and says how many it left out.
#[tokio::test]
async fn an_unknown_id_names_the_running_and_the_latest_finished_subagents_only() {
    let f = ToolFixture::new();
    with_subagents(&f, 1000, |i| matches!(i, 3 | 500)).await;
    let expected = "use the id of one of your subagents (running: b.sub-3, b.sub-500; \
                    latest finished: b.sub-995, b.sub-996, b.sub-997, b.sub-998, b.sub-999); \
                    993 earlier finished ones are not named here: CheckSubagent without an id \
                    lists your tasks";
    let check = CheckSubagent
        .call(&f.ctx("c1"), json!({ "id": "nope" }))
        .await
        .unwrap_err();
    let stop = super::super::StopSubagent
        .call(&f.ctx("c2"), json!({ "id": "nope" }))
        .await
        .unwrap_err();
    let message = super::super::MessageSubagent
        .call(&f.ctx("c3"), json!({ "id": "nope", "text": "x" }))
        .await
        .unwrap_err();
    for e in [check, stop, message] {
        assert_eq!(e.message, "you have no subagent \"nope\"");
        assert_eq!(e.hint, expected);
    }
    // an empty id says so (QA: `you have no subagent ""`)
    let check = CheckSubagent
        .call(&f.ctx("c4"), json!({ "id": "" }))
        .await
        .unwrap_err();
    let stop = super::super::StopSubagent
        .call(&f.ctx("c5"), json!({ "id": " " }))
        .await
        .unwrap_err();
    for e in [check, stop] {
        assert_eq!(
            e.message,
            "`id` is empty: give the id of one of your subagents (Task returned it)"
        );
        assert_eq!(e.hint, expected);
    }
}

/// A few subagents: all named, no count of left-out ones; none: start one.
#[tokio::test]
async fn an_unknown_id_among_few_subagents_names_them_all() {
    let f = ToolFixture::new();
    let none = CheckSubagent
        .call(&f.ctx("c1"), json!({ "id": "nope" }))
        .await
        .unwrap_err();
    assert_eq!(none.hint, "start one with Task");
    with_subagents(&f, 3, |_| false).await;
    let few = CheckSubagent
        .call(&f.ctx("c2"), json!({ "id": "nope" }))
        .await
        .unwrap_err();
    assert_eq!(
        few.hint,
        "use the id of one of your subagents (latest finished: b.sub-0, b.sub-1, b.sub-2)"
    );
}

/// Regression (QA): CheckSubagent read the store only, so a Task earlier
/// in the same step was not in the list (nor found by its id), and a
/// finished subagent given more work by MessageSubagent in that step
/// still showed `[done]`: a model could take its Task for failed and
/// delegate the work again. The list is as the step's calls leave it.
#[tokio::test]
async fn the_list_counts_the_steps_earlier_calls() {
    let f = ToolFixture::new();
    with_subagents(&f, 2, |_| false).await;
    let task = json!({"description": "survey", "prompt": "Look around and report."});
    let started = super::super::Task.call(&f.ctx("c1"), task).await.unwrap();
    let more = super::super::MessageSubagent
        .call(
            &f.ctx("c2"),
            json!({ "id": "b.sub-0", "text": "and the roof too" }),
        )
        .await
        .unwrap();
    let child = started
        .effects
        .iter()
        .flat_map(Mutation::within_limits)
        .find_map(|m| match m {
            Mutation::CreateSubagent(s) => Some(s.id.to_string()),
            _ => None,
        })
        .unwrap();
    let earlier: Vec<Mutation> = started.effects.into_iter().chain(more.effects).collect();
    let ctx = ToolContext {
        step_effects: &earlier,
        ..f.ctx("c3")
    };
    let out = CheckSubagent.call(&ctx, json!({})).await.unwrap().content;
    assert_eq!(
        out,
        format!(
            "your delegated tasks:\n- b.sub-0 [running] task 0\n- b.sub-1 [done] task 1\n- \
             {child} [running] survey"
        )
    );
    // and by id
    let ctx = ToolContext {
        step_effects: &earlier,
        ..f.ctx("c4")
    };
    let one = CheckSubagent
        .call(&ctx, json!({ "id": child }))
        .await
        .unwrap()
        .content;
    assert!(
        one.starts_with(&format!("subagent {child} [running]: survey")),
        "{one}"
    );
    let ctx = ToolContext {
        step_effects: &earlier,
        ..f.ctx("c5")
    };
    let one = CheckSubagent
        .call(&ctx, json!({ "id": "b.sub-0" }))
        .await
        .unwrap()
        .content;
    assert!(
        one.starts_with("subagent b.sub-0 [running]: task 0"),
        "{one}"
    );
}

/// Regression (QA, 2026-12-05): MessageSubagent and StopSubagent read the
/// store only, so a subagent whose Task was an earlier call of the same
/// step was "no subagent" to them. A steering message now goes to it
/// (committed with the step, after its task), and a stop says it has not
/// started yet instead of that it does not exist.
#[tokio::test]
async fn a_subagent_started_in_the_step_is_steered_and_not_stopped_yet() {
    let f = ToolFixture::new();
    let task = json!({"description": "survey", "prompt": "Look around and report."});
    let started = super::super::Task.call(&f.ctx("c1"), task).await.unwrap();
    let child = started
        .effects
        .iter()
        .flat_map(Mutation::within_limits)
        .find_map(|m| match m {
            Mutation::CreateSubagent(s) => Some(s.id.clone()),
            _ => None,
        })
        .unwrap();
    let earlier = started.effects.clone();
    let ctx = ToolContext {
        step_effects: &earlier,
        ..f.ctx("c2")
    };
    let steer = json!({ "id": child.as_str(), "text": "and the roof too" });
    let steered = super::super::MessageSubagent
        .call(&ctx, steer)
        .await
        .unwrap();
    assert_eq!(steered.content, format!("sent to subagent {child}"));
    let ctx = ToolContext {
        step_effects: &earlier,
        ..f.ctx("c3")
    };
    let stop = super::super::StopSubagent
        .call(&ctx, json!({ "id": child.as_str() }))
        .await
        .unwrap_err();
    assert!(
        stop.message
            .contains("is started by your Task call of this same step"),
        "{stop:?}"
    );
    assert!(stop.hint.contains("in your next step"), "{stop:?}");
    // the step commits: the task, then the steering message, both to it
    let step: Vec<Mutation> = started.effects.into_iter().chain(steered.effects).collect();
    f.rt.store.write(step).await.unwrap();
    let session = super::super::subagent_session(&child, &f.bot.id).id();
    let texts: Vec<String> =
        f.rt.store
            .tail_entries(session, 10)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.kind {
                EntryKind::Event { text, .. } => Some(text),
                _ => None,
            })
            .collect();
    assert_eq!(texts, ["Look around and report.", "and the roof too"]);
}

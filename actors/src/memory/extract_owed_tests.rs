//! Owed extractions at start: run again once and cleared; given up (and
//! cleared, without asking the model) when their bot is gone, they were
//! cut off too often or the bot's model cannot extract; a second run of a
//! turn adds nothing twice.

use std::sync::Arc;

use botfleet_memory::BotId;
use botfleet_memory::Layer;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::OwedExtraction;
use botfleet_memory::TurnId;
use botfleet_memory::bot_scopes;
use pretty_assertions::assert_eq;

use super::MAX_RERUNS;
use super::resume_owed_extractions;
use super::spawn_extract_after_turn;
use crate::model::Script;
use crate::model::ScriptedModel;
use crate::tools::test_support::ToolFixture;

const FACT: &str = "Alice owns a red bicycle";
const SAID: &str = "I bought a red bicycle";

fn script() -> String {
    format!(
        r#"
[[rule]]
purpose = "extract"
match = "(?s)red bicycle"
steps = [{{ text = '{{"add": [{{"text": "{FACT}"}}]}}' }}]
"#
    )
}

fn owed(turn: TurnId, bot: &BotId, f: &ToolFixture) -> OwedExtraction {
    OwedExtraction {
        turn,
        bot: bot.clone(),
        session: f.scope.session.id,
        shown: Vec::new(),
        user_texts: vec![SAID.into()],
        final_reply: "Nice bike!".into(),
        attempts: 0,
        created_at: 0,
    }
}

#[tokio::test]
async fn owed_extractions_run_again_once_or_are_given_up() {
    let mut f = ToolFixture::new();
    let model = ScriptedModel::new(Script::parse(&script(), "test").unwrap());
    f.rt.models.insert("p".into(), Arc::new(model));
    f.rt.settings.extract_memory = true;
    let (ok, gone, tired) = (TurnId::new_v7(), TurnId::new_v7(), TurnId::new_v7());
    let nobody = BotId::new("nobody").unwrap();
    let mut batch = vec![
        Mutation::UpsertBot(f.bot.clone()),
        Mutation::OweExtraction(Box::new(owed(ok, &f.bot.id, &f))),
        Mutation::OweExtraction(Box::new(owed(gone, &nobody, &f))),
        Mutation::OweExtraction(Box::new(owed(tired, &f.bot.id, &f))),
    ];
    for _ in 0..MAX_RERUNS {
        batch.push(Mutation::BumpExtraction { turn: tired });
    }
    let results = f.rt.store.write(batch).await.unwrap();
    assert_eq!(results.last(), Some(&MutationResult::Attempts(MAX_RERUNS)));
    let ToolFixture {
        _dir,
        rt,
        bot,
        scope,
        ..
    } = f;
    let rt = Arc::new(rt);

    let ran = resume_owed_extractions(Arc::clone(&rt)).await.unwrap();
    assert_eq!(ran, 1, "only the turn whose bot is there and not tired");
    let now = rt.store.clock().now_ms();
    let profile = |items: Vec<botfleet_memory::MemoryItem>| -> Vec<String> {
        items
            .into_iter()
            .filter(|i| i.layer == Layer::Profile)
            .map(|i| i.text)
            .collect()
    };
    let items = rt.store.memory_items(bot_scopes(&bot), now).await.unwrap();
    assert_eq!(profile(items), [FACT]);
    assert_eq!(rt.store.owed_extractions(10).await.unwrap(), []);
    assert_eq!(resume_owed_extractions(Arc::clone(&rt)).await.unwrap(), 0);

    // the same turn extracted once more (a re-run that raced its first
    // run's end) finds its fact and adds nothing
    let report = spawn_extract_after_turn(
        Arc::clone(&rt),
        bot.clone(),
        scope.session.id,
        ok,
        Vec::new(),
        vec![SAID.into()],
        "Nice bike!".into(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(report.added.is_empty(), "{report:?}");
    assert_eq!(report.unchanged.len(), 1, "{report:?}");
    let items = rt.store.memory_items(bot_scopes(&bot), now).await.unwrap();
    assert_eq!(profile(items), [FACT]);
    assert_eq!(rt.store.owed_extractions(10).await.unwrap(), []);
}

/// An extraction owed by a bot whose model has no extract rule (owed from
/// before its script lost it) is dropped without asking the model, which
/// would answer nothing and log a failure.
#[tokio::test]
async fn an_owed_extraction_of_a_model_that_cannot_extract_is_dropped() {
    let mut f = ToolFixture::new();
    let chat_only = "[[rule]]\nsteps = [{ text = \"hi\" }]\n";
    let model = ScriptedModel::new(Script::parse(chat_only, "test").unwrap());
    f.rt.models.insert("p".into(), Arc::new(model));
    f.rt.settings.extract_memory = true;
    let turn = TurnId::new_v7();
    let batch = vec![
        Mutation::UpsertBot(f.bot.clone()),
        Mutation::OweExtraction(Box::new(owed(turn, &f.bot.id, &f))),
    ];
    f.rt.store.write(batch).await.unwrap();
    let rt = Arc::new(f.rt);

    let ran = resume_owed_extractions(Arc::clone(&rt)).await.unwrap();
    assert_eq!(ran, 0, "the model was not asked");
    assert_eq!(rt.store.owed_extractions(10).await.unwrap(), []);
}

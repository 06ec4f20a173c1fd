//! `Store::bots_answering_to`: the bots CreateAgent's and UpdateAgent's
//! name check compares a new name with, found by index (their folded ids
//! and names), not by reading every bot of the fleet.
#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::ids::BotId;
use crate::ids::UserId;
use crate::ids::name_key;
use crate::record::BotRecord;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SubagentRecord;
use crate::record::SubagentStatus;
use crate::store::Mutation;
use crate::store::Store;
use crate::store::StoreOptions;
use crate::store::reader;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn bot(id: &str, name: &str, owner: &str, origin: &str) -> BotRecord {
    BotRecord {
        id: BotId::new(id).unwrap(),
        name: name.into(),
        owner: UserId::new(owner).unwrap(),
        role: String::new(),
        provider: "main".into(),
        tools: Vec::new(),
        settings: json!({}),
        origin: origin.into(),
        created_at: 0,
        updated_at: 0,
    }
}

/// The ids of the bots answering to the mentions `words` (folded here).
async fn answering(store: &Store, words: &[&str]) -> Vec<String> {
    let keys: Vec<String> = words.iter().map(|w| name_key(w)).collect();
    store
        .bots_answering_to(&keys)
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.id.to_string())
        .collect()
}

/// Ids in any case, names in any case, width and spacing, of every
/// owner; each bot once, by id; and a name changed by any write (an
/// upsert, a creation, a subagent renamed with its parent) is found by
/// its new words only.
#[tokio::test]
async fn bots_are_found_by_their_folded_ids_and_names() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db")))?;
    store
        .write(vec![
            Mutation::UpsertBot(bot("helper", "Helper", "alice", "config")),
            Mutation::UpsertBot(bot("r2", "Ｒｅｓｅａｒｃｈ Bot", "bob", "config")),
            Mutation::UpsertBot(bot("lead", "Lead", "alice", "config")),
            Mutation::UpsertBot(bot("other", "helper", "carol", "config")),
        ])
        .await?;
    store
        .write(vec![Mutation::CreateBot(bot(
            "made",
            "ΣΊΣΥΦΟΣ",
            "alice",
            "agent:lead",
        ))])
        .await?;
    assert_eq!(answering(&store, &["HELPER"]).await, ["helper", "other"]);
    assert_eq!(answering(&store, &["research bot"]).await, ["r2"]);
    assert_eq!(answering(&store, &["R2", "Lead"]).await, ["lead", "r2"]);
    assert_eq!(answering(&store, &["σίσυφος", "made"]).await, ["made"]);
    assert_eq!(
        answering(&store, &["nobody", ""]).await,
        Vec::<String>::new()
    );

    // renamed: found by the new name, no longer by the old one
    store
        .write(vec![Mutation::UpsertBot(bot(
            "r2", "Scout", "bob", "config",
        ))])
        .await?;
    assert_eq!(
        answering(&store, &["researchbot"]).await,
        Vec::<String>::new()
    );
    assert_eq!(answering(&store, &["scout"]).await, ["r2"]);

    // a subagent is named after its parent, and follows its renames
    let sub = "lead.sub-0001";
    store
        .write(vec![
            Mutation::UpsertBot(bot(sub, "Lead · digging", "alice", "subagent:lead")),
            Mutation::CreateSubagent(SubagentRecord {
                id: BotId::new(sub)?,
                parent: BotId::new("lead")?,
                parent_session: SessionKey {
                    bot: BotId::new(sub)?,
                    kind: SessionKind::Subagent,
                    peer: "lead".into(),
                }
                .id(),
                description: "digging".into(),
                status: SubagentStatus::Running,
                result: None,
                created_at: 0,
                updated_at: 0,
            }),
        ])
        .await?;
    store
        .write(vec![Mutation::UpsertBot(bot(
            "lead", "Chief", "alice", "config",
        ))])
        .await?;
    let renamed = store.get_bot(&BotId::new(sub)?).await?.unwrap().name;
    assert!(renamed.starts_with("Chief"), "{renamed}");
    assert_eq!(answering(&store, &[renamed.as_str()]).await, [sub]);
    assert_eq!(
        answering(&store, &["Lead · digging"]).await,
        Vec::<String>::new()
    );
    Ok(())
}

/// The lookup's plan: searches of the folded-id and folded-name indexes,
/// never a scan of `bots` (the check read every bot record of the fleet,
/// every owner's and every subagent's, at each CreateAgent and rename).
/// A row whose folded name was never stored (written outside the store's
/// writer) is still among the bots returned, for the caller to compare.
#[test]
fn the_lookup_searches_indexes_and_never_scans_bots() -> TestResult {
    let mut conn = rusqlite::Connection::open_in_memory()?;
    crate::store::schema::migrate(&mut conn)?;
    for (id, name, key) in [
        ("helper", "Helper", Some("helper")),
        ("zed", "Zeta", Some("zeta")),
        ("raw", "HELPER", None),
    ] {
        conn.execute(
            "INSERT INTO bots (id, name, owner, role, provider, tools, settings, origin,
                               created_at, updated_at, name_key)
             VALUES (?1, ?2, 'alice', '', 'main', '[]', '{}', 'config', 0, 0, ?3)",
            rusqlite::params![id, name, key],
        )?;
    }
    let sql = format!("SELECT id FROM bots {}", reader::BOTS_ANSWERING_TO);
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
    let plan: Vec<String> = stmt
        .query_map(rusqlite::params!["helper"], |r| r.get::<_, String>(3))?
        .collect::<rusqlite::Result<_>>()?;
    assert!(
        plan.iter().all(|step| !step.starts_with("SCAN"))
            && plan.iter().any(|step| step.contains("bots_id_folded"))
            && plan.iter().any(|step| step.contains("bots_name_key")),
        "{plan:?}"
    );
    let found: Vec<String> = reader::bots_answering_to(&conn, "helper")?
        .into_iter()
        .map(|b| b.id.to_string())
        .collect();
    assert_eq!(found, ["helper", "raw"]);
    Ok(())
}

//! `Store::bot_ids_of`: the ids of one owner's bots, read through the
//! index `bots_owner` without decoding a record (the API matches an
//! unwritten DM's session id against them at each read of its entries).
#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::ids::BotId;
use crate::ids::UserId;
use crate::record::BotRecord;
use crate::store::Mutation;
use crate::store::Store;
use crate::store::StoreOptions;
use crate::store::reader;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn bot(id: &str, owner: &str) -> BotRecord {
    BotRecord {
        id: BotId::new(id).unwrap(),
        name: id.to_uppercase(),
        owner: UserId::new(owner).unwrap(),
        role: String::new(),
        provider: "main".into(),
        tools: vec!["Bash".into()],
        settings: json!({ "projects": ["p"] }),
        origin: "config".into(),
        created_at: 0,
        updated_at: 0,
    }
}

/// The same ids as `list_bots` of the owner, only theirs.
#[tokio::test]
async fn the_ids_are_those_of_the_owners_bots() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db")))?;
    store
        .write(vec![
            Mutation::UpsertBot(bot("zed", "alice")),
            Mutation::UpsertBot(bot("helper", "alice")),
            Mutation::UpsertBot(bot("other", "bob")),
        ])
        .await?;
    let alice = UserId::new("alice")?;
    let mut ids: Vec<String> = store
        .bot_ids_of(&alice)
        .await?
        .into_iter()
        .map(|b| b.to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["helper", "zed"]);
    let listed: Vec<String> = store
        .list_bots(Some(&alice))
        .await?
        .into_iter()
        .map(|b| b.id.to_string())
        .collect();
    assert_eq!(ids, listed);
    assert!(store.bot_ids_of(&UserId::new("carol")?).await?.is_empty());
    store.close().await;
    Ok(())
}

/// The plan: a search of `bots_owner`, never a scan of `bots`.
#[test]
fn the_ids_are_read_through_the_owner_index() -> TestResult {
    let mut conn = rusqlite::Connection::open_in_memory()?;
    crate::store::schema::migrate(&mut conn)?;
    for (id, owner) in [("a", "alice"), ("b", "alice"), ("c", "bob")] {
        conn.execute(
            "INSERT INTO bots (id, name, owner, role, provider, tools, settings, origin,
                               created_at, updated_at)
             VALUES (?1, ?1, ?2, '', 'main', '[]', '{}', 'config', 0, 0)",
            rusqlite::params![id, owner],
        )?;
    }
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {}", reader::BOT_IDS_OF_OWNER))?;
    let plan: Vec<String> = stmt
        .query_map(rusqlite::params!["alice"], |r| r.get::<_, String>(3))?
        .collect::<rusqlite::Result<_>>()?;
    assert!(
        plan.iter().all(|step| !step.starts_with("SCAN"))
            && plan.iter().any(|step| step.contains("bots_owner")),
        "{plan:?}"
    );
    Ok(())
}

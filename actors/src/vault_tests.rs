//! The vault: a bot's secrets by name, and none under a reserved name.
#![allow(clippy::unwrap_used)]

use botfleet_memory::BotId;
use botfleet_memory::Mutation;
use botfleet_memory::SecretValue;
use botfleet_memory::StoreOptions;
use botfleet_memory::UserId;
use serde_json::json;

use super::*;

fn bot(secrets: &[&str]) -> BotRecord {
    BotRecord {
        id: BotId::new("r").unwrap(),
        name: "r".into(),
        owner: UserId::new("alice").unwrap(),
        role: "test".into(),
        provider: "p".into(),
        tools: vec!["Shell".into()],
        settings: json!({ "secrets": secrets }),
        origin: "config".into(),
        created_at: 0,
        updated_at: 0,
    }
}

/// A secret stored (and listed by a bot) before its name was reserved is
/// not given to the bot's commands; the others still are.
#[tokio::test]
async fn a_stored_secret_under_a_reserved_name_is_not_injected() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("db"))).unwrap();
    let mut writes = Vec::new();
    for name in ["GIT_CONFIG_GLOBAL", "HTTPS_PROXY", "API_TOKEN"] {
        writes.push(Mutation::SetSecret {
            owner: UserId::new("alice").unwrap(),
            name: name.into(),
            value: SecretValue::new(format!("value-of-{name}")),
        });
    }
    store.write(writes).await.unwrap();
    let vault = Vault::new([(
        "LESSOPEN".to_owned(),
        Secret::new("|/tmp/evil %s".to_owned()),
    )]);
    let got = vault
        .for_bot(
            &store,
            &bot(&["GIT_CONFIG_GLOBAL", "HTTPS_PROXY", "LESSOPEN", "API_TOKEN"]),
        )
        .await
        .unwrap();
    let names: Vec<&str> = got.values.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["API_TOKEN"]);
}

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
    bot_of("alice", secrets)
}

fn bot_of(owner: &str, secrets: &[&str]) -> BotRecord {
    BotRecord {
        id: BotId::new("r").unwrap(),
        name: "r".into(),
        owner: UserId::new(owner).unwrap(),
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

/// Bob's secrets, read for his bot, are scrubbed from alice's bot's output
/// from then on (a command's arguments are readable by every other
/// command), in a turn that began before; once he deleted one, and his
/// bot's secrets were read again, it no longer is.
#[tokio::test]
async fn every_persons_secrets_are_scrubbed_from_every_bots_output() {
    const BOB: &str = "bob-api-secret-value-77777";
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("db"))).unwrap();
    let set = |name: &str, value: &str| Mutation::SetSecret {
        owner: UserId::new("bob").unwrap(),
        name: name.into(),
        value: SecretValue::new(value),
    };
    store
        .write(vec![set("BOB_SECRET", BOB), set("BOB_PIN", "4711")])
        .await
        .unwrap();
    let vault = Vault::default();
    // alice's turn began before bob's bot was given anything
    let alices = vault.for_bot(&store, &bot(&[])).await.unwrap();
    let text = format!("11907 sh -c sleep 8 worker {BOB} 4711");
    assert_eq!(alices.redactor.scrub(&text), text);

    let bobs = vault
        .for_bot(&store, &bot_of("bob", &["BOB_SECRET", "BOB_PIN"]))
        .await
        .unwrap();
    assert_eq!(bobs.values.len(), 2);
    // the short one is not scrubbed from others' output (it would hide
    // innocent text everywhere); bob's own output is scrubbed of both
    let scrubbed = "11907 sh -c sleep 8 worker [redacted] 4711";
    assert_eq!(alices.redactor.scrub(&text), scrubbed);
    assert_eq!(vault.host_redactor().scrub(&text), scrubbed);
    assert_eq!(
        bobs.redactor.scrub(&text),
        "11907 sh -c sleep 8 worker [redacted] [redacted]"
    );

    store
        .write(vec![Mutation::DeleteSecret {
            owner: UserId::new("bob").unwrap(),
            name: "BOB_SECRET".into(),
        }])
        .await
        .unwrap();
    // still scrubbed until bob's secrets are read again
    assert_eq!(alices.redactor.scrub(&text), scrubbed);
    let again = vault
        .for_bot(&store, &bot_of("bob", &["BOB_SECRET", "BOB_PIN"]))
        .await
        .unwrap();
    assert_eq!(again.values.len(), 1);
    assert_eq!(alices.redactor.scrub(&text), text);
}

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

/// A bot's own secret of one to three characters is given to its
/// commands but not scrubbed from its results: `e` is in every word, and
/// the host's own text in them was blanked (QA, 2026-12-06: "not run:
/// this action n[redacted]ds alic[redacted]'s approval"). Four or more
/// (a PIN) still are.
#[tokio::test]
async fn a_bots_own_secret_of_a_few_characters_is_not_scrubbed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("db"))).unwrap();
    let set = |name: &str, value: &str| Mutation::SetSecret {
        owner: UserId::new("alice").unwrap(),
        name: name.into(),
        value: SecretValue::new(value),
    };
    store
        .write(vec![set("API_SEC", "e"), set("PIN", "4711")])
        .await
        .unwrap();
    let vault = Vault::default();
    let hers = vault
        .for_bot(&store, &bot(&["API_SEC", "PIN"]))
        .await
        .unwrap();
    assert_eq!(hers.values.len(), 2);
    assert_eq!(
        hers.redactor
            .scrub("this action needs alice's approval; pin 4711"),
        "this action needs alice's approval; pin [redacted]"
    );
}

fn named(id: &str, owner: &str, secrets: &[&str]) -> BotRecord {
    BotRecord {
        id: BotId::new(id).unwrap(),
        ..bot_of(owner, secrets)
    }
}

/// Where commands are isolated, alice's bot that lists no secret is
/// still scrubbed of what her other bots are given — the fleet file's
/// secret one of them lists (also one listed only after the first read),
/// and her stored secrets on its first turn — since those bots share its
/// workspace and may write them there (QA, 2026-12-04: a2 read sh's
/// secret in clear from a file sh wrote). Bob's bot is scrubbed of none
/// of hers: no command of his can reach them, and scrubbing would only
/// answer his guesses.
#[tokio::test]
async fn an_owners_bots_are_scrubbed_of_what_her_other_bots_are_given() {
    const CFG: &str = "alice-config-secret-123";
    const LATER: &str = "alice-later-secret-456";
    const API: &str = "alice-api-secret-789";
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("db"))).unwrap();
    let (sh, a2, rd) = (
        named("sh", "alice", &["CFG_KEY"]),
        named("a2", "alice", &[]),
        named("rd", "bob", &[]),
    );
    store
        .write(vec![
            Mutation::UpsertBot(sh.clone()),
            Mutation::UpsertBot(a2.clone()),
            Mutation::UpsertBot(rd.clone()),
            Mutation::SetSecret {
                owner: UserId::new("alice").unwrap(),
                name: "ALICE_API".into(),
                value: SecretValue::new(API),
            },
        ])
        .await
        .unwrap();
    let vault = Vault::new([
        ("CFG_KEY".to_owned(), Secret::new(CFG.to_owned())),
        ("LATER_KEY".to_owned(), Secret::new(LATER.to_owned())),
    ])
    .with_isolated_commands(true);
    let text = format!("leak.txt: {CFG} {API} {LATER}");

    let hers = vault.for_bot(&store, &a2).await.unwrap();
    assert!(hers.values.is_empty());
    assert_eq!(
        hers.redactor.scrub(&text),
        format!("leak.txt: [redacted] [redacted] {LATER}")
    );
    let his = vault.for_bot(&store, &rd).await.unwrap();
    assert_eq!(his.redactor.scrub(&text), text);

    // sh is changed to list another: a2's next turn is scrubbed of it
    store
        .write(vec![Mutation::UpsertBot(named(
            "sh",
            "alice",
            &["CFG_KEY", "LATER_KEY"],
        ))])
        .await
        .unwrap();
    let hers = vault.for_bot(&store, &a2).await.unwrap();
    assert_eq!(
        hers.redactor.scrub(&text),
        "leak.txt: [redacted] [redacted] [redacted]"
    );
}

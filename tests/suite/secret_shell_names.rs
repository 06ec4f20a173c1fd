//! Secret names that no command can use are refused, over HTTP and in
//! fleet.toml (`check-config`): a secret reaches Shell as an environment
//! variable of its name, and the shell that runs the command (`sh -c`)
//! sets some names itself. Before, `PUT /v1/secrets/_` was stored (bash
//! puts each command's own path in `_`), and so was `OPTIND`, with which
//! dash runs no command at all. One stored before still lists and
//! deletes.

use botfleet_memory::Mutation;
use botfleet_memory::SecretValue;
use botfleet_memory::Store;
use botfleet_memory::StoreOptions;
use botfleet_memory::UserId;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::process::check_config;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]
"#;

/// Names the shell sets itself.
const SHELLS_OWN: &[&str] = &["_", "OPTIND", "SHLVL", "PPID", "RANDOM", "BASH_VERSION"];

async fn put(host: &TestHost, name: &str) -> (u16, serde_json::Value) {
    host.call(
        reqwest::Method::PUT,
        &format!("/v1/secrets/{name}"),
        TOKEN,
        Some(json!({"value": "a-value-1234"})),
    )
    .await
}

async fn names(host: &TestHost) -> Vec<String> {
    let (_, list) = host.get("/v1/secrets", TOKEN).await;
    list["secrets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn put_refuses_names_the_shell_sets_and_old_ones_still_list_and_delete() {
    let fleet = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"]);
    // stored before these names were refused (by an older version)
    let store = Store::open(StoreOptions::new(fleet.path().join("data/fleet.db"))).unwrap();
    for name in ["_", "OPTIND"] {
        store
            .write(vec![Mutation::SetSecret {
                owner: UserId::new("alice").unwrap(),
                name: name.into(),
                value: SecretValue::new("an-old-value-5678"),
            }])
            .await
            .unwrap();
    }
    store.close().await;
    drop(store);
    let host = fleet.start().await;

    for name in SHELLS_OWN {
        let (status, body) = put(&host, name).await;
        assert_eq!(status, 400, "{name}: {body}");
        let msg = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains(&format!("\"{name}\" is a name the shell sets itself"))
                && msg.contains("no command would ever see this value")
                && msg.contains("store it under a name of your own such as"),
            "{name}: {msg}"
        );
    }
    let (_, body) = put(&host, "_").await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .ends_with("such as MY_SECRET"),
        "{body}"
    );
    // odd shapes stay refused, naming the rule; names like the refused
    // ones that the shell leaves alone are stored
    let long = "A".repeat(65);
    for odd in [
        "%20",
        "%20_",
        "-",
        "1PASS",
        "%C3%89T%C3%89",
        "a_token",
        &long,
    ] {
        let (status, body) = put(&host, odd).await;
        assert_eq!(status, 400, "{odd}: {body}");
        let msg = body["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("is not a secret name"), "{odd}: {msg}");
        assert!(msg.contains("A-Z, 0-9 and _"), "{odd}: {msg}");
    }
    for fine in ["__", "_X", "MY_SECRET", "RANDOM_SEED"] {
        let (status, body) = put(&host, fine).await;
        assert_eq!(status, 200, "{fine}: {body}");
    }

    // nothing stored before is lost from view, and it can be deleted
    let listed = names(&host).await;
    assert!(listed.iter().any(|n| n == "_"), "{listed:?}");
    assert!(listed.iter().any(|n| n == "OPTIND"), "{listed:?}");
    for name in ["_", "OPTIND"] {
        let (status, body) = host
            .call(
                reqwest::Method::DELETE,
                &format!("/v1/secrets/{name}"),
                TOKEN,
                None,
            )
            .await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["deleted"], true, "{body}");
    }
    let listed = names(&host).await;
    assert!(
        !listed.iter().any(|n| n == "_" || n == "OPTIND"),
        "{listed:?}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn check_config_refuses_a_name_the_shell_sets_naming_file_and_key() {
    for (i, name) in ["_", "OPTIND"].iter().enumerate() {
        let fleet = TestFleet::new()
            .script("s", ECHO)
            .bot("r", "s", &["SendMessage"]);
        let path = fleet.write();
        let text = std::fs::read_to_string(&path).unwrap();
        // in a bot's list, and as a `[[secrets]]` entry
        let (text, key) = if i == 0 {
            let text = text.replace(
                "tools = [\"SendMessage\"]",
                &format!("tools = [\"SendMessage\"]\nsecrets = [\"{name}\"]"),
            );
            (text, "bots[0].secrets[0]")
        } else {
            let text = format!("{text}\n[[secrets]]\nname = \"{name}\"\nvalue = \"x\"\n");
            (text, "secrets[0].name")
        };
        std::fs::write(&path, text).unwrap();
        let (code, err) = check_config(&path).await;
        assert_eq!(code, Some(1), "{name}: {err}");
        assert!(
            err.contains(&path.display().to_string())
                && err.contains(key)
                && err.contains(&format!("\"{name}\" is a name the shell sets itself")),
            "{name}: {err}"
        );
    }
}

//! Secret names that would change what a bot's commands run, load or
//! trust are refused, through the API and in fleet.toml. (Before,
//! `GIT_CONFIG_GLOBAL`, `LESSOPEN`, `PAGER`, `HTTPS_PROXY`,
//! `SSL_CERT_FILE` and the like were taken: a reviewed `git status` or
//! `curl` could then run code or talk through someone else.)

use botfleet_memory::Mutation;
use botfleet_memory::SecretValue;
use botfleet_memory::Store;
use botfleet_memory::StoreOptions;
use botfleet_memory::UserId;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::check_config;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]
"#;

/// Names each family of the rule covers.
const RESERVED: &[&str] = &[
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_KEY_0",
    "GIT_DIR",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "LESSOPEN",
    "PAGER",
    "EDITOR",
    "PYTHONSTARTUP",
    "NODE_OPTIONS",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
];

#[tokio::test]
async fn put_refuses_names_that_change_what_commands_run_or_trust() {
    let fleet = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"]);
    // a secret stored before its name was reserved (by an older version)
    let store = Store::open(StoreOptions::new(fleet.path().join("data/fleet.db"))).unwrap();
    store
        .write(vec![Mutation::SetSecret {
            owner: UserId::new("alice").unwrap(),
            name: "GIT_CONFIG_GLOBAL".into(),
            value: SecretValue::new("/tmp/evil.gitconfig"),
        }])
        .await
        .unwrap();
    drop(store);
    let host = fleet.start().await;
    for name in RESERVED {
        let (status, body) = host
            .call(
                reqwest::Method::PUT,
                &format!("/v1/secrets/{name}"),
                TOKEN,
                Some(json!({"value": "x"})),
            )
            .await;
        assert_eq!(status, 400, "{name}: {body}");
        let msg = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains(&format!("\"{name}\" is reserved"))
                && msg.contains("would change what the bot's commands run, load or trust")
                && msg.contains("store it under a name of your own such as"),
            "{name}: {msg}"
        );
    }
    // the name it suggests is taken
    let (status, body) = host
        .call(
            reqwest::Method::PUT,
            "/v1/secrets/MY_GIT_CONFIG_GLOBAL",
            TOKEN,
            Some(json!({"value": "x"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // the one stored before is listed, and can be deleted
    let (_, list) = host.get("/v1/secrets", TOKEN).await;
    let names: Vec<&str> = list["secrets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"GIT_CONFIG_GLOBAL"), "{list}");
    let (status, body) = host
        .call(
            reqwest::Method::DELETE,
            "/v1/secrets/GIT_CONFIG_GLOBAL",
            TOKEN,
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (_, list) = host.get("/v1/secrets", TOKEN).await;
    assert!(
        !list.to_string().contains("\"GIT_CONFIG_GLOBAL\""),
        "{list}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn fleet_toml_refuses_a_reserved_secret_name_naming_file_and_key() {
    for (i, name) in ["HTTPS_PROXY", "GIT_CONFIG_GLOBAL", "LESSOPEN"]
        .iter()
        .enumerate()
    {
        let fleet = TestFleet::new()
            .script("s", ECHO)
            .bot("r", "s", &["SendMessage"]);
        let path = fleet.write();
        let text = std::fs::read_to_string(&path).unwrap();
        // in a bot's list, and as a `[[secrets]]` entry
        let text = if i % 2 == 0 {
            text.replace(
                "tools = [\"SendMessage\"]",
                &format!("tools = [\"SendMessage\"]\nsecrets = [\"{name}\"]"),
            )
        } else {
            format!("{text}\n[[secrets]]\nname = \"{name}\"\nvalue = \"x\"\n")
        };
        std::fs::write(&path, text).unwrap();
        let (code, err) = check_config(&path).await;
        assert_eq!(code, Some(1), "{name}: {err}");
        let key = if i % 2 == 0 {
            "bots[0].secrets[0]"
        } else {
            "secrets[0].name"
        };
        assert!(
            err.contains(&path.display().to_string())
                && err.contains(key)
                && err.contains(&format!("\"{name}\" is reserved")),
            "{name}: {err}"
        );
    }
}

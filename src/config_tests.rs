#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const ISSUE_EXAMPLE: &str = r#"
[host]
data_dir = "./botfleet-data"
listen = "127.0.0.1:7878"

[[users]]
id = "alice"
token = "alice-secret"            # or token_env = "ALICE_TOKEN"

[providers.main]
kind = "openai"
base_url = "http://127.0.0.1:8000/v1"
model = "grok-4"
api_key_env = "XAI_API_KEY"

[[bots]]
id = "researcher"
name = "Researcher"
role = "Finds facts and writes short reports."
owner = "alice"
provider = "main"
tools = ["SendMessage", "Read", "Write", "Shell"]
"#;

fn err(text: &str) -> String {
    LoadedFleet::parse(text, "fleet.toml", None)
        .unwrap_err()
        .to_string()
}

#[test]
fn the_documented_shape_works_as_written() {
    let f = LoadedFleet::parse(ISSUE_EXAMPLE, "fleet.toml", None).unwrap();
    assert_eq!(f.file.bots[0].tools.len(), 4);
    assert_eq!(f.file.host.listen, "127.0.0.1:7878");
}

#[test]
fn the_embedded_fleet_is_valid() {
    LoadedFleet::embedded().unwrap();
}

#[test]
fn unknown_keys_are_errors_naming_the_key() {
    let e = err(&ISSUE_EXAMPLE.replace("listen =", "lisen ="));
    assert!(e.contains("fleet.toml") && e.contains("lisen"), "{e}");
    let e = err(&format!("{ISSUE_EXAMPLE}\n[extra]\nx = 1\n"));
    assert!(e.contains("extra"), "{e}");
}

#[test]
fn bad_values_name_file_key_and_expectation() {
    let cases = [
        (
            ISSUE_EXAMPLE.replace("provider = \"main\"", "provider = \"mian\""),
            "bots[0].provider",
            "not defined",
        ),
        (
            ISSUE_EXAMPLE.replace("owner = \"alice\"", "owner = \"bob\""),
            "bots[0].owner",
            "not defined",
        ),
        (
            ISSUE_EXAMPLE.replace("\"Shell\"]", "\"Shel\"]"),
            "bots[0].tools[3]",
            "unknown tool",
        ),
        (
            ISSUE_EXAMPLE.replace("127.0.0.1:7878", "localhost"),
            "host.listen",
            "IP:PORT",
        ),
        (
            ISSUE_EXAMPLE.replace("http://127.0.0.1:8000/v1", "127.0.0.1:8000"),
            "providers.main.base_url",
            "http",
        ),
        (
            ISSUE_EXAMPLE.replace("token = \"alice-secret\"", "token = \"x\""),
            "users[0].token",
            "too short",
        ),
        (
            ISSUE_EXAMPLE.replace("id = \"researcher\"", "id = \"bad id\""),
            "bots[0].id",
            "invalid bot id",
        ),
    ];
    for (text, key, what) in cases {
        let e = err(&text);
        assert!(
            e.contains("fleet.toml") && e.contains(key) && e.contains(what),
            "{key}: {e}"
        );
    }
    let e = err(&ISSUE_EXAMPLE.replace("kind = \"openai\"", "kind = \"anthropic\""));
    assert!(e.contains("anthropic") && e.contains("openai"), "{e}");
}

#[test]
fn bots_join_projects_by_valid_names() {
    let with = |line: &str| ISSUE_EXAMPLE.replace("tools = [", &format!("{line}\ntools = ["));
    let f = LoadedFleet::parse(
        &with("projects = [\"apollo\", \"q3-launch\"]"),
        "fleet.toml",
        None,
    )
    .unwrap();
    assert_eq!(f.file.bots[0].projects, vec!["apollo", "q3-launch"]);
    let e = err(&with("projects = [\"apollo\", \"bad name\"]"));
    assert!(
        e.contains("bots[0].projects[1]") && e.contains("invalid project id"),
        "{e}"
    );
    let e = err(&with("projects = [\"apollo\", \"apollo\"]"));
    assert!(
        e.contains("bots[0].projects[1]") && e.contains("listed twice"),
        "{e}"
    );
}

#[test]
fn fact_extraction_is_on_by_default_and_a_runtime_switch() {
    let f = LoadedFleet::parse(ISSUE_EXAMPLE, "fleet.toml", None).unwrap();
    assert!(f.file.runtime.extract_memory);
    let off = format!("{ISSUE_EXAMPLE}\n[runtime]\nextract_memory = false\n");
    let f = LoadedFleet::parse(&off, "fleet.toml", None).unwrap();
    assert!(!f.file.runtime.extract_memory);
    let e = err(&format!(
        "{ISSUE_EXAMPLE}\n[runtime]\nextract_memory = \"no\"\n"
    ));
    assert!(
        e.contains("fleet.toml") && e.contains("extract_memory") && e.contains("bool"),
        "{e}"
    );
    let e = err(&format!(
        "{ISSUE_EXAMPLE}\n[runtime]\nextract_memories = true\n"
    ));
    assert!(e.contains("extract_memories"), "{e}");
}

#[test]
fn the_embedded_offline_script_is_valid() {
    botfleet_actors::model::Script::parse(EMBEDDED_OFFLINE_SCRIPT, EMBEDDED_OFFLINE_PATH).unwrap();
}

#[test]
fn a_provider_bounds_each_model_call_in_time_and_size() {
    let with = |lines: &str| {
        ISSUE_EXAMPLE.replace(
            "api_key_env = \"XAI_API_KEY\"",
            &format!("api_key_env = \"XAI_API_KEY\"\n{lines}"),
        )
    };
    let f = LoadedFleet::parse(
        &with("timeout_s = 30\ncall_timeout_s = 30\nmax_response_bytes = 1024"),
        "fleet.toml",
        None,
    )
    .unwrap();
    let Some(ProviderConfig::Openai {
        call_timeout_s,
        max_response_bytes,
        ..
    }) = f.file.providers.get("main")
    else {
        panic!("{:?}", f.file.providers);
    };
    assert_eq!(
        (*call_timeout_s, *max_response_bytes),
        (Some(30), Some(1024))
    );
    let cases = [
        (
            with("call_timeout_s = 60"),
            "providers.main.call_timeout_s",
            "at least timeout_s (120 s)",
        ),
        (
            with("timeout_s = 10\ncall_timeout_s = 5"),
            "providers.main.call_timeout_s",
            "at least timeout_s (10 s)",
        ),
        (
            with("max_response_bytes = 100"),
            "providers.main.max_response_bytes",
            "at least 1024",
        ),
        (
            with("max_response_bytes = -1"),
            "providers.main",
            "`-1`, expected u64",
        ),
    ];
    for (text, key, what) in cases {
        let e = err(&text);
        assert!(
            e.contains("fleet.toml") && e.contains(key) && e.contains(what),
            "{key}: {e}"
        );
    }
}

#[test]
fn a_hook_without_a_payload_limit_fits_a_small_body_limit() {
    let hooked = ISSUE_EXAMPLE.replace(
        "listen = \"127.0.0.1:7878\"",
        "listen = \"127.0.0.1:7878\"\nmax_body_bytes = 4096",
    ) + "[[bots.hooks]]\nname = \"gh\"\nsecret = \"a-long-enough-hook-secret\"\n";
    let f = LoadedFleet::parse(&hooked, "fleet.toml", None).unwrap();
    assert_eq!(f.file.bots[0].hooks[0].payload_limit(4096), 4096);
    // a limit set past the body limit is still refused, naming the key
    let e = err(&format!("{hooked}max_payload_bytes = 8192\n"));
    assert!(
        e.contains("bots[0].hooks[0].max_payload_bytes") && e.contains("4096"),
        "{e}"
    );
}

#[test]
fn a_secret_value_with_a_nul_byte_is_refused() {
    let e = err(&format!(
        "{ISSUE_EXAMPLE}\n[[secrets]]\nname = \"TOKEN\"\nvalue = \"ab\\u0000cd\"\n"
    ));
    assert!(e.contains("secrets[0].value") && e.contains("NUL"), "{e}");
}

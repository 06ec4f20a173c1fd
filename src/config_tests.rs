#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

pub(super) const ISSUE_EXAMPLE: &str = r#"
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

pub(super) fn err(text: &str) -> String {
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
            "the token is too short",
        ),
        (
            ISSUE_EXAMPLE.replace("id = \"researcher\"", "id = \"bad id\""),
            "bots[0].id",
            "invalid bot id",
        ),
        (
            ISSUE_EXAMPLE.replace("name = \"Researcher\"", "name = \"Re\\nsearcher\""),
            "bots[0].name",
            "U+000A",
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

/// A daily token budget is a whole number, 1 or more, refused in those
/// words whatever is wrong with it (audit: `-5` was told "0 or more", `0`
/// then "at least 1", and a number past TOML's integers named "i128").
#[test]
fn a_daily_token_budget_is_one_or_more_in_every_refusal() {
    let with = |value: &str| {
        ISSUE_EXAMPLE.replace(
            "tools = [\"SendMessage\", \"Read\", \"Write\", \"Shell\"]",
            &format!(
                "tools = [\"SendMessage\", \"Read\", \"Write\", \"Shell\"]\ndaily_token_budget = {value}"
            ),
        )
    };
    for value in ["0", "-5", "\"1000\"", "1000.0", "99999999999999999999"] {
        let e = err(&with(value));
        assert!(
            e.contains("bots[0].daily_token_budget")
                && e.contains(
                    "expected a whole number of tokens, 1 or more (leave the key out for no budget)"
                )
                && !e.contains("i128"),
            "{value}: {e}"
        );
    }
    let f = LoadedFleet::parse(&with("1000"), "fleet.toml", None).unwrap();
    assert_eq!(f.file.bots[0].daily_token_budget, Some(1000));
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
        // QA: past what a deadline can hold, every turn crashed
        (
            with("timeout_s = 18446744073709551615"),
            "providers.main.timeout_s",
            "at most 86400 s (a day)",
        ),
        (
            with("call_timeout_s = 9999999999999999999"),
            "providers.main.call_timeout_s",
            "at most 86400 s (a day)",
        ),
        (
            with("max_response_bytes = 100"),
            "providers.main.max_response_bytes",
            "at least 1024",
        ),
        (
            with("max_response_bytes = -1"),
            "providers.main",
            "`-1`, expected a whole number, 1024 or more",
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

/// A user's budget of bodies arriving must hold one body of the largest
/// size, or such a message could never arrive.
#[test]
fn a_body_budget_below_the_body_limit_is_refused() {
    let host = |lines: &str| {
        ISSUE_EXAMPLE.replace(
            "listen = \"127.0.0.1:7878\"",
            &format!("listen = \"127.0.0.1:7878\"\n{lines}"),
        )
    };
    let e = err(&host("max_body_bytes = 8192\nbody_bytes_per_user = 4096"));
    assert!(
        e.contains("host.body_bytes_per_user") && e.contains("at least host.max_body_bytes (8192)"),
        "{e}"
    );
    let f = LoadedFleet::parse(
        &host("max_body_bytes = 8192\nbody_bytes_per_user = 8192"),
        "fleet.toml",
        None,
    )
    .unwrap();
    assert_eq!(f.file.host.body_bytes_per_user, 8192);
    let f = LoadedFleet::parse(ISSUE_EXAMPLE, "fleet.toml", None).unwrap();
    assert_eq!(f.file.host.body_bytes_per_user, 8 << 20);
}

#[test]
fn a_secret_value_with_a_nul_byte_is_refused() {
    let e = err(&format!(
        "{ISSUE_EXAMPLE}\n[[secrets]]\nname = \"TOKEN\"\nvalue = \"ab\\u0000cd\"\n"
    ));
    assert!(e.contains("secrets[0].value") && e.contains("NUL"), "{e}");
}

/// The issue's example fleet with `runtime` lines in its `[runtime]` and
/// its bot's tools `tools` (a list's inside).
fn runtime_fleet(runtime: &str, tools: &str) -> LoadedFleet {
    let text = ISSUE_EXAMPLE
        .replace(
            "tools = [\"SendMessage\", \"Read\", \"Write\", \"Shell\"]",
            &format!("tools = [{tools}]"),
        )
        .replace(
            "listen = \"127.0.0.1:7878\"\n",
            &format!("listen = \"127.0.0.1:7878\"\n\n[runtime]\n{runtime}\n"),
        );
    LoadedFleet::parse(&text, "fleet.toml", None).unwrap()
}

/// `runtime.max_hops = 1` is accepted but refuses every Task (a task and
/// its report are two hops): a warning names the key and the bots with
/// Task. (Before, `check-config` said only "ok".)
#[test]
fn max_hops_below_a_tasks_two_hops_is_a_warning_naming_the_bots_with_task() {
    let fleet = runtime_fleet;
    let warned = fleet("max_hops = 1", "\"SendMessage\", \"Task\"").warnings();
    assert_eq!(warned.len(), 1, "{warned:?}");
    let w = &warned[0];
    assert!(
        w.contains("fleet.toml")
            && w.contains("runtime.max_hops")
            && w.contains("researcher")
            && w.contains("at least 2"),
        "{w}"
    );
    // not for a budget that fits a task, nor for bots without Task
    assert!(
        fleet("max_hops = 2", "\"SendMessage\", \"Task\"")
            .warnings()
            .is_empty()
    );
    assert!(fleet("", "\"SendMessage\", \"Task\"").warnings().is_empty());
    assert!(
        fleet("max_hops = 1", "\"SendMessage\"")
            .warnings()
            .is_empty()
    );
}

/// Two bots whose `projects` name one project in two cases join two
/// projects that share no memory: a warning names both spellings and
/// their bots. (Before, `check-config` said only "ok".)
#[test]
fn projects_differing_only_in_case_are_a_warning() {
    let two = |first: &str, second: &str| {
        let text = format!(
            "{ISSUE_EXAMPLE}\n[[bots]]\nid = \"writer\"\nname = \"Writer\"\nrole = \"r\"\n\
             owner = \"alice\"\nprovider = \"main\"\ntools = [\"SendMessage\"]\n\
             projects = [\"{second}\"]\n"
        )
        .replace(
            "tools = [\"SendMessage\", \"Read\"",
            &format!("projects = [\"{first}\"]\ntools = [\"SendMessage\", \"Read\""),
        );
        LoadedFleet::parse(&text, "fleet.toml", None)
            .unwrap()
            .warnings()
    };
    let warned = two("Apollo", "apollo");
    assert_eq!(warned.len(), 1, "{warned:?}");
    let w = &warned[0];
    assert!(
        w.contains("fleet.toml")
            && w.contains("\"Apollo\" (researcher)")
            && w.contains("\"apollo\" (writer)"),
        "{w}"
    );
    assert!(two("apollo", "apollo").is_empty());
    assert!(two("apollo", "zeus").is_empty());
}

/// Numbers that would leave a host that refuses every message, kills
/// every command at once or forgets its idempotency keys are refused,
/// naming the key; the documented bounds themselves are accepted.
#[test]
fn numbers_that_break_the_host_are_refused() {
    let with = |table: &str, lines: &str| format!("{ISSUE_EXAMPLE}\n[{table}]\n{lines}\n");
    let host = |lines: &str| {
        ISSUE_EXAMPLE.replace(
            "listen = \"127.0.0.1:7878\"",
            &format!("listen = \"127.0.0.1:7878\"\n{lines}"),
        )
    };
    let cases = [
        (
            with("runtime", "shell_timeout_s = 0"),
            "runtime.shell_timeout_s",
            "at least 1",
        ),
        (
            with("runtime", "shell_max_timeout_s = 0"),
            "runtime.shell_max_timeout_s",
            "at least 1",
        ),
        (
            with("runtime", "shell_timeout_s = 90\nshell_max_timeout_s = 60"),
            "runtime.shell_timeout_s",
            "at most runtime.shell_max_timeout_s (60 s)",
        ),
        (
            host("max_text_chars = 0"),
            "host.max_text_chars",
            "at least 100",
        ),
        (
            host("max_text_chars = 99"),
            "host.max_text_chars",
            "at least 100",
        ),
        (
            with("runtime", "idle_timeout_s = 0"),
            "runtime.idle_timeout_s",
            "at least 1",
        ),
        (
            with("runtime", "ledger_retention_days = 0"),
            "runtime.ledger_retention_days",
            "1 to 3650",
        ),
        (
            // past it, days × 86,400 s overflowed
            with("runtime", "ledger_retention_days = 300000000000000"),
            "runtime.ledger_retention_days",
            "1 to 3650 (ten years)",
        ),
        (
            // the reason given for 0 does not fit a value too large
            with("runtime", "ledger_retention_days = 4000"),
            "runtime.ledger_retention_days",
            "is 4000 but must be 1 to 3650 (ten years)",
        ),
        (
            with("runtime", "max_hops = 0"),
            "runtime.max_hops",
            "at least 1: 0 would refuse every message between bots",
        ),
        (
            // a negative is told the range from 1, as 0 is told "at least
            // 1" (audit: "expected a whole number from 0 to 4294967295",
            // then "must be at least 1" for the 0 written next)
            with("runtime", "max_steps = -1"),
            "runtime.max_steps",
            "`-1`, expected a whole number from 1 to 4294967295",
        ),
        (
            with("runtime", "max_steps = 0"),
            "runtime.max_steps",
            "must be at least 1",
        ),
        (
            with("runtime", "idle_timeout_s = -5"),
            "runtime.idle_timeout_s",
            "`-5`, expected a whole number, 1 or more",
        ),
        (
            with("runtime", "ledger_retention_days = -1"),
            "runtime.ledger_retention_days",
            "`-1`, expected a whole number, 1 or more",
        ),
        (
            // only debounce_ms written: both values and the default named
            // (docs audit: "must be at least runtime.debounce_ms", of a
            // key the file never wrote)
            with("runtime", "debounce_ms = 3000"),
            "runtime.debounce_max_ms",
            "is 2000 ms (its default value) but must be at least runtime.debounce_ms (3000 ms)",
        ),
        (
            with("runtime", "debounce_ms = 3000\ndebounce_max_ms = 2500"),
            "runtime.debounce_max_ms",
            "is 2500 ms but must be at least runtime.debounce_ms (3000 ms): raise",
        ),
        (
            with("runtime", "debounce_max_ms = 3600000"),
            "runtime.debounce_max_ms",
            "at most 60000 ms",
        ),
        (
            ISSUE_EXAMPLE.replace(
                "api_key_env = \"XAI_API_KEY\"",
                "api_key_env = \"XAI_API_KEY\"\nbackground_compact_at_tokens = 0",
            ),
            "providers.main.background_compact_at_tokens",
            "at least 1000",
        ),
        (
            // larger passed, and its 80% overflowed at the start (QA)
            ISSUE_EXAMPLE.replace(
                "api_key_env = \"XAI_API_KEY\"",
                "api_key_env = \"XAI_API_KEY\"\ncompact_at_tokens = 4611686018427387904",
            ),
            "providers.main.compact_at_tokens",
            "must be at most 10000000: no model's context window is larger",
        ),
        (
            ISSUE_EXAMPLE.replace(
                "api_key_env = \"XAI_API_KEY\"",
                "api_key_env = \"XAI_API_KEY\"\ncompact_at_tokens = 10000000\nbackground_compact_at_tokens = 10000001",
            ),
            "providers.main.background_compact_at_tokens",
            "must be at most 10000000",
        ),
    ];
    for (text, key, what) in cases {
        let e = err(&text);
        assert!(
            e.contains("fleet.toml") && e.contains(&format!("key `{key}`")) && e.contains(what),
            "{key}: {e}"
        );
    }
    let edges = [
        host("max_text_chars = 100"),
        ISSUE_EXAMPLE.replace(
            "api_key_env = \"XAI_API_KEY\"",
            "api_key_env = \"XAI_API_KEY\"\ncompact_at_tokens = 10000000",
        ),
        with(
            "runtime",
            "shell_timeout_s = 1\nshell_max_timeout_s = 1\nidle_timeout_s = 1\nledger_retention_days = 3650\ndebounce_ms = 60000\ndebounce_max_ms = 60000\nmax_hops = 1",
        ),
    ];
    for text in edges {
        LoadedFleet::parse(&text, "fleet.toml", None).unwrap();
    }
}

/// A negative value of a key whose least value is above 0 is told that
/// least value, as a value under it is (leftover of the 1-or-more audit:
/// `context_entries = -1` was told "expected a whole number, 0 or more",
/// and the `0` written next "must be at least 4").
#[test]
fn a_negative_is_told_the_keys_least_value() {
    let with = |table: &str, lines: &str| format!("{ISSUE_EXAMPLE}\n[{table}]\n{lines}\n");
    let host = |lines: &str| {
        ISSUE_EXAMPLE.replace(
            "listen = \"127.0.0.1:7878\"",
            &format!("listen = \"127.0.0.1:7878\"\n{lines}"),
        )
    };
    let provider = |line: &str| {
        ISSUE_EXAMPLE.replace(
            "api_key_env = \"XAI_API_KEY\"",
            &format!("api_key_env = \"XAI_API_KEY\"\n{line}"),
        )
    };
    let cases = [
        ("runtime", "context_entries", "4 or more", "at least 4"),
        ("host", "max_body_bytes", "1024 or more", "at least 1024"),
        (
            "host",
            "body_bytes_per_user",
            "1024 or more",
            "at least host.max_body_bytes",
        ),
        ("host", "max_text_chars", "100 or more", "at least 100"),
        (
            "host",
            "max_connections",
            "from 4 to 4294967295",
            "must be 4 to 65536",
        ),
        ("host", "header_timeout_s", "1 or more", "must be 1 to 600"),
        (
            "host",
            "request_timeout_s",
            "1 or more",
            "must be 1 to 3600",
        ),
        (
            "host",
            "max_streams_per_user",
            "from 1 to 4294967295",
            "must be 1 to 1024",
        ),
        (
            "host",
            "user_messages_per_minute",
            "from 1 to 4294967295",
            "must be 1 to",
        ),
        (
            "host",
            "unknown_tokens_per_minute",
            "from 1 to 4294967295",
            "must be 1 to",
        ),
        (
            "providers.main",
            "max_response_bytes",
            "1024 or more",
            "at least 1024",
        ),
        (
            "providers.main",
            "compact_at_tokens",
            "1000 or more",
            "at least 1000",
        ),
        (
            "providers.main",
            "background_compact_at_tokens",
            "1000 or more",
            "at least 1000",
        ),
        (
            "providers.main",
            "call_timeout_s",
            "1 or more",
            "at least timeout_s",
        ),
    ];
    for (table, key, negative, zero) in cases {
        let text = |value: &str| {
            let line = format!("{key} = {value}");
            match table {
                "host" => host(&line),
                "providers.main" => provider(&line),
                _ => with(table, &line),
            }
        };
        let e = err(&text("-1"));
        assert!(
            e.contains(&format!("{table}.{key}"))
                && e.contains(&format!("`-1`, expected a whole number{}", {
                    if negative.starts_with("from") {
                        format!(" {negative}")
                    } else {
                        format!(", {negative}")
                    }
                })),
            "{key} = -1: {e}"
        );
        let e = err(&text("0"));
        assert!(
            e.contains(&format!("{table}.{key}")) && e.contains(zero),
            "{key} = 0: {e}"
        );
    }
}

/// The API's connection limits: defaults that hold at `ulimit -n` 1024,
/// bounds that name the key, the documented edges accepted.
#[test]
fn connection_limits_are_bounded() {
    let f = LoadedFleet::parse(ISSUE_EXAMPLE, "fleet.toml", None).unwrap();
    let h = &f.file.host;
    assert_eq!(
        (h.header_timeout_s, h.request_timeout_s, h.max_connections),
        (30, 60, 512)
    );
    let host = |lines: &str| {
        ISSUE_EXAMPLE.replace(
            "listen = \"127.0.0.1:7878\"",
            &format!("listen = \"127.0.0.1:7878\"\n{lines}"),
        )
    };
    let cases = [
        (
            "header_timeout_s = 0",
            "host.header_timeout_s",
            "is 0 but must be 1 to 600 seconds: with 0 every connection",
        ),
        (
            "header_timeout_s = 601",
            "host.header_timeout_s",
            "is 601 but must be 1 to 600 seconds: a client that sends nothing",
        ),
        (
            "request_timeout_s = 0",
            "host.request_timeout_s",
            "is 0 but must be 1 to 3600 seconds: with 0 every request",
        ),
        (
            "request_timeout_s = 86400",
            "host.request_timeout_s",
            "is 86400 but must be 1 to 3600 seconds (an hour)",
        ),
        (
            "max_connections = 0",
            "host.max_connections",
            "is 0 but must be 4 to 65536: the web page",
        ),
        (
            "max_connections = 3",
            "host.max_connections",
            "is 3 but must be 4 to 65536",
        ),
        (
            "max_connections = 100000",
            "host.max_connections",
            "is 100000 but must be 4 to 65536: each connection is a file descriptor",
        ),
        ("max_connections = -1", "host.max_connections", "line "),
        (
            "header_timeout_s = \"30s\"",
            "host.header_timeout_s",
            "line ",
        ),
        ("header_timeout = 30", "header_timeout", "unknown field"),
    ];
    for (lines, key, what) in cases {
        let e = err(&host(lines));
        assert!(
            e.contains("fleet.toml") && e.contains(key) && e.contains(what),
            "{lines}: {e}"
        );
    }
    for edges in [
        "header_timeout_s = 1\nrequest_timeout_s = 1\nmax_connections = 4",
        "header_timeout_s = 600\nrequest_timeout_s = 3600\nmax_connections = 65536",
    ] {
        LoadedFleet::parse(&host(edges), "fleet.toml", None).unwrap();
    }
}

/// A wrong type inside `[providers.X]` names its dotted key and line, not
/// just the table (the table was read as an internally tagged enum, which
/// buffers it and loses both).
#[test]
fn type_errors_in_a_provider_name_the_key() {
    let openai = |line: &str| {
        format!(
            "{}\n[providers.o]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8000/v1\"\nmodel = \"m\"\n{line}\n",
            ISSUE_EXAMPLE
        )
    };
    let scripted =
        |line: &str| format!("{ISSUE_EXAMPLE}\n[providers.o]\nkind = \"scripted\"\n{line}\n");
    let cases = [
        (
            openai("timeout_s = \"ten\""),
            "providers.o.timeout_s",
            "invalid type: string \"ten\", expected a whole number, 1 or more",
        ),
        (
            openai("stream = \"yes\""),
            "providers.o.stream",
            "expected a boolean",
        ),
        (
            scripted("script = 5"),
            "providers.o.script",
            "invalid type: integer `5`",
        ),
        (
            openai("colour = \"red\""),
            "providers.o.colour",
            "unknown field `colour`",
        ),
        (
            scripted("script = \"s.toml\"\ntimeout_s = 5"),
            "providers.o",
            "unknown field `timeout_s` for kind = \"scripted\"",
        ),
        (scripted(""), "providers.o", "missing field `script`"),
        (
            ISSUE_EXAMPLE.replace("\"Shell\"]", "3]"),
            "bots[0].tools[3]",
            "expected a string",
        ),
    ];
    for (text, key, what) in cases {
        let e = err(&text);
        assert!(
            e.contains(&format!("key `{key}`: ")) && e.contains(what) && e.contains("line "),
            "{key}: {e}"
        );
    }
    // the key of the line, not the one before or after
    let e = err(&openai("stream = \"yes\""));
    assert!(!e.contains("providers.o.model"), "{e}");
}

#[test]
fn a_tool_listed_twice_is_refused() {
    let e = err(&ISSUE_EXAMPLE.replace("\"Shell\"]", "\"Shell\", \"Read\"]"));
    assert!(
        e.contains("bots[0].tools[4]") && e.contains("listed twice") && e.contains("tools[1]"),
        "{e}"
    );
}

/// Mentions ignore case: `@b1` would wake both `b1` and `B1`.
#[test]
fn bot_ids_that_differ_only_in_case_are_refused() {
    let second = ISSUE_EXAMPLE[ISSUE_EXAMPLE.find("[[bots]]").unwrap()..]
        .replace("id = \"researcher\"", "id = \"Researcher\"");
    let e = err(&format!("{ISSUE_EXAMPLE}\n{second}"));
    assert!(
        e.contains("bots[1].id")
            && e.contains("bots[0].id")
            && e.contains("\"Researcher\"")
            && e.contains("\"researcher\"")
            && e.contains("only in case"),
        "{e}"
    );
}

/// A token a request could never send is refused like a short one.
#[test]
fn tokens_that_could_never_log_in_are_refused() {
    for (token, what) in [
        ("\"        \"", "only whitespace"),
        ("\" alice-secret\"", "whitespace"),
        ("\"alice-sécret\"", "printable ASCII"),
    ] {
        let e = err(&ISSUE_EXAMPLE.replace("\"alice-secret\"", token));
        assert!(
            e.contains("users[0].token") && e.contains(what),
            "{token}: {e}"
        );
    }
}

/// `run --listen` replaces `host.listen` before the file is checked.
#[test]
fn an_override_replaces_the_key_before_the_check() {
    let bad = ISSUE_EXAMPLE.replace("127.0.0.1:7878", "localhost");
    let overrides = Overrides {
        listen: Some("127.0.0.1:18610".into()),
        data_dir: Some("/tmp/elsewhere".into()),
    };
    let f = LoadedFleet::parse_with(&bad, "fleet.toml", None, &overrides).unwrap();
    assert_eq!(f.file.host.listen, "127.0.0.1:18610");
    assert_eq!(f.file.host.data_dir, PathBuf::from("/tmp/elsewhere"));
    // without it, the file's value is held against it
    assert!(err(&bad).contains("host.listen"));
}

/// Regression (QA, 2026-12-05): a table or a key given twice was reported
/// as toml's bare "duplicate key" under a caret, the one bad file whose
/// error did not name its key in words.
#[test]
fn a_table_or_key_given_twice_is_named() {
    let e = err(&format!(
        "{ISSUE_EXAMPLE}\n[host]\nlisten = \"127.0.0.1:9\"\n"
    ));
    assert!(
        e.contains("key `host`: the table [host] is given twice; merge the two into one"),
        "{e}"
    );
    let e = err(&format!(
        "{ISSUE_EXAMPLE}\n[providers.main]\nkind = \"scripted\"\n"
    ));
    assert!(
        e.contains("the table [providers.main] is given twice"),
        "{e}"
    );
    let e = err(&ISSUE_EXAMPLE.replace(
        "listen = \"127.0.0.1:7878\"",
        "listen = \"127.0.0.1:7878\"\nlisten = \"127.0.0.1:9\"",
    ));
    assert!(
        e.contains("key `host.listen`: it is set twice in the same table; keep one"),
        "{e}"
    );
    // the dotted key an array of tables' entry has (QA: only `tools`)
    let e = err(&format!(
        "{ISSUE_EXAMPLE}\n[[bots]]\nid = \"b2\"\n\n[[bots.routines]]\nname = \"a\"\n\n\
         [[bots.routines]]\nname = \"b\"\nname = \"c\"\n"
    ));
    assert!(
        e.contains("key `bots[1].routines[1].name`: it is set twice"),
        "{e}"
    );
    // a line of a multi-line string that starts with `[` is no header
    // (QA: `key 'the guide.owner'`)
    let e = err(&format!(
        "{ISSUE_EXAMPLE}\n[[bots]]\nid = \"b2\"\nrole = \"\"\"Reads\n[the guide](https://x)\n\"\"\"\n\
         owner = \"alice\"\nowner = \"alice\"\n"
    ));
    assert!(e.contains("key `bots[1].owner`: it is set twice"), "{e}");
}

/// Users `bob` and `Bob` were both taken without a word, though a room's
/// input labels people by id and a user's workspace is a directory named
/// by it (one directory on a file system that ignores case). They are
/// warned of, not refused: a refusal stopped the upgrade of a fleet that
/// had them, and renaming a user orphans their history (QA, 2026-12-05).
#[test]
fn user_ids_that_differ_only_in_case_are_warned_of() {
    let two =
        format!("{ISSUE_EXAMPLE}\n[[users]]\nid = \"Alice\"\ntoken = \"another-long-secret\"\n");
    let f = LoadedFleet::parse(&two, "fleet.toml", None).unwrap();
    let warnings = f.warnings().join("\n");
    assert!(
        warnings.contains("key `users[1].id`: user \"Alice\" differs from user \"alice\" (users[0].id) only in case"),
        "{warnings}"
    );
    let one = LoadedFleet::parse(ISSUE_EXAMPLE, "fleet.toml", None).unwrap();
    assert!(!one.warnings().join("\n").contains("only in case"));
}

/// `runtime.max_subagents = 0` (or `max_created_agents = 0`) refuses
/// every Task (every CreateAgent) of a bot that has it: a warning names
/// the key and the bots. (Before, the host started without a word, and
/// each Task was told to wait for the reports of its 0 subagents.)
#[test]
fn a_zero_subagent_or_made_agent_limit_is_a_warning_naming_the_bots() {
    let fleet = runtime_fleet;
    let warned = fleet("max_subagents = 0", "\"SendMessage\", \"Task\"").warnings();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("`runtime.max_subagents` is 0")
            && warned[0].contains("every Task of researcher will be refused"),
        "{warned:?}"
    );
    let warned = fleet("max_created_agents = 0", "\"SendMessage\", \"CreateAgent\"").warnings();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("`runtime.max_created_agents` is 0")
            && warned[0].contains("every CreateAgent of researcher will be refused"),
        "{warned:?}"
    );
    // not without the tool, nor with a limit of 1
    assert!(
        fleet("max_subagents = 0", "\"SendMessage\"")
            .warnings()
            .is_empty()
    );
    assert!(
        fleet("max_subagents = 1", "\"SendMessage\", \"Task\"")
            .warnings()
            .is_empty()
    );
}

/// A word key given another type says the words it takes (QA:
/// `synchronous = 1` said only "wanted string or table", and a table is
/// no way to write it).
#[test]
fn a_word_key_of_another_type_names_its_words() {
    let e = err(&ISSUE_EXAMPLE.replace(
        "listen = \"127.0.0.1:7878\"",
        "listen = \"127.0.0.1:7878\"\nsynchronous = 1",
    ));
    assert!(
        e.contains("key `host.synchronous`: it takes \"normal\" or \"full\", a word in quotes"),
        "{e}"
    );
    let e = err(&format!("{ISSUE_EXAMPLE}\n[review]\nshell = true\n"));
    assert!(
        e.contains("key `review.shell`: it takes \"off\", \"shadow\" or \"enforce\""),
        "{e}"
    );
}

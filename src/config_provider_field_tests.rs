//! `providers.NAME.max_tokens_field` and `stream_usage`: read, and a bad
//! value refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::super::LoadedFleet;
use super::super::ProviderConfig;
use super::super::tests::ISSUE_EXAMPLE;
use super::super::tests::err;

/// The example fleet with `line` added to its `openai` provider.
fn with(line: &str) -> String {
    ISSUE_EXAMPLE.replace(
        "api_key_env = \"XAI_API_KEY\"",
        &format!("api_key_env = \"XAI_API_KEY\"\n{line}"),
    )
}

#[test]
fn the_token_limit_field_is_read_and_checked() {
    let f = LoadedFleet::parse(
        &with(r#"max_tokens_field = "max_completion_tokens""#),
        "fleet.toml",
        None,
    )
    .unwrap();
    let Some(ProviderConfig::Openai {
        max_tokens_field, ..
    }) = f.file.providers.get("main")
    else {
        panic!("{:?}", f.file.providers);
    };
    assert_eq!(max_tokens_field.as_deref(), Some("max_completion_tokens"));
    let error = err(&with(r#"max_tokens_field = "max_output_tokens""#));
    // named by its own dotted key, not only the provider's table (QA)
    assert!(
        error.contains("`providers.main.max_tokens_field`")
            && error.contains("\"max_output_tokens\"")
            && error.contains("max_completion_tokens"),
        "{error}"
    );
}

/// `stream_usage` (round 22, F1): read as a bool, refused as anything
/// else (naming the key) and on a scripted provider, listed among an
/// openai provider's keys in the message of a key it does not have.
#[test]
fn stream_usage_is_read_and_checked() {
    for (line, expected) in [
        ("stream_usage = false", Some(false)),
        ("stream_usage = true", Some(true)),
        ("", None),
    ] {
        let f = LoadedFleet::parse(&with(line), "fleet.toml", None).unwrap();
        let Some(ProviderConfig::Openai { stream_usage, .. }) = f.file.providers.get("main") else {
            panic!("{:?}", f.file.providers);
        };
        assert_eq!(*stream_usage, expected, "{line}");
    }
    let error = err(&with(r#"stream_usage = "no""#));
    assert!(error.contains("stream_usage"), "{error}");
    let error = err(&with("script = \"s.toml\""));
    assert!(error.contains("`stream_usage`"), "{error}");
    let scripted =
        "[providers.s]\nkind = \"scripted\"\nscript = \"s.toml\"\nstream_usage = false\n";
    let error =
        err(&ISSUE_EXAMPLE.replace("[providers.main]", &format!("{scripted}\n[providers.main]")));
    assert!(
        error.contains("unknown field `stream_usage` for kind = \"scripted\""),
        "{error}"
    );
}

/// `ISSUE_EXAMPLE` with its `api_key_env` value replaced by `value`.
fn key_env(value: &str) -> String {
    ISSUE_EXAMPLE.replace(
        "api_key_env = \"XAI_API_KEY\"",
        &format!("api_key_env = \"{value}\""),
    )
}

/// Regression (round 21, H2): the key itself in `api_key_env` was reported
/// as "environment variable sk-proj-… is not set", printing the key; `$VAR`
/// and `""` as variables `$VAR` and `` that were not set.
#[test]
fn api_key_env_must_be_a_variable_name_and_a_key_is_never_echoed() {
    let error = err(&key_env("sk-proj-AbCdEf0123456789SECRET"));
    assert!(
        // the key itself, not its table (QA, 2026-12-04)
        error.contains("key `providers.main.api_key_env`")
            && error.contains("api_key_env takes the NAME of an environment variable")
            && error.contains("looks like a key itself"),
        "{error}"
    );
    assert!(!error.contains("SECRET"), "the key shows: {error}");
    for written in ["$XAI_API_KEY", "${XAI_API_KEY}", " XAI_API_KEY "] {
        let error = err(&key_env(written));
        assert!(
            error.contains("api_key_env = \"XAI_API_KEY\" (no $, braces or spaces)"),
            "{written}: {error}"
        );
    }
    let error = err(&key_env(""));
    assert!(
        error.contains("it is empty") && error.contains("remove api_key_env"),
        "{error}"
    );
    for name in ["XAI_API_KEY", "_K", "key2"] {
        LoadedFleet::parse(&key_env(name), "fleet.toml", None).unwrap();
    }
}

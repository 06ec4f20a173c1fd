//! `providers.NAME.max_tokens_field`: read, and a bad value refused.

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
    assert!(
        error.contains("max_tokens_field")
            && error.contains("\"max_output_tokens\"")
            && error.contains("max_completion_tokens"),
        "{error}"
    );
}

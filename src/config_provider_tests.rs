#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::env::VarError;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use super::super::LoadedFleet;
use super::super::ProviderConfig;
use super::super::tests::ISSUE_EXAMPLE;
use super::super::tests::err;

/// The example fleet with `lines` added to its `openai` provider.
fn with(lines: &str) -> String {
    ISSUE_EXAMPLE.replace(
        "api_key_env = \"XAI_API_KEY\"",
        &format!("api_key_env = \"XAI_API_KEY\"\n{lines}"),
    )
}

/// The API key the example fleet resolves with `XAI_API_KEY` answering
/// `value`, or the error.
fn resolve_key(value: Result<String, VarError>) -> Result<Option<String>, String> {
    let fleet = LoadedFleet::parse(ISSUE_EXAMPLE, "fleet.toml", None).unwrap();
    fleet
        .resolve_external(|var| match var {
            "XAI_API_KEY" => value.clone(),
            _ => Err(VarError::NotPresent),
        })
        .map(|resolved| resolved.api_keys["main"].clone())
        .map_err(|e| e.to_string())
}

#[test]
fn a_providers_headers_are_read_from_the_fleet_file() {
    let f = LoadedFleet::parse(
        &with(r#"headers = { "X-Title" = "botfleet", "HTTP-Referer" = "https://example.test" }"#),
        "fleet.toml",
        None,
    )
    .unwrap();
    let Some(ProviderConfig::Openai { headers, .. }) = f.file.providers.get("main") else {
        panic!("{:?}", f.file.providers);
    };
    let expected: BTreeMap<String, String> = [
        ("HTTP-Referer".to_owned(), "https://example.test".to_owned()),
        ("X-Title".to_owned(), "botfleet".to_owned()),
    ]
    .into();
    assert_eq!(headers, &expected);
}

#[test]
fn bad_headers_are_refused_naming_the_header_never_the_value() {
    let cases = [
        (r#"headers = { "X Title" = "v" }"#, "is not a header name"),
        (r#"headers = { "" = "v" }"#, "is not a header name"),
        (
            r#"headers = { "Authorization" = "Bearer sk-hidden-1" }"#,
            "give the key with api_key_env",
        ),
        (r#"headers = { "X-Title" = " " }"#, "empty value"),
        (
            r#"headers = { "X-Title" = "line\nbreak-hidden" }"#,
            "line break",
        ),
        (r#"headers = { "X-Title" = "café-hidden" }"#, "non-ASCII"),
        (
            r#"headers = { "X-Title" = "a-hidden", "x-title" = "b-hidden" }"#,
            "are one header",
        ),
        (r#"headers = { "X-Title" = 3 }"#, "providers.main"),
    ];
    for (lines, expected) in cases {
        let e = err(&with(lines));
        assert!(
            e.contains("providers.main") && e.contains(expected),
            "{lines}: {e}"
        );
        assert!(!e.contains("hidden"), "{lines}: the value shows: {e}");
    }
    // and a scripted provider has no headers
    let e = err(&format!(
        "{ISSUE_EXAMPLE}\n[providers.s]\nkind = \"scripted\"\nscript = \"s.toml\"\nheaders = {{ \"X-A\" = \"b\" }}\n"
    ));
    assert!(e.contains("unknown field `headers`"), "{e}");
}

/// Regression: `XAI_API_KEY=' sk-abc '` passed and went out as
/// `Bearer  sk-abc `; a value that is not UTF-8 was reported as "not set
/// (or is empty)".
#[test]
fn the_api_key_is_trimmed_and_a_broken_one_named() {
    assert_eq!(
        resolve_key(Ok(" sk-abc \n".to_owned())),
        Ok(Some("sk-abc".to_owned()))
    );
    let e = resolve_key(Ok("sk-abc sk-def".to_owned())).unwrap_err();
    assert!(
        e.contains("providers.main.api_key_env")
            && e.contains("XAI_API_KEY")
            && e.contains("whitespace")
            && !e.contains("sk-abc"),
        "{e}"
    );
    let e = resolve_key(Ok("  ".to_owned())).unwrap_err();
    assert!(e.contains("only whitespace"), "{e}");
    let e = resolve_key(Err(VarError::NotUnicode(OsString::from_vec(vec![
        b's', b'k', 0xff,
    ]))))
    .unwrap_err();
    assert!(
        e.contains("XAI_API_KEY") && e.contains("not valid UTF-8") && !e.contains("not set"),
        "{e}"
    );
    let e = resolve_key(Err(VarError::NotPresent)).unwrap_err();
    assert!(e.contains("is not set"), "{e}");
    let e = resolve_key(Ok(String::new())).unwrap_err();
    assert!(e.contains("is not set"), "{e}");
}

//! Config errors on credential lines, through [`LoadedFleet::parse`]: the
//! value is `***`, the line and the key stay; other errors are as toml
//! words them.

use crate::config::LoadedFleet;

/// The error `text` is refused with.
fn error_of(text: &str) -> String {
    match LoadedFleet::parse(text, "fleet.toml", None) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

/// Fails unless `text` is refused without `secret` and with each of `shown`.
fn hides(text: &str, secret: &str, shown: &[&str]) {
    let err = error_of(text);
    assert!(!err.contains(secret), "shows {secret:?}: {err}");
    for s in shown {
        assert!(err.contains(s), "{s:?} not in {err}");
    }
    assert!(err.contains("*** stands for the credential of"), "{err}");
}

#[test]
fn a_line_of_a_multi_line_value_is_hidden_whole() {
    hides(
        "[[secrets]]\nname = \"X\"\nvalue = \"\"\"\nfirst\nsecond-secret-line\\q\n\"\"\"\n",
        "second-secret",
        &["line 5", "5 | ***", "`value` on line 5"],
    );
}

#[test]
fn a_credential_in_an_inline_table_is_hidden_from_its_key_on() {
    hides(
        "secrets = [{ name = \"X\", value = \"inline-secret-value\" } x]\n",
        "inline-secret-value",
        &[r#"1 | secrets = [{ name = "X", value = ***"#, "line 1"],
    );
}

#[test]
fn a_credential_key_without_its_equals_sign_is_hidden() {
    hides(
        "[[users]]\nid = \"a\"\ntoken \"abc-secret-tok\"\n",
        "abc-secret-tok",
        &["line 3, column 7", "3 | ***", "expected `=`"],
    );
}

#[test]
fn a_misspelt_credential_key_is_hidden_too() {
    hides(
        "[providers.o]\nkind = \"openai\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\napi_key = \"sk-live-0123456789\" x\n",
        "sk-live-0123456789",
        &["5 | api_key = ***"],
    );
}

#[test]
fn a_url_shows_its_host_but_not_its_userinfo() {
    hides(
        "[providers.o]\nkind = \"openai\"\nbase_url = \"https://bob:pa55-word@llm.example/v1\" x\n",
        "pa55-word",
        &[r#"3 | base_url = "https://***@llm.example/v1" x"#],
    );
}

#[test]
fn errors_on_other_lines_are_shown_as_toml_words_them() {
    // a variable's name is no credential; nor is a timeout
    for (text, shown) in [
        (
            "[[users]]\nid = \"a\"\ntoken_env = 12\n",
            "invalid type: integer `12`, expected a string",
        ),
        (
            "[providers.o]\nkind = \"openai\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\ntimeout_s = \"ten\"\n",
            "invalid type: string \"ten\", expected u64",
        ),
        ("[[users]]\nid = a-user\n", "2 | id = a-user"),
    ] {
        let err = error_of(text);
        assert!(err.contains(shown), "{shown:?} not in {err}");
        assert!(!err.contains("***"), "{err}");
    }
}

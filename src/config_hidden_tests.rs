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
            "invalid type: string \"ten\", expected a whole number, 1 or more",
        ),
        ("[[users]]\nid = a-user\n", "2 | id = a-user"),
    ] {
        let err = error_of(text);
        assert!(err.contains(shown), "{shown:?} not in {err}");
        assert!(!err.contains("***"), "{err}");
    }
}

/// QA (2026-12-04): a `"""` or `'''` value never closed is reported at the
/// end of the file, and toml's excerpt shows the line that opened it: the
/// value was printed there, and the note named the line after it.
#[test]
fn an_unclosed_multi_line_value_is_hidden_on_the_line_that_opens_it() {
    for (text, secret) in [
        (
            "[[secrets]]\nname = \"A\"\nvalue = \"\"\"TOPSECRET-VALUE-7\n",
            "TOPSECRET-VALUE-7",
        ),
        (
            "[[secrets]]\nname = \"A\"\nvalue = '''TOPSECRET-VALUE-8\n",
            "TOPSECRET-VALUE-8",
        ),
        (
            "[[users]]\nid = \"a\"\ntoken = \"\"\"tok-SECRET-1234567\n",
            "tok-SECRET-1234567",
        ),
    ] {
        let err = error_of(text);
        assert!(!err.contains(secret), "shows {secret:?}: {err}");
        assert!(err.contains("on line 3"), "{err}");
        assert!(!err.contains("on line 4"), "{err}");
    }
}

/// QA (2026-12-04): a line inside a multi-line credential that ends like a
/// credential's key name (`…-SECRET`) was taken for a key missing its
/// `=`, and named as the key in the note: the value's line, printed.
#[test]
fn a_line_inside_a_multi_line_value_is_never_taken_for_a_key() {
    let text = "[[secrets]]\nname = \"P\"\nvalue = \"\"\"\nPEMLINE-ONE-SECRET\nPEMLINE\\qTWO-SECRET\n\"\"\"\n";
    let err = error_of(text);
    for secret in ["PEMLINE-ONE-SECRET", "TWO-SECRET"] {
        assert!(!err.contains(secret), "shows {secret:?}: {err}");
    }
    assert!(err.contains("`value` on line 5"), "{err}");
}

/// A key that reads as a credential's name but whose error quotes no
/// value (an unknown field: `compact_at_token`, a typo) gets no note of a
/// `***` that is not in the message. (It said "*** stands for the
/// credential of `compact_at_token`", with no `***` in sight.)
#[test]
fn no_note_of_a_hidden_value_when_none_was_hidden() {
    let err = error_of(
        "[providers.p]\nkind = \"scripted\"\nscript = \"s.toml\"\ncompact_at_token = 4000\n",
    );
    assert!(
        err.contains("unknown field `compact_at_token`") && !err.contains("***"),
        "{err}"
    );
}

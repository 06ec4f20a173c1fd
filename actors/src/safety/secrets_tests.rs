#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde::Deserialize;

use super::*;

#[test]
fn wrappers_print_redacted() {
    let token = Sensitive::new("hunter2".to_owned());
    let secret = Secret::new("sk-live-123");
    assert_eq!(
        format!("{token:?} {token} {secret:?} {secret}"),
        "[redacted] [redacted] [redacted] [redacted]"
    );
    assert_eq!(format!("{:#?}", Some(&secret)), "Some(\n    [redacted],\n)");
    assert_eq!(token.expose(), "hunter2");
    assert_eq!(secret.expose(), "sk-live-123");
    assert_eq!(token.into_exposed(), "hunter2");
}

#[test]
fn wrapped_fields_stay_redacted_in_derived_debug() {
    #[derive(Debug, Deserialize)]
    struct Config {
        user: String,
        password: Secret,
        pin: Sensitive<u32>,
    }
    let config: Config =
        serde_json::from_str(r#"{"user": "ana", "password": "p4ss", "pin": 1234}"#).unwrap();
    assert_eq!(
        format!("{config:?}"),
        r#"Config { user: "ana", password: [redacted], pin: [redacted] }"#
    );
    assert_eq!(config.user, "ana");
    assert_eq!(config.password.expose(), "p4ss");
    assert_eq!(*config.pin.expose(), 1234);
}

#[test]
fn scrub_replaces_every_occurrence() {
    let redactor = Redactor::new(["sk-live-123", "hunter2"]);
    assert_eq!(
        redactor.scrub("TOKEN=sk-live-123\npass hunter2, again sk-live-123."),
        "TOKEN=[redacted]\npass [redacted], again [redacted]."
    );
    assert!(matches!(
        redactor.scrub("nothing here"),
        Cow::Borrowed("nothing here")
    ));
}

#[test]
fn scrub_finds_json_and_url_encodings() {
    let redactor = Redactor::new([r#"p"a/ss w\rd"#]);
    let json = serde_json::json!({"password": r#"p"a/ss w\rd"#}).to_string();
    assert_eq!(redactor.scrub(&json), r#"{"password":"[redacted]"}"#);
    assert_eq!(
        redactor.scrub("https://h/login?pw=p%22a%2Fss%20w%5Crd&x=1"),
        "https://h/login?pw=[redacted]&x=1"
    );
}

/// QA (2026-12-04): the forms other encoders write got through: Python's
/// `quote` (keeps `/`), lowercase hex, `+` for a space, and `json.dumps`
/// (non-ASCII as `\u` escapes) and Go's encoder (`<`, `>`, `&` too).
#[test]
fn scrub_finds_the_forms_common_encoders_write() {
    let aws = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    let redactor = Redactor::new([aws, "wörd <&> secret", "pä/ss"]);
    for leaked in [
        "wJalrXUtnFEMI/K7MDENG%2BbPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI%2fK7MDENG%2bbPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI%2FK7MDENG%2BbPxRfiCYEXAMPLEKEY",
        r"w\u00f6rd <&> secret",
        r"w\u00f6rd \u003c\u0026\u003e secret",
        "w%C3%B6rd+%3C%26%3E+secret",
        "w%c3%b6rd%20%3c%26%3e%20secret",
        // PHP's `json_encode` (QA, 2026-12-05: a provider's key in a 401 body)
        r"wJalrXUtnFEMI\/K7MDENG+bPxRfiCYEXAMPLEKEY",
        r"p\u00e4\/ss",
    ] {
        assert_eq!(
            redactor.scrub(&format!("key: {leaked}.")),
            "key: [redacted].",
            "{leaked}"
        );
    }
}

#[test]
fn overlapping_secrets_leave_no_fragment() {
    let redactor = Redactor::new(["abcd", "cdef", "xyxy"]);
    assert_eq!(redactor.scrub("0abcdef1"), "0[redacted]1");
    assert_eq!(redactor.scrub("xyxyxy"), "[redacted]");
}

#[test]
fn empty_secrets_are_ignored() {
    let redactor = Redactor::new([""]);
    assert!(redactor.is_empty());
    assert_eq!(redactor.scrub("text"), "text");
    let mut stream = redactor.stream();
    assert_eq!(stream.push("text"), "text");
    assert_eq!(stream.finish(), "");
}

#[test]
fn stream_catches_a_secret_split_across_chunks() {
    let redactor = Redactor::new(["sk-live-123"]);
    let mut stream = redactor.stream();
    let mut out = String::new();
    for chunk in [
        "export TOKEN=sk-",
        "li",
        "ve-1",
        "23; echo done\n",
        "sk-live-12",
    ] {
        out.push_str(&stream.push(chunk));
    }
    out.push_str(&stream.finish());
    assert_eq!(out, "export TOKEN=[redacted]; echo done\nsk-live-12");
}

#[test]
fn stream_holds_back_less_than_the_longest_secret() {
    let redactor = Redactor::new(["0123456789"]);
    let mut stream = redactor.stream();
    // 25 bytes in, 9 (the longest secret less one) held back.
    assert_eq!(stream.push("hello world, this is fine"), "hello world, thi");
    assert_eq!(stream.finish(), "s is fine");
}

#[test]
fn stream_does_not_leak_the_tail_of_an_overlapping_secret() {
    let redactor = Redactor::new(["abcd", "cdefgh"]);
    let mut stream = redactor.stream();
    let mut out = stream.push("..abcde");
    out.push_str(&stream.push("fgh.."));
    out.push_str(&stream.finish());
    assert_eq!(out, "..[redacted]..");
}

#[test]
fn redactor_debug_does_not_show_secrets() {
    let redactor = Redactor::new(["sk-live-123"]);
    assert_eq!(format!("{redactor:?}"), "Redactor { patterns: 1 }");
}

/// A cut through a secret leaves no part of it of [`PARTIAL_MIN_CHARS`]
/// chars or more: the end of a piece that starts one, the start of a
/// piece that ends one; uncut ends are left alone.
#[test]
fn scrub_piece_hides_a_secret_at_a_cut_end() {
    let redactor = Redactor::new(["SUPERSECRET"]);
    let both = Cuts {
        start: true,
        end: true,
    };
    assert_eq!(redactor.scrub_piece("aa SUPER", both), "aa [redacted]");
    assert_eq!(redactor.scrub_piece("CRET bb", both), "[redacted] bb");
    assert_eq!(
        redactor.scrub_piece("CRET SUPERSECRET SUPERS", both),
        "[redacted] [redacted] [redacted]"
    );
    // under four chars, or an uncut end, stays
    assert_eq!(redactor.scrub_piece("aa SUP", both), "aa SUP");
    assert_eq!(
        redactor.scrub_piece("aa SUPER", Cuts::default()),
        "aa SUPER"
    );
    assert_eq!(redactor.scrub_piece("CRET bb", Cuts::default()), "CRET bb");
    // a whole secret merged with a part of another at the cut
    let redactor = Redactor::new(["abcdXYZW", "XYZW1234"]);
    assert_eq!(redactor.scrub_piece("- abcdXYZW12", both), "- [redacted]");
    assert_eq!(Redactor::start_at_end("héSUPé", ["SUPéR"]), "SUPé".len());
    assert_eq!(Redactor::end_at_start("éRxx", ["SUPéR"]), 0);
    assert_eq!(Redactor::end_at_start("UPéRxx", ["SUPéR"]), "UPéR".len());
    // a piece cut out of the middle of a secret (a line of a key file)
    let key = "BEGIN\nline-one\nline-two\nEND";
    let redactor = Redactor::new([key]);
    assert_eq!(redactor.scrub_piece("line-one\n", both), "[redacted]");
    let end_only = Cuts {
        start: false,
        end: true,
    };
    assert_eq!(redactor.scrub_piece("line-one\n", end_only), "line-one\n");
}

/// The secrets are found before the cut: one the cut goes through is
/// left out whole, and the bytes shown are counted in the text's bytes.
#[test]
fn scrub_cut_leaves_a_secret_through_the_cut_out_whole() {
    let redactor = Redactor::new(["SUPERSECRET"]);
    assert_eq!(
        redactor.scrub_cut("ab SUPERSECRET cd", 5),
        ("ab ".to_owned(), 3)
    );
    assert_eq!(
        redactor.scrub_cut("SUPERSECRET cd SUPERSECRET", 13),
        ("[redacted] c".to_owned(), 13)
    );
    // not cut: scrubbed whole
    assert_eq!(
        redactor.scrub_cut("ab SUPERSECRET", 14),
        ("ab [redacted]".to_owned(), 14)
    );
    // a secret going on past the text: its start is hidden
    assert_eq!(
        redactor.scrub_cut("ab SUPERSECR", 9),
        ("ab [redacted]".to_owned(), 9)
    );
    assert_eq!(redactor.longest(), "SUPERSECRET".len());
}

/// With the bytes around a piece known, every char of a secret that a
/// cut goes through is hidden, a start of a secret of any length
/// included, and text that only looks like one is not; a secret inside
/// is left whole for the scrub.
#[test]
fn hide_cut_parts_hides_exactly_the_parts_at_the_cuts() {
    let redactor = Redactor::new(["SUPERSECRET"]);
    let hide = |piece, before: &str, after: &str| {
        redactor
            .hide_cut_parts(piece, before.as_bytes(), after.as_bytes())
            .into_owned()
    };
    assert_eq!(hide("aa S", "", "UPERSECRET"), "aa [redacted]");
    assert_eq!(hide("aa SUPERSECRE", "", "T"), "aa [redacted]");
    assert_eq!(hide("T bb", "xSUPERSECRE", ""), "[redacted] bb");
    assert_eq!(hide("ECR", "SUPERS", "ET"), "[redacted]");
    // looks like a start, is not one
    assert_eq!(hide("aa SUPER", "", "SECRXT"), "aa SUPER");
    assert_eq!(hide("aa SUP", "", ""), "aa SUP");
    // inside: for the scrub
    assert_eq!(hide("a SUPERSECRET b", "xx", "yy"), "a SUPERSECRET b");
    // a secret overlapping the part at the cut goes with it: the part
    // would leave it no longer whole
    let redactor = Redactor::new(["abcdXYZW", "XYZW1234"]);
    let hidden = redactor.hide_cut_parts("- abcdXYZW12", b"", b"34");
    assert_eq!(hidden, "- [redacted]");
    // chars of several bytes; `before` may start inside one
    let redactor = Redactor::new(["éSUPé"]);
    let before = &"éxéS".as_bytes()[1..];
    assert_eq!(
        redactor.hide_cut_parts("UPé x", before, b""),
        "[redacted] x"
    );
    assert_eq!(
        redactor.hide_cut_parts("x é", b"", "SUPé".as_bytes()),
        "x [redacted]"
    );
}

proptest! {
    /// A piece of a text, its cut parts hidden and then scrubbed, is the
    /// text scrubbed as a whole seen through the piece: each run of
    /// secret chars in it one redaction, all other text as it is.
    #[test]
    fn hidden_cut_parts_and_a_scrub_show_the_piece_of_the_whole_scrub(
        // no letter of "[redacted]", which could spell a secret itself
        secrets in prop::collection::vec("[xy€]{1,6}", 1..4),
        text in "[xyz€ ]{0,120}",
        start in 0usize..120,
        len in 0usize..120,
    ) {
        let redactor = Redactor::new(&secrets);
        let context = redactor.longest().saturating_sub(1);
        let mut start = start.min(text.len());
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = (start + len).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let bytes = text.as_bytes();
        let before = &bytes[start.saturating_sub(context)..start];
        let after = &bytes[end..text.len().min(end + context)];
        let hidden = redactor.hide_cut_parts(&text[start..end], before, after);
        let mut shown = redactor.scrub(&hidden).into_owned();
        let twice = format!("{REDACTED}{REDACTED}");
        while shown.contains(&twice) {
            shown = shown.replace(&twice, REDACTED);
        }
        let in_piece: Vec<Range<usize>> = redactor
            .find(&text)
            .into_iter()
            .map(|r| r.start.max(start) - start..r.end.min(end).max(start) - start)
            .filter(|r| !r.is_empty())
            .collect();
        prop_assert_eq!(shown, replaced(&text[start..end], &in_piece));
    }

    #[test]
    fn streamed_output_matches_whole_scrub(
        secrets in prop::collection::vec("[ab€]{1,6}", 1..4),
        text in "[abc€ ]{0,200}",
        cuts in prop::collection::vec(0usize..200, 0..10),
    ) {
        let redactor = Redactor::new(&secrets);
        let mut bounds: Vec<usize> = cuts
            .into_iter()
            .map(|c| c.min(text.len()))
            .filter(|&c| text.is_char_boundary(c))
            .collect();
        bounds.push(0);
        bounds.push(text.len());
        bounds.sort_unstable();
        let mut stream = redactor.stream();
        let mut out = String::new();
        for w in bounds.windows(2) {
            out.push_str(&stream.push(&text[w[0]..w[1]]));
        }
        out.push_str(&stream.finish());
        prop_assert_eq!(out, redactor.scrub(&text).into_owned());
    }

    #[test]
    fn no_secret_survives_a_scrub(
        // No letter of "[redacted]", which could spell a secret itself.
        secret in "[0-9fghijklmnopqsuvwxyz]{4,12}",
        parts in prop::collection::vec("[a-z0-9 ]{0,20}", 1..6),
    ) {
        let text = parts.join(&secret);
        let redactor = Redactor::new([&secret]);
        let scrubbed = redactor.scrub(&text);
        prop_assert!(!scrubbed.contains(&secret));
    }

    /// No window of a text, however cut, shows four chars of a secret in
    /// a row: a window that ends where it is cut, as Read's, or the start
    /// of a text read past the cut by the longest secret, as Shell's.
    #[test]
    fn no_part_of_a_secret_survives_a_cut(
        secret in "[0-9fghijklmnopqsuvwxyz]{4,16}",
        // no char of the secrets: a part of one is in the text only where
        // the secret is
        parts in prop::collection::vec("[abcde ]{0,20}", 1..6),
        start in 0usize..200,
        len in 0usize..200,
    ) {
        let text = parts.join(&secret);
        let redactor = Redactor::new([&secret]);
        let start = start.min(text.len());
        let end = (start + len).min(text.len());
        let chunks: Vec<&str> = (0..=secret.len() - PARTIAL_MIN_CHARS)
            .map(|i| &secret[i..i + PARTIAL_MIN_CHARS])
            .collect();
        let cuts = Cuts { start: start > 0, end: end < text.len() };
        let piece = redactor.scrub_piece(&text[start..end], cuts);
        for chunk in &chunks {
            prop_assert!(!piece.contains(chunk), "{chunk} in {piece}");
        }
        // Shell's output, from its start
        let read = &text[..(end + redactor.longest()).min(text.len())];
        let (cut, shown) = redactor.scrub_cut(read, end);
        prop_assert!(shown <= end);
        for chunk in &chunks {
            prop_assert!(!cut.contains(chunk), "{chunk} in {cut}");
        }
    }
}

/// A text scrubbed twice keeps the first scrub's markers whole: a value
/// found only inside one (`e`, `d` of `[redacted]`) is not replaced
/// there (QA, 2026-12-06: `th[r[redacted]dact[redacted]d]`). One that
/// overlaps a marker's edge is still replaced.
#[test]
fn a_second_scrub_leaves_the_first_ones_markers_whole() {
    let first = Redactor::new(["hunter2-password"]);
    let once = first.scrub("the hunter2-password here");
    assert_eq!(once, "the [redacted] here");
    let short = Redactor::new(["e", "d]x"]);
    assert_eq!(
        short.scrub(&once),
        "th[redacted] [redacted] h[redacted]r[redacted]"
    );
    assert_eq!(short.scrub("[redacted]x"), "[redacte[redacted]");
}

/// A value stored with whitespace at an end (before the API refused
/// one) is scrubbed without it too: `$(printenv X)` prints it so (QA:
/// the token reached the transcript).
#[test]
fn a_value_with_whitespace_at_an_end_is_scrubbed_without_it() {
    let pasted: Vec<String> = forms("ghp_pasted12345\n").collect();
    assert!(
        pasted.contains(&"ghp_pasted12345\n".to_owned()),
        "{pasted:?}"
    );
    assert!(pasted.contains(&"ghp_pasted12345".to_owned()), "{pasted:?}");
    let spaced: Vec<String> = forms("  spaced-token  ").collect();
    assert!(spaced.contains(&"spaced-token".to_owned()), "{spaced:?}");
}

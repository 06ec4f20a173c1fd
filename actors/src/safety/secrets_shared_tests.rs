//! The shared set of secrets: changed while the redactors sharing it live,
//! found as the redactor's own secrets are (forms, overlaps, cuts).
#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;

use super::super::Cuts;
use super::super::Redactor;
use super::Matcher;

const BOB: &str = "bob-api-secret-value-77777";

#[test]
fn a_redactor_scrubs_values_set_after_it_was_made_until_they_are_deleted() {
    let set = Redactor::shared_set();
    let alices = Redactor::new(["alice-own-1234"]).also_scrubbing(&set);
    let text = format!("worker {BOB} and alice-own-1234");
    assert_eq!(alices.scrub(&text), format!("worker {BOB} and [redacted]"));

    assert!(set.set_shared("bob", [BOB]));
    // the same values again change nothing
    assert!(!set.set_shared("bob", [BOB, BOB]));
    assert_eq!(alices.scrub(&text), "worker [redacted] and [redacted]");
    // a redactor made later shares it too, as does the set's own
    let later = Redactor::new(Vec::<String>::new()).also_scrubbing(&set);
    assert_eq!(later.scrub(&text), "worker [redacted] and alice-own-1234");
    assert_eq!(set.scrub(&text), "worker [redacted] and alice-own-1234");

    // bob deleted it: bob has none now
    assert!(set.set_shared("bob", []));
    assert_eq!(alices.scrub(&text), format!("worker {BOB} and [redacted]"));
    // another person's values stay when one person's change
    assert!(set.set_shared("carol", ["carol-token-5555"]));
    assert!(set.set_shared("bob", [BOB]));
    assert!(set.set_shared("bob", ["bob-rotated-88888"]));
    assert_eq!(
        later.scrub(&format!("{BOB} carol-token-5555 bob-rotated-88888")),
        format!("{BOB} [redacted] [redacted]")
    );
}

#[test]
fn without_a_shared_set_nothing_is_shared() {
    let plain = Redactor::new(["own-secret-1"]);
    assert!(!plain.set_shared("bob", [BOB]));
    let also = Redactor::new(["x-secret-22"]).also_scrubbing(&plain);
    assert_eq!(also.scrub(BOB), BOB);
    assert!(Redactor::default().is_empty());
    // a shared set may come to hold values: never skipped as empty
    assert!(
        !Redactor::default()
            .also_scrubbing(&Redactor::shared_set())
            .is_empty()
    );
}

#[test]
fn shared_values_are_found_escaped_overlapping_and_through_cuts() {
    let set = Redactor::shared_set();
    set.set_shared("bob", ["abcdefgh12", "gh12XYZWVU", "pa ss/wo\"rd"]);
    let r = Redactor::new(Vec::<String>::new()).also_scrubbing(&set);
    // overlapping occurrences: their union goes, no fragment stays
    assert_eq!(r.scrub("<abcdefgh12XYZWVU>"), "<[redacted]>");
    // JSON-escaped and percent-encoded forms
    assert_eq!(r.scrub(r#"{"v":"pa ss/wo\"rd"}"#), r#"{"v":"[redacted]"}"#);
    assert_eq!(r.scrub("?q=pa%20ss%2Fwo%22rd&"), "?q=[redacted]&");
    assert_eq!(r.longest(), "pa%20ss%2Fwo%22rd".len());
    // a cut through one leaves it out whole
    let (shown, used) = r.scrub_cut("0123abcdefgh12 tail", 8);
    assert_eq!((shown.as_str(), used), ("0123", 4));
    // a piece that ends in a start of one hides that start
    let piece = r.scrub_piece(
        "head abcdef",
        Cuts {
            start: false,
            end: true,
        },
    );
    assert_eq!(piece, "head [redacted]");
    // a window whose end goes through one, with the text around it
    let hidden = r.hide_cut_parts("head abcd", b"", b"efgh12 more");
    assert_eq!(hidden, "head [redacted]");
    // streamed in chunks split inside one
    let mut stream = r.stream();
    let mut out = stream.push("x abcde");
    out.push_str(&stream.push("fgh12 y"));
    out.push_str(&stream.finish());
    assert_eq!(out, "x [redacted] y");
}

#[test]
fn the_search_finds_every_occurrence_of_many_values_as_a_plain_scan_does() {
    let values: Vec<String> = (0..500).map(|i| format!("value-{i:04}-secret")).collect();
    let matcher = Matcher::new(values.iter().map(String::as_str));
    let text = format!("a {} b value-0007-secretvalue-0499-secret c", values[123]);
    let found = matcher.occurrences(text.as_bytes());
    let mut plain = Vec::new();
    for v in &values {
        for (at, _) in text.match_indices(v.as_str()) {
            plain.push(at..at + v.len());
        }
    }
    plain.sort_unstable_by_key(|r| r.start);
    assert_eq!(found, plain);
    // a prefix and the longer value at one place: the longer is reported
    let nested = Matcher::new(["secret-12", "secret-1234"]);
    assert_eq!(nested.occurrences(b"xsecret-1234y"), vec![1..12]);
}

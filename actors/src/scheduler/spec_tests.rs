#![allow(clippy::unwrap_used, clippy::expect_used)]

use chrono::DateTime;
use chrono::Utc;
use pretty_assertions::assert_eq;

use super::*;

fn ms(rfc3339: &str) -> i64 {
    DateTime::parse_from_rfc3339(rfc3339)
        .unwrap()
        .timestamp_millis()
}

fn iso(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The slots after `from`, as UTC RFC 3339 strings.
fn slots(cron: &str, tz: &str, from: &str, n: usize) -> Vec<String> {
    let s = Schedule::parse(cron, tz).unwrap();
    let mut at = ms(from);
    let mut out = Vec::new();
    for _ in 0..n {
        at = s.next_after(at).unwrap();
        out.push(iso(at));
    }
    out
}

#[test]
fn eight_in_shanghai_is_midnight_utc() {
    assert_eq!(
        slots("0 8 * * *", "Asia/Shanghai", "2026-11-30T00:00:00Z", 2),
        vec!["2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"]
    );
    // strictly after: the slot itself is not "next"
    assert_eq!(
        slots("0 8 * * *", "Asia/Shanghai", "2026-12-01T00:00:00Z", 1),
        vec!["2026-12-02T00:00:00Z"]
    );
    // sub-second starts round down, so a slot a few ms ago is not repeated
    let s = Schedule::parse("0 8 * * *", "Asia/Shanghai").unwrap();
    assert_eq!(
        s.next_after(ms("2026-12-01T00:00:00Z") + 300),
        Some(ms("2026-12-02T00:00:00Z"))
    );
    assert_eq!(
        s.next_after(ms("2026-12-01T00:00:00Z") - 1),
        Some(ms("2026-12-01T00:00:00Z"))
    );
}

#[test]
fn six_fields_have_seconds_first() {
    assert_eq!(
        slots("30 0 8 * * *", "UTC", "2026-12-01T00:00:00Z", 1),
        vec!["2026-12-01T08:00:30Z"]
    );
}

#[test]
fn new_york_spring_forward_runs_a_skipped_time_right_after_the_gap() {
    // 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist.
    assert_eq!(
        slots("30 2 * * *", "America/New_York", "2026-03-06T12:00:00Z", 3),
        vec![
            "2026-03-07T07:30:00Z", // 02:30 EST
            "2026-03-08T07:00:00Z", // 03:00 EDT, the first instant after the gap
            "2026-03-09T06:30:00Z", // 02:30 EDT
        ]
    );
    // a time outside the gap is untouched
    assert_eq!(
        slots("0 8 * * *", "America/New_York", "2026-03-07T14:00:00Z", 2),
        vec!["2026-03-08T12:00:00Z", "2026-03-09T12:00:00Z"]
    );
    // hourly follows real time: the skipped hour has no slot
    assert_eq!(
        slots("0 * * * *", "America/New_York", "2026-03-08T05:30:00Z", 3),
        vec![
            "2026-03-08T06:00:00Z", // 01:00 EST
            "2026-03-08T07:00:00Z", // 03:00 EDT
            "2026-03-08T08:00:00Z", // 04:00 EDT
        ]
    );
}

#[test]
fn new_york_fall_back_runs_a_repeated_time_once() {
    // 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
    assert_eq!(
        slots("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 3),
        vec![
            "2026-11-01T05:30:00Z", // 01:30 EDT (the first pass)
            "2026-11-02T06:30:00Z", // the next day, 01:30 EST
            "2026-11-03T06:30:00Z",
        ]
    );
    // starting inside the second pass (01:15 EST) does not repeat it either
    assert_eq!(
        slots("30 1 * * *", "America/New_York", "2026-11-01T06:15:00Z", 1),
        vec!["2026-11-02T06:30:00Z"]
    );
    // an interval routine follows real time: both passes of the hour
    assert_eq!(
        slots(
            "*/30 * * * *",
            "America/New_York",
            "2026-11-01T04:45:00Z",
            5
        ),
        vec![
            "2026-11-01T05:00:00Z", // 01:00 EDT
            "2026-11-01T05:30:00Z", // 01:30 EDT
            "2026-11-01T06:00:00Z", // 01:00 EST
            "2026-11-01T06:30:00Z", // 01:30 EST
            "2026-11-01T07:00:00Z", // 02:00 EST
        ]
    );
}

#[test]
fn berlin_transition_days() {
    // 2026-03-29: 02:00 CET jumps to 03:00 CEST.
    assert_eq!(
        slots("30 2 * * *", "Europe/Berlin", "2026-03-28T00:00:00Z", 3),
        vec![
            "2026-03-28T01:30:00Z", // 02:30 CET
            "2026-03-29T01:00:00Z", // 03:00 CEST, right after the gap
            "2026-03-30T00:30:00Z", // 02:30 CEST
        ]
    );
    // 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    assert_eq!(
        slots("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", 2),
        vec![
            "2026-10-25T00:30:00Z", // 02:30 CEST, once
            "2026-10-26T01:30:00Z", // 02:30 CET
        ]
    );
    // 08:00 on weekdays keeps 08:00 local across the change
    assert_eq!(
        slots("0 8 * * 1-5", "Europe/Berlin", "2026-10-23T12:00:00Z", 2),
        vec!["2026-10-26T07:00:00Z", "2026-10-27T07:00:00Z"]
    );
}

#[test]
fn bad_input_says_what_is_expected() {
    let spec = |cron: &str, tz: &str| RoutineSpec {
        name: "brief".into(),
        cron: cron.into(),
        timezone: tz.into(),
        prompt: "Summarize.".into(),
        silent_ok: true,
        catch_up: CatchUp::Once,
    };
    let e = spec("0 8 * *", "UTC").validate().unwrap_err();
    assert_eq!(e.field(), "cron");
    let msg = e.to_string();
    assert!(
        msg.contains("\"0 8 * *\"") && msg.contains("5 fields"),
        "{msg}"
    );
    // seven fields (years) are not accepted
    assert_eq!(
        spec("0 0 8 * * * 2026", "UTC")
            .validate()
            .unwrap_err()
            .field(),
        "cron"
    );
    let e = spec("0 8 * * *", "Asia/Shangai").validate().unwrap_err();
    assert_eq!(e.field(), "timezone");
    assert!(e.to_string().contains("IANA"), "{e}");
    let e = spec("0 8 * * *", "asia/shanghai").validate().unwrap_err();
    assert!(
        e.to_string().contains("did you mean \"Asia/Shanghai\""),
        "{e}"
    );
    let e = spec("0 0 30 2 *", "UTC").validate().unwrap_err();
    assert_eq!(
        e,
        RoutineError::Never {
            cron: "0 0 30 2 *".into()
        }
    );
    // an `L` alone in day-of-week matched no day: it was refused as never
    // firing, pointing at the day-of-month and month fields
    // in a list (`1,L`) it was dropped without a word: Mondays only
    for cron in [
        "0 8 * * L",
        "0 0 8 * * l",
        "0 8 * * 1,L",
        "0 8 * * L,1",
        "0 8 * * l,L",
    ] {
        let e = spec(cron, "UTC").validate().unwrap_err();
        let msg = e.to_string();
        assert!(
            e.field() == "cron"
                && msg.contains("day-of-week")
                && msg.contains("`5L`")
                && !msg.contains("never fires"),
            "{cron}: {msg}"
        );
    }
    for cron in [
        "0 8 * * 5L",
        "0 8 * * FRI#L",
        "0 8 L * *",
        "0 8 LW * *",
        "0 8 * * 1,5L",
    ] {
        assert!(spec(cron, "UTC").validate().is_ok(), "{cron}");
    }
    let mut s = spec("0 8 * * *", "UTC");
    s.prompt = "  ".into();
    assert_eq!(s.validate().unwrap_err(), RoutineError::EmptyPrompt);
    s.prompt = "x".into();
    s.name = "no spaces".into();
    assert_eq!(s.validate().unwrap_err().field(), "name");
    // leap days are rare but real
    assert!(spec("0 9 29 2 *", "UTC").validate().is_ok());
    // spaces around the cron or the time zone are refused, not stored
    let e = spec("0 8 * * *", "UTC\t").validate().unwrap_err();
    assert_eq!(
        e,
        RoutineError::Timezone {
            timezone: "UTC\t".into(),
            hint: " (it has spaces around it; did you mean \"UTC\"?)".into()
        }
    );
    let e = spec("0 8 * * *", " Mars/Base").validate().unwrap_err();
    assert!(e.to_string().contains("(it has spaces around it);"), "{e}");
    let e = spec(" 0 8 * * *", "UTC").validate().unwrap_err();
    assert_eq!(e.field(), "cron");
    assert!(e.to_string().contains("(it has spaces around it)"), "{e}");
}

#[test]
fn new_york_spring_forward_runs_each_skipped_time_of_a_list_or_range_after_the_gap() {
    // 2027-03-14: 02:00 EST jumps to 03:00 EDT; 02:00-02:59 do not exist.
    // a single time, for reference
    assert_eq!(
        slots("30 2 * * *", "America/New_York", "2027-03-13T12:00:00Z", 2),
        vec![
            "2027-03-14T07:00:00Z", // 03:00 EDT, the first instant after the gap
            "2027-03-15T06:30:00Z", // 02:30 EDT
        ]
    );
    // a list of hours: the skipped 02:30 still runs, the 14:30 is untouched
    assert_eq!(
        slots(
            "30 2,14 * * *",
            "America/New_York",
            "2027-03-13T12:00:00Z",
            4
        ),
        vec![
            "2027-03-13T19:30:00Z", // 14:30 EST
            "2027-03-14T07:00:00Z", // 02:30 skipped: 03:00 EDT
            "2027-03-14T18:30:00Z", // 14:30 EDT
            "2027-03-15T06:30:00Z", // 02:30 EDT
        ]
    );
    // a range of hours: 01:30 before the gap, then 02:30 right after it
    assert_eq!(
        slots(
            "30 1-2 * * *",
            "America/New_York",
            "2027-03-13T12:00:00Z",
            4
        ),
        vec![
            "2027-03-14T06:30:00Z", // 01:30 EST
            "2027-03-14T07:00:00Z", // 02:30 skipped: 03:00 EDT
            "2027-03-15T05:30:00Z", // 01:30 EDT
            "2027-03-15T06:30:00Z", // 02:30 EDT
        ]
    );
    // two skipped times of one gap share its end and run once together
    assert_eq!(
        slots(
            "0,30 2 * * *",
            "America/New_York",
            "2027-03-13T12:00:00Z",
            3
        ),
        vec![
            "2027-03-14T07:00:00Z", // 02:00 and 02:30 skipped: 03:00 EDT, once
            "2027-03-15T06:00:00Z", // 02:00 EDT
            "2027-03-15T06:30:00Z", // 02:30 EDT
        ]
    );
    // a list of seconds (six fields) is fixed too
    assert_eq!(
        slots(
            "0,30 30 2 * * *",
            "America/New_York",
            "2027-03-13T12:00:00Z",
            3
        ),
        vec![
            "2027-03-14T07:00:00Z", // 02:30:00 and 02:30:30 skipped: 03:00 EDT
            "2027-03-15T06:30:00Z",
            "2027-03-15T06:30:30Z",
        ]
    );
}

#[test]
fn new_york_spring_forward_runs_a_yearly_list_in_the_gap_that_year() {
    // 14 March 2027 is the transition day; in 2028 it is 12 March.
    assert_eq!(
        slots(
            "15,45 2 14 3 *",
            "America/New_York",
            "2027-01-01T00:00:00Z",
            3
        ),
        vec![
            "2027-03-14T07:00:00Z", // 02:15 and 02:45 skipped: 03:00 EDT, once
            "2028-03-14T06:15:00Z", // 02:15 EDT
            "2028-03-14T06:45:00Z", // 02:45 EDT
        ]
    );
}

#[test]
fn new_york_fall_back_runs_each_repeated_time_of_a_list_or_range_once() {
    // 2027-11-07: 02:00 EDT falls back to 01:00 EST; 01:00-01:59 happen twice.
    assert_eq!(
        slots(
            "30 1-2 * * *",
            "America/New_York",
            "2027-11-06T12:00:00Z",
            4
        ),
        vec![
            "2027-11-07T05:30:00Z", // 01:30 EDT (the first pass only)
            "2027-11-07T07:30:00Z", // 02:30 EST
            "2027-11-08T06:30:00Z", // 01:30 EST
            "2027-11-08T07:30:00Z", // 02:30 EST
        ]
    );
    assert_eq!(
        slots(
            "0,30 1 * * *",
            "America/New_York",
            "2027-11-06T12:00:00Z",
            3
        ),
        vec![
            "2027-11-07T05:00:00Z", // 01:00 EDT
            "2027-11-07T05:30:00Z", // 01:30 EDT
            "2027-11-08T06:00:00Z", // the next day, 01:00 EST
        ]
    );
    assert_eq!(
        slots(
            "30 1,13 * * *",
            "America/New_York",
            "2027-11-06T12:00:00Z",
            3
        ),
        vec![
            "2027-11-06T17:30:00Z", // 13:30 EDT
            "2027-11-07T05:30:00Z", // 01:30 EDT, once
            "2027-11-07T18:30:00Z", // 13:30 EST
        ]
    );
    // starting inside the second pass (01:15 EST) does not repeat 01:30
    assert_eq!(
        slots(
            "30 1-2 * * *",
            "America/New_York",
            "2027-11-07T06:15:00Z",
            1
        ),
        vec!["2027-11-07T07:30:00Z"] // 02:30 EST
    );
    // nor does starting late in the first pass (01:45 EDT) run 01:00 again
    assert_eq!(
        slots(
            "0,30 1 * * *",
            "America/New_York",
            "2027-11-07T05:45:00Z",
            1
        ),
        vec!["2027-11-08T06:00:00Z"]
    );
}

#[test]
fn steps_and_wildcards_still_follow_real_time() {
    // spring forward, 2027-03-14: nothing in the skipped hour
    assert_eq!(
        slots(
            "*/30 * * * *",
            "America/New_York",
            "2027-03-14T06:15:00Z",
            3
        ),
        vec![
            "2027-03-14T06:30:00Z", // 01:30 EST
            "2027-03-14T07:00:00Z", // 03:00 EDT
            "2027-03-14T07:30:00Z", // 03:30 EDT
        ]
    );
    assert_eq!(
        slots(
            "0-59/30 2 * * *",
            "America/New_York",
            "2027-03-14T06:00:00Z",
            1
        ),
        vec!["2027-03-15T06:00:00Z"] // 02:00 EDT the next day
    );
    // fall back, 2027-11-07: both passes of the repeated hour
    assert_eq!(
        slots("0 * * * *", "America/New_York", "2027-11-07T04:30:00Z", 3),
        vec![
            "2027-11-07T05:00:00Z", // 01:00 EDT
            "2027-11-07T06:00:00Z", // 01:00 EST
            "2027-11-07T07:00:00Z", // 02:00 EST
        ]
    );
    // a step in the minutes makes a range of hours follow real time too
    assert_eq!(
        slots(
            "*/30 1-2 * * *",
            "America/New_York",
            "2027-11-07T04:45:00Z",
            6
        ),
        vec![
            "2027-11-07T05:00:00Z", // 01:00 EDT
            "2027-11-07T05:30:00Z", // 01:30 EDT
            "2027-11-07T06:00:00Z", // 01:00 EST
            "2027-11-07T06:30:00Z", // 01:30 EST
            "2027-11-07T07:00:00Z", // 02:00 EST
            "2027-11-07T07:30:00Z", // 02:30 EST
        ]
    );
    // so does a step of one
    assert_eq!(
        slots(
            "0 1-2/1 * * *",
            "America/New_York",
            "2027-11-07T04:30:00Z",
            3
        ),
        vec![
            "2027-11-07T05:00:00Z", // 01:00 EDT
            "2027-11-07T06:00:00Z", // 01:00 EST
            "2027-11-07T07:00:00Z", // 02:00 EST
        ]
    );
}

#[test]
fn a_day_long_gap_runs_its_times_once_when_it_ends() {
    // Samoa skipped 2011-12-30: 23:59:59 on the 29th (-10:00) was followed
    // by 00:00 on the 31st (+14:00).
    assert_eq!(
        slots("30 9,21 * * *", "Pacific/Apia", "2011-12-29T20:00:00Z", 3),
        vec![
            "2011-12-30T07:30:00Z", // 21:30 on the 29th
            "2011-12-30T10:00:00Z", // 09:30 and 21:30 on the 30th: 00:00 on the 31st
            "2011-12-30T19:30:00Z", // 09:30 on the 31st
        ]
    );
}

#[test]
fn next_after_is_strictly_later_and_monotonic_across_transitions() {
    let cases = [
        ("America/New_York", "2027-03-13T00:00:00Z"),
        ("America/New_York", "2027-11-06T00:00:00Z"),
        ("Europe/Berlin", "2027-03-27T00:00:00Z"),
        ("Europe/Berlin", "2027-10-30T00:00:00Z"),
        // half-hour transitions at 02:00 local
        ("Australia/Lord_Howe", "2027-04-03T00:00:00Z"),
        ("Australia/Lord_Howe", "2027-10-02T00:00:00Z"),
    ];
    let crons = [
        "30 2 * * *",
        "30 1-2 * * *",
        "0,30 2 * * *",
        "0,15,30,45 1-3 * * *",
        "30 15 0-3 * * *",
        "*/30 * * * *",
        "0 * * * *",
    ];
    for (tz, from) in cases {
        for cron in crons {
            let s = Schedule::parse(cron, tz).unwrap();
            let start = ms(from);
            // the runs, one after another, over three days
            let mut runs = vec![s.next_after(start).unwrap()];
            while *runs.last().unwrap() < start + 3 * 86_400_000 {
                let prev = *runs.last().unwrap();
                let next = s.next_after(prev).unwrap();
                assert!(
                    next > prev,
                    "{cron} in {tz}: {} after {}",
                    iso(next),
                    iso(prev)
                );
                runs.push(next);
            }
            // from any instant, the next run is the first of those after it
            let mut t = start;
            while t < *runs.last().unwrap() {
                let want = runs.iter().copied().find(|&r| r > t).unwrap();
                assert_eq!(
                    s.next_after(t).map(iso),
                    Some(iso(want)),
                    "{cron} in {tz} after {}",
                    iso(t)
                );
                t += 7 * 60_000 + 1_500;
            }
        }
    }
}

/// `@midnight` is `@daily` (croner lacks it and said "Pattern must have 5
/// or 6 fields"); an unknown nickname is refused with the list.
#[test]
fn midnight_is_daily_and_unknown_nicknames_are_listed() {
    let from = "2026-03-01T10:00:00Z";
    assert_eq!(
        slots("@midnight", "Asia/Shanghai", from, 2),
        slots("@daily", "Asia/Shanghai", from, 2)
    );
    assert_eq!(
        slots("@MIDNIGHT", "UTC", from, 1),
        vec!["2026-03-02T00:00:00Z".to_owned()]
    );
    let e = Schedule::parse("@fortnightly", "UTC").unwrap_err();
    assert_eq!(e.field(), "cron");
    let msg = e.to_string();
    assert!(
        msg.contains("\"@fortnightly\" is not a nickname")
            && msg.contains(
                "@yearly (or @annually), @monthly, @weekly, @daily (or @midnight), @hourly"
            ),
        "{msg}"
    );
}

/// QA: a refused expression named neither its field nor its value
/// ("Component error: Number out of bounds."), and a sixth field meant as
/// a year was refused without a word that six fields put seconds first.
#[test]
fn a_refused_expression_names_its_field_and_value() {
    let detail = |cron: &str| match Schedule::parse(cron, "UTC") {
        Err(RoutineError::Cron { detail, .. }) => detail,
        other => panic!("{cron}: {other:?}"),
    };
    assert_eq!(
        detail("0 24 * * *"),
        "the hour field has 24, and hours are 0-23"
    );
    assert_eq!(
        detail("0 8 * * 8"),
        "the day-of-week field has 8, and days of the week (0 and 7 are Sunday) are 0-7"
    );
    assert_eq!(
        detail("0 8 0 * *"),
        "the day-of-month field has 0, and days of the month are 1-31"
    );
    assert!(
        detail("0 0 * * 5-1")
            .starts_with("the day-of-week field has the range 5-1, which runs backwards"),
        "{}",
        detail("0 0 * * 5-1")
    );
    assert_eq!(
        detail("0 0 8 * * ? *"),
        "it has 7 fields, where 5 or 6 are read; years are not supported"
    );
    let year = detail("0 0 1 1 * 2030");
    assert!(
        year.starts_with("the day-of-week field has 2030")
            && year.contains("with 6 fields the first is the second"),
        "{year}"
    );
    // what croner names well stays its own
    assert!(!detail("0 8 * * FOO").is_empty());
    // and what it said without a field (QA), or took though it reads
    // otherwise than written
    for (cron, said) in [
        ("*/0 * * * *", "the minute field has `*/0`, a step of 0"),
        (
            "*/61 * * * *",
            "the minute field has `*/61`, a step of 61, more than",
        ),
        (
            "*/5/2 * * * *",
            "the minute field has `*/5/2`, with two steps",
        ),
        (
            "1,,2 * * * *",
            "the minute field `1,,2` has an empty item in its list",
        ),
        (
            "0 0 * * MON#6",
            "the day-of-week field has `MON#6`: a month has at most 5",
        ),
        ("0 0 * * 8#1", "the day-of-week field has 8,"),
        ("0 0 32W * *", "the day-of-month field has 32,"),
        (
            "- * * * *",
            "the minute field has `-`, a range without a start",
        ),
        ("0 0 1W-5 * *", "the day-of-month field has"),
        (
            "* * * JANX *",
            "the month field has `JANX`, which it does not read: it takes 1-12 or JAN-DEC",
        ),
        (
            "a * * * *",
            "the minute field has `a`, which it does not read",
        ),
        // names read as their numbers, and marks where they do not go
        // (QA, 2026-12-05: croner's "Range out of bounds." for FRI-MON,
        // "Nth specifier # not allowed" for 15L, which has no #)
        (
            "0 0 * * FRI-MON",
            "the day-of-week field has the range 5-1, which runs backwards",
        ),
        (
            "0 0 * JUL-MAR *",
            "the month field has the range 7-3, which runs backwards",
        ),
        (
            "0 0 15L * *",
            "the day-of-month field has `15L`: `L` alone is the month's last day",
        ),
        (
            "0 0 * * L#2",
            "the day-of-week field has `L#2`: `#` follows one weekday",
        ),
        // a mark where its field takes none, or twice, and numbers past
        // u32 (QA: croner's own words for `5W` and `2L`, `5LL` ran as
        // `5L`, and 4294967296 was "not a whole number")
        (
            "0 0 * * 5W",
            "the day-of-week field has `5W`: it takes only `L` after a weekday",
        ),
        (
            "0 0 * 2L *",
            "the month field has `2L`: it takes no `L` or `W`",
        ),
        (
            "0 0 * * 5LL",
            "the day-of-week field has `5LL`: it takes only `L` after a weekday",
        ),
        (
            "0 0 15WW * *",
            "the day-of-month field has `15WW`: it takes only `W` after a day",
        ),
        (
            "0 0 4294967296 * *",
            "the day-of-month field has `4294967296`, out of its range 1-31",
        ),
        (
            "0 0 */4294967296 * *",
            "the day-of-month field has `*/4294967296`, a step of 4294967296, more than",
        ),
    ] {
        let got = detail(cron);
        assert!(got.starts_with(said), "{cron}: {got}");
    }
    // what it reads as written still parses
    for cron in [
        "*/15 * * * *",
        "0 0 15W * *",
        "0 0 L * *",
        "0 0 * * 5L",
        "0 0 * * MON#2",
        "0 9 * JAN-MAR MON-FRI",
        "0 0 LW * *",
        "0 12 ? * *",
    ] {
        assert!(Schedule::parse(cron, "UTC").is_ok(), "{cron}");
    }
}

//! Unit tests of `hooks.rs`: signatures with and without a timestamp,
//! and a hook's settings from fleet.toml.

#![allow(clippy::unwrap_used)]

use super::*;

const KEY: &[u8] = b"a-hook-secret-of-some-length";
const NOW_MS: i64 = 1_764_700_000_123;

fn tag(signature: &str) -> Vec<u8> {
    hex::decode(signature.trim_start_matches("sha256=")).unwrap()
}

fn refusal(r: Result<Duration, ApiError>) -> String {
    r.err().map(|e| e.to_string()).unwrap_or_default()
}

/// Body-only signatures work as before (unless the hook requires a
/// timestamp); a timestamped one covers "{timestamp}.{body}" and is
/// refused outside the tolerance, either way.
#[test]
fn timestamps_bound_a_signature_in_time() {
    let hook = HookSecret::new(KEY, 1024);
    let body = b"{\"a\":1}";
    assert_eq!(
        hook.verify(&tag(&sign(KEY, body)), None, body, NOW_MS)
            .unwrap(),
        BODY_ONLY_WINDOW
    );
    let now = NOW_MS / 1000;
    let at = |s: i64| {
        let signed = [format!("{s}.").as_bytes(), body.as_slice()].concat();
        (tag(&sign(KEY, &signed)), s.to_string())
    };
    let (t, ts) = at(now - 10);
    assert_eq!(
        hook.verify(&t, Some(&ts), body, NOW_MS).unwrap(),
        Duration::from_secs(290)
    );
    // the body-only signature under a timestamp, or another time
    let e = refusal(hook.verify(&tag(&sign(KEY, body)), Some(&ts), body, NOW_MS));
    assert!(e.contains("sign \"{timestamp}.{raw body}\""), "{e}");
    let e = refusal(hook.verify(&t, Some(&(now - 9).to_string()), body, NOW_MS));
    assert!(e.contains("does not match"), "{e}");
    let (t, ts) = at(now - 301);
    let e = refusal(hook.verify(&t, Some(&ts), body, NOW_MS));
    assert!(
        e.contains("301 s old") && e.contains("tolerance of 300 s"),
        "{e}"
    );
    let (t, ts) = at(now + 301);
    let e = refusal(hook.verify(&t, Some(&ts), body, NOW_MS));
    assert!(e.contains("301 s ahead"), "{e}");
    let e = refusal(hook.verify(&t, Some("17647000001230"), body, NOW_MS));
    assert!(e.contains("not milliseconds"), "{e}");
    let e = refusal(hook.verify(&t, Some("-5"), body, NOW_MS));
    assert!(e.contains("digits only"), "{e}");
    let e = refusal(hook.verify(&t, Some(""), body, NOW_MS));
    assert!(e.contains("digits only"), "{e}");
    // all digits, past what a time can be: said so, not "digits only"
    let e = refusal(hook.verify(&t, Some("99999999999999999999999"), body, NOW_MS));
    assert!(
        e.contains("has 23 digits, far past any Unix time") && !e.contains("digits only"),
        "{e}"
    );

    let strict = HookSecret::new(KEY, 1024).with_options(HookOptions {
        require_timestamp: true,
        timestamp_tolerance_s: 60,
        ..HookOptions::default()
    });
    let e = refusal(strict.verify(&tag(&sign(KEY, body)), None, body, NOW_MS));
    assert!(
        e.contains("requires a timestamped signature") && e.contains("X-Botfleet-Timestamp"),
        "{e}"
    );
    let (t, ts) = at(now - 61);
    assert!(refusal(strict.verify(&t, Some(&ts), body, NOW_MS)).contains("tolerance of 60 s"));
    let (t, ts) = at(now);
    assert_eq!(
        strict.verify(&t, Some(&ts), body, NOW_MS).unwrap(),
        Duration::from_secs(60)
    );
}

/// Regression (QA, high): a timestamped delivery captured and replayed
/// without its timestamp header, with "{timestamp}." put before the body,
/// carries a valid body-only signature (the signed bytes are the same).
/// It was admitted long past the tolerance, again once a day. Such a body
/// is held to the timestamp it starts with; other bodies are as before.
#[test]
fn a_timestamped_signature_replayed_as_a_body_only_one_keeps_its_age() {
    let hook = HookSecret::new(KEY, 1024);
    let body = b"{\"event\":\"invoice.paid\"}";
    let now = NOW_MS / 1000;
    let replayed = |s: i64| {
        let signed = [format!("{s}.").as_bytes(), body.as_slice()].concat();
        (tag(&sign(KEY, &signed)), signed)
    };
    let (t, moved) = replayed(now - 947);
    let e = refusal(hook.verify(&t, None, &moved, NOW_MS));
    assert!(
        e.contains("starts as the text a timestamped signature signs")
            && e.contains("947 s old")
            && e.contains("sends X-Botfleet-Timestamp"),
        "{e}"
    );
    // within the tolerance it is remembered as long as the timestamped
    // one would be (its replay memory catches it then)
    let (t, moved) = replayed(now - 10);
    assert_eq!(
        hook.verify(&t, None, &moved, NOW_MS).unwrap(),
        Duration::from_secs(290)
    );
    // nor when the sender zero-pads its timestamps, which the header takes
    let padded = format!("00{}", now - 4000);
    let signed = [format!("{padded}.").as_bytes(), body.as_slice()].concat();
    let e = refusal(hook.verify(&tag(&sign(KEY, &signed)), None, &signed, NOW_MS));
    assert!(e.contains("4000 s old"), "{e}");
    // quoted as sent, and its age as the payload's, not a header's (QA:
    // "\"1600000000.\"", "the X-Botfleet-Timestamp is … s old")
    assert!(
        e.contains(&format!("\"{padded}.\""))
            && e.contains("the Unix time this payload starts with is 4000 s old")
            && !e.contains("the X-Botfleet-Timestamp is"),
        "{e}"
    );
    // a body that merely starts with a number is not a timestamp
    for plain in [
        b"12.5 degrees".as_slice(),
        b"1234567890123.x",
        b"12345678x.",
        b"0000012.5",
    ] {
        assert_eq!(
            hook.verify(&tag(&sign(KEY, plain)), None, plain, NOW_MS)
                .unwrap(),
            BODY_ONLY_WINDOW
        );
    }
}

/// fleet.toml's settings reach the hook; unset ones keep the defaults.
#[test]
fn a_hooks_settings_come_from_its_config() {
    let config: crate::config::HookConfig = toml::from_str(
        "name = \"gh\"\nsecret = \"x\"\nrequire_timestamp = true\ndeliveries_per_minute = 7\n",
    )
    .unwrap();
    let hook = HookSecret::new(KEY, 1024).with_config(&config);
    let expected = HookOptions {
        timestamp_tolerance_s: 300,
        require_timestamp: true,
        deliveries_per_minute: 7,
    };
    assert_eq!(hook.options, expected);
    let body = b"x";
    let e = refusal(hook.verify(&tag(&sign(KEY, body)), None, body, NOW_MS));
    assert!(e.contains("require_timestamp"), "{e}");
}

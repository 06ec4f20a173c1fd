use std::time::Duration;

use pretty_assertions::assert_eq;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use reqwest::header::HeaderValue;

use super::super::Model;
use super::super::ModelError;
use super::OpenAiModel;
use super::OpenAiOptions;
use super::chat_completions_url;
use super::endpoint::request_headers;
use super::retry::Failure;
use super::retry::backoff;
use super::retry::rate_limit_backoff;
use super::retry::retry_after;
use super::retry::retry_after_at;
use super::retry::retry_delay;

fn options() -> OpenAiOptions {
    OpenAiOptions {
        max_retries: 2,
        backoff_base: Duration::from_millis(100),
        backoff_max: Duration::from_secs(1),
        rate_limit_backoff_base: Duration::from_millis(400),
        ..OpenAiOptions::new("http://127.0.0.1:1/v1", "m")
    }
}

fn status(code: u16, retry_after: Option<Duration>) -> Failure {
    Failure::Status {
        status: StatusCode::from_u16(code).unwrap(),
        body: String::new(),
        retry_after,
    }
}

#[test]
fn which_failures_are_retried() {
    let ms = Duration::from_millis;
    let cases: Vec<(&str, Failure, u32, Option<Duration>)> = vec![
        (
            "connect error",
            Failure::Unreachable("refused".into()),
            1,
            Some(ms(50)),
        ),
        // the longer backoff of a rate limit
        ("429", status(429, None), 1, Some(ms(400))),
        ("429, second attempt", status(429, None), 2, Some(ms(800))),
        ("429 after the last retry", status(429, None), 3, None),
        ("500, second attempt", status(500, None), 2, Some(ms(100))),
        ("503 after the last retry", status(503, None), 3, None),
        ("400", status(400, None), 1, None),
        // Regression (tester H2): a 408 failed at once
        ("408", status(408, None), 1, Some(ms(50))),
        ("401", status(401, None), 1, None),
        ("404", status(404, None), 1, None),
        (
            "retry-after honoured",
            status(429, Some(ms(700))),
            1,
            Some(ms(700)),
        ),
        (
            "retry-after above the cap",
            status(503, Some(ms(1001))),
            1,
            None,
        ),
        (
            "broken stream",
            Failure::Broken {
                detail: String::new(),
            },
            1,
            Some(ms(50)),
        ),
        (
            "too large",
            Failure::Final(ModelError::TooLarge { limit: 10 }),
            1,
            None,
        ),
        ("cancelled", Failure::Final(ModelError::Cancelled), 1, None),
    ];
    for (name, failure, attempts, expected) in cases {
        assert_eq!(
            retry_delay(&failure, attempts, &options(), 0.0),
            expected,
            "{name}"
        );
    }
}

#[test]
fn a_wait_beyond_backoff_max_is_named_in_the_error() {
    let secs = Duration::from_secs;
    let error = status(429, Some(secs(3600))).into_error(1, secs(30));
    assert_eq!(
        error.to_string(),
        "model endpoint answered HTTP 429 after 1 attempt(s) and asked to wait 3600 s, \
         longer than the 30 s this provider waits between attempts; try again once the wait \
         is over: "
    );
    // an HTTP-date `Retry-After` gives a fraction of a second, read as
    // whole seconds (QA: "asked to wait 39.792746228 s"); a date far off
    // says how many days
    let ms = Duration::from_millis;
    for (wait, said) in [
        (ms(39_792), "asked to wait 40 s,"),
        (
            ms(2_299_840_653_259),
            "asked to wait 2299840654 s, about 26618 days,",
        ),
        (ms(450), "asked to wait 0.5 s,"),
    ] {
        let error = status(429, Some(wait)).into_error(1, ms(300));
        let text = error.to_string();
        assert!(text.contains(said), "{text}");
    }
    assert!(error.is_retryable());
    // a wait within the cap, or on a status that is not retried, is a plain HTTP error
    assert!(matches!(
        status(503, Some(secs(2))).into_error(5, secs(30)),
        ModelError::Http { status: 503, .. }
    ));
    assert!(matches!(
        status(400, Some(secs(3600))).into_error(1, secs(30)),
        ModelError::Http { status: 400, .. }
    ));
}

/// Regression: a stream that broke off was reported as "model endpoint
/// unreachable", as if no answer had begun.
#[test]
fn a_broken_stream_is_named_as_such() {
    let error = Failure::Broken {
        detail: "the stream ended early".to_owned(),
    }
    .into_error(3, Duration::from_secs(30));
    assert_eq!(
        error.to_string(),
        "the model's answer broke off after 3 attempt(s): the stream ended early"
    );
    assert!(error.is_retryable());
}

#[test]
fn backoff_doubles_with_jitter_and_is_capped() {
    let options = options();
    let ms = Duration::from_millis;
    assert_eq!(backoff(&options, 1, 0.0), ms(50));
    assert_eq!(backoff(&options, 1, 0.5), ms(75));
    assert_eq!(backoff(&options, 3, 0.0), ms(200));
    assert_eq!(backoff(&options, 5, 0.0), ms(500));
    assert_eq!(backoff(&options, 40, 0.5), ms(750));
    for _ in 0..100 {
        let jitter = super::retry::jitter();
        assert!((0.0..1.0).contains(&jitter), "{jitter}");
    }
}

#[test]
fn reads_retry_after_headers() {
    let headers = |pairs: &[(&'static str, &'static str)]| {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    };
    assert_eq!(
        retry_after(&headers(&[("retry-after", "2")])),
        Some(Duration::from_secs(2))
    );
    assert_eq!(
        retry_after(&headers(&[("retry-after", "0.25")])),
        Some(Duration::from_millis(250))
    );
    assert_eq!(
        retry_after(&headers(&[("retry-after", "9"), ("retry-after-ms", "120")])),
        Some(Duration::from_millis(120))
    );
    // an HTTP date already past: no wait
    assert_eq!(
        retry_after(&headers(&[(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT"
        )])),
        Some(Duration::ZERO)
    );
    assert_eq!(retry_after(&headers(&[("retry-after", "-1")])), None);
    assert_eq!(retry_after(&headers(&[("retry-after", "soon")])), None);
    // a wait too long for a Duration is the longest one (the provider
    // refuses it as past `backoff_max`), not none at all (QA: retried
    // after half a second); whole seconds are read exactly
    for huge in ["1e300", "18446744073709551616", "99999999999999999999"] {
        assert_eq!(
            retry_after(&headers(&[("retry-after", huge)])),
            Some(Duration::MAX),
            "{huge}"
        );
    }
    assert_eq!(
        retry_after(&headers(&[("retry-after", "18446744073709551615")])),
        Some(Duration::from_secs(u64::MAX))
    );
    assert_eq!(
        retry_after(&headers(&[("retry-after", "9223372036854775807")])),
        Some(Duration::from_secs(9_223_372_036_854_775_807))
    );
    assert_eq!(
        retry_after(&headers(&[("retry-after-ms", "99999999999999999999999")])),
        Some(Duration::MAX)
    );
    assert_eq!(retry_after(&HeaderMap::new()), None);
}

/// Regression (QA): a wait of 2^63 - 1 s read "asked to wait
/// 9223372036854775808 s" (rounded through f64).
#[test]
fn a_huge_wait_reads_as_the_server_sent_it() {
    use crate::model::types::wait_text;
    assert_eq!(
        wait_text(Duration::from_secs(9_223_372_036_854_775_807)),
        "9223372036854775807 s, about 106751991167300 days"
    );
    assert_eq!(wait_text(Duration::from_millis(39_792)), "40 s");
    assert_eq!(wait_text(Duration::from_secs(40)), "40 s");
    assert_eq!(
        wait_text(Duration::MAX),
        "18446744073709551615 s, about 213503982334601 days"
    );
}

/// Regression: `Retry-After` as an HTTP date (RFC 9110) was ignored and
/// plain backoff applied.
#[test]
fn reads_retry_after_as_an_http_date() {
    let at = |rfc3339: &str| {
        chrono::DateTime::parse_from_rfc3339(rfc3339)
            .unwrap()
            .with_timezone(&chrono::Utc)
    };
    for (date, now) in [
        // IMF-fixdate, what servers send
        ("Wed, 21 Oct 2099 07:28:00 GMT", "2099-10-21T07:27:00Z"),
        // the obsolete RFC 850 and asctime forms
        ("Friday, 21-Oct-50 07:28:00 GMT", "2050-10-21T07:27:00Z"),
        ("Wed Oct 21 07:28:00 2099", "2099-10-21T07:27:00Z"),
    ] {
        let mut map = HeaderMap::new();
        map.insert("retry-after", HeaderValue::from_static(date));
        assert_eq!(
            retry_after_at(&map, at(now)),
            Some(Duration::from_secs(60)),
            "{date}"
        );
    }
}

/// Regression: a 429 asking for a wait past `call_timeout` was waited for
/// until the call timed out, saying "took longer than N s" and nothing
/// of the rate limit.
#[test]
fn a_wait_past_the_call_deadline_is_named_in_the_error() {
    let secs = Duration::from_secs;
    let failure = status(429, Some(secs(20)));
    assert!(failure.asked_to_wait());
    assert!(!status(429, None).asked_to_wait());
    let error = failure.into_wait_past_deadline(1, secs(20), secs(12));
    assert_eq!(
        error.to_string(),
        "model endpoint answered HTTP 429 (rate limited) after 1 attempt(s) and asked to wait \
         20 s, past the 12 s a model call may take (call_timeout_s); try again once the wait \
         is over, or raise call_timeout_s above it: "
    );
    assert!(error.is_retryable());
}

#[test]
fn joins_the_base_url() {
    for base in [
        "http://h:8000/v1",
        "http://h:8000/v1/",
        "http://h:8000/v1//",
    ] {
        assert_eq!(
            chat_completions_url(base).unwrap().as_str(),
            "http://h:8000/v1/chat/completions"
        );
    }
    // Regression (tester H2): the query of an Azure OpenAI base URL got
    // `/chat/completions` appended to it, leaving the path without it
    for (base, joined) in [
        (
            "https://r.openai.azure.com/openai/deployments/gpt4o?api-version=2024-10-21",
            "https://r.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21",
        ),
        (
            "http://h:8000/v1/?a=1&b=x%2Fy",
            "http://h:8000/v1/chat/completions?a=1&b=x%2Fy",
        ),
        ("http://h:8000", "http://h:8000/chat/completions"),
    ] {
        assert_eq!(chat_completions_url(base).unwrap().as_str(), joined);
    }
    // the parser skips any `/` and `\` after the scheme and takes what
    // follows for the host: `v1` here (QA, 2026-12-05)
    for (base, problem) in [
        ("http:///v1", "has no host after `//`"),
        ("http://\\v1", "has no host after `//`"),
        ("HTTP://", "empty host"),
        (
            "http:/v1",
            "does not have `//` and the host after its scheme",
        ),
        (
            "https:v1",
            "does not have `//` and the host after its scheme",
        ),
        (
            "http:\\\\h/v1",
            "does not have `//` and the host after its scheme",
        ),
        // after the host: read as `/`, so another host than it reads as
        (
            "http://127.0.0.1:9\\@api.openai.com/v1",
            "holds a backslash",
        ),
        (
            "http://[::1]:22436\\@api.openai.com/v1",
            "holds a backslash",
        ),
        ("http://h:8000/v1\\x", "holds a backslash"),
    ] {
        let Err(ModelError::Config(message)) = chat_completions_url(base) else {
            panic!("{base} must be refused");
        };
        assert!(message.contains(problem), "{base}: {message}");
    }
    // a key in the query is not shown; the api-version is
    assert_eq!(
        super::endpoint::shown_url(
            "https://g.example/v1/chat/completions?api-version=1&key=s3cr3t&X-Auth-Token=t0k"
        ),
        "https://g.example/v1/chat/completions?api-version=1&key=***&X-Auth-Token=***"
    );
    let Err(ModelError::Config(message)) = chat_completions_url("http://h:8000/v1#frag") else {
        panic!("a fragment must be refused");
    };
    assert!(message.contains("never sent"), "{message}");
    assert!(matches!(
        chat_completions_url("localhost:8000"),
        Err(ModelError::Config(_))
    ));
    assert!(matches!(
        chat_completions_url("not a url"),
        Err(ModelError::Config(_))
    ));
}

#[test]
fn the_key_never_shows_in_debug_output() {
    let model = OpenAiModel::new(OpenAiOptions {
        api_key: Some("sk-secret-123".into()),
        extra_headers: vec![("x-extra".into(), "hidden-456".into())],
        ..options()
    })
    .unwrap();
    let debug = format!("{model:?}");
    assert!(!debug.contains("sk-secret-123"), "{debug}");
    assert!(!debug.contains("hidden-456"), "{debug}");
    assert!(debug.contains("x-extra"), "{debug}");
    assert_eq!(model.describe(), "openai:m");
}

#[test]
fn malformed_headers_are_config_errors() {
    let bad_key = OpenAiOptions {
        api_key: Some("line\nbreak".into()),
        ..options()
    };
    assert!(matches!(
        OpenAiModel::new(bad_key),
        Err(ModelError::Config(_))
    ));
    let bad_name = OpenAiOptions {
        extra_headers: vec![("bad name".into(), "v".into())],
        ..options()
    };
    assert!(matches!(
        OpenAiModel::new(bad_name),
        Err(ModelError::Config(_))
    ));
}

/// Regression: a 429 without `Retry-After` was retried after the backoff
/// of any failure, about 0.3 s then 1 s, 7.5 s for all four retries:
/// inside the minute a rate limit is counted over.
#[test]
fn a_rate_limit_backs_off_for_seconds_with_jitter() {
    let secs = Duration::from_secs;
    let defaults = OpenAiOptions::new("http://127.0.0.1:1/v1", "m");
    let waits: Vec<Duration> = (1..=defaults.max_retries)
        .map(|attempt| retry_delay(&status(429, None), attempt, &defaults, 0.0).unwrap())
        .collect();
    assert_eq!(waits, vec![secs(2), secs(4), secs(8), secs(16)]);
    assert!(waits.iter().sum::<Duration>() >= secs(30));
    // jitter adds up to half again, never past backoff_max
    assert_eq!(
        rate_limit_backoff(&defaults, 1, 0.5),
        Duration::from_millis(2500)
    );
    let last = rate_limit_backoff(&defaults, 4, 0.999);
    assert!(last > secs(23) && last < secs(24), "{last:?}");
    assert_eq!(rate_limit_backoff(&defaults, 9, 0.999), secs(30));
    // other failures keep the short backoff
    assert_eq!(
        retry_delay(&status(503, None), 1, &defaults, 0.0),
        Some(Duration::from_millis(250))
    );
    assert!(status(429, None).rate_limited_without_wait());
    assert!(!status(429, Some(secs(1))).rate_limited_without_wait());
    assert!(!status(503, None).rate_limited_without_wait());
}

/// Regression: no `User-Agent` was sent, and a key with spaces around it
/// (`KEY=' sk-abc '`) went out as `Bearer  sk-abc `.
#[test]
fn requests_say_botfleet_and_send_the_key_trimmed() {
    let headers = request_headers(&OpenAiOptions {
        api_key: Some(" sk-abc\n".into()),
        ..options()
    })
    .unwrap();
    assert_eq!(
        headers["user-agent"],
        concat!("botfleet/", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(headers["authorization"], "Bearer sk-abc");
    // an extra header may name another agent
    let headers = request_headers(&OpenAiOptions {
        extra_headers: vec![("User-Agent".into(), "mine/1".into())],
        ..options()
    })
    .unwrap();
    assert_eq!(headers["user-agent"], "mine/1");
    // whitespace inside the key is no trimming matter
    let Err(ModelError::Config(message)) = OpenAiModel::new(OpenAiOptions {
        api_key: Some("sk-abc def".into()),
        ..options()
    }) else {
        panic!("a key with a space inside was accepted");
    };
    assert!(message.contains("whitespace inside"), "{message}");
    assert!(!message.contains("sk-abc"), "{message}");
}

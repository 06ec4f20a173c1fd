use std::time::Duration;

use super::super::super::ModelError;
use super::NO_RESPONSE;
use super::OpenAiOptions;
use super::STALLED;
use super::WHOLE_TOO_SLOW;
use super::located_after;

const URL: &str = "http://127.0.0.1:9/v1/chat/completions";

fn options(key: bool) -> OpenAiOptions {
    OpenAiOptions {
        provider: Some("s".into()),
        api_key: key.then(|| "sk-test".to_owned()),
        api_key_env: key.then(|| "H2KEY".to_owned()),
        timeout: Duration::from_secs(10),
        max_retries: 2,
        ..OpenAiOptions::new("http://127.0.0.1:9/v1", "mock-model")
    }
}

/// The error of a call allowed the options' `max_retries`.
fn located(error: ModelError, url: &str, options: &OpenAiOptions) -> ModelError {
    located_after(error, url, options, options.max_retries)
}

fn http(status: u16, body: &str) -> ModelError {
    ModelError::Http {
        status,
        attempts: 1,
        body: body.into(),
    }
}

fn text(error: ModelError, options: &OpenAiOptions) -> String {
    located(error, URL, options).to_string()
}

/// Regression (tester H2): provider errors named neither the provider
/// nor the fix ("model endpoint answered HTTP 401 after 1 attempt(s): …").
#[test]
fn each_failure_names_the_provider_the_url_and_the_key_to_change() {
    let keyed = options(true);
    let keyless = options(false);
    let with_credentials = OpenAiOptions {
        base_url: "http://user:pa55word@127.0.0.1:9/v1".into(),
        ..options(false)
    };
    let cases: Vec<(ModelError, &OpenAiOptions, &str)> = vec![
        (
            http(401, "bad key"),
            &keyed,
            "$H2KEY (providers.s.api_key_env)",
        ),
        (
            http(401, "no key"),
            &keyless,
            "set providers.s.api_key_env to the name",
        ),
        (
            http(401, "bad credentials"),
            &with_credentials,
            "refused the credentials in providers.s.base_url (user:password@…)",
        ),
        (
            http(403, "Forbidden."),
            &keyed,
            "may use model \"mock-model\"",
        ),
        (
            http(
                400,
                "Unrecognized request argument supplied: stream_options",
            ),
            &keyed,
            "set providers.s.stream = false",
        ),
        (
            http(422, r#"{"detail":[{"loc":["body","stream_options"]}]}"#),
            &keyed,
            "set providers.s.stream = false",
        ),
        (
            http(
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use \
                 'max_completion_tokens' instead.",
            ),
            &keyed,
            "providers.s.max_tokens_field = \"max_completion_tokens\"",
        ),
        (
            http(
                400,
                "\"auto\" tool choice requires --enable-auto-tool-choice and \
                 --tool-call-parser to be set",
            ),
            &keyed,
            "--tool-call-parser",
        ),
        (
            http(400, "nope"),
            &keyed,
            "providers.s.model = \"mock-model\"",
        ),
        (http(408, ""), &keyed, "gave up waiting"),
        (http(429, "slow down"), &keyed, "rate-limited every attempt"),
        (http(502, "<html>"), &keyed, "providers.s.max_retries = 2"),
        (
            ModelError::Unreachable {
                attempts: 3,
                detail: format!("{NO_RESPONSE} 10s"),
            },
            &keyed,
            "no answer came within providers.s.timeout_s (10 s)",
        ),
        (
            ModelError::Unreachable {
                attempts: 3,
                detail: "tcp connect error: Connection refused".into(),
            },
            &keyed,
            "(providers.s.base_url)",
        ),
        (
            ModelError::StreamBroken {
                attempts: 3,
                detail: STALLED.into(),
            },
            &keyed,
            "silent for providers.s.timeout_s (10 s)",
        ),
        (
            ModelError::StreamBroken {
                attempts: 3,
                detail: WHOLE_TOO_SLOW.into(),
            },
            &keyed,
            "whole answer took longer than providers.s.timeout_s (10 s)",
        ),
        (
            ModelError::TimedOut {
                limit: Duration::from_secs(40),
                attempts: 1,
            },
            &keyed,
            "providers.s.call_timeout_s (40 s)",
        ),
        (
            ModelError::TooLarge { limit: 1024 },
            &keyed,
            "providers.s.max_response_bytes",
        ),
        (
            ModelError::Protocol("x".into()),
            &keyed,
            "providers.s.base_url",
        ),
    ];
    for (error, options, advice) in cases {
        let shown = error.to_string();
        let text = text(error, options);
        assert!(
            text.starts_with(&format!("providers.s (POST {URL}): ")),
            "{text}"
        );
        assert!(text.contains(advice), "{advice:?} in {text}");
        // the failure itself, as it was
        assert!(text.ends_with(&format!("Error: {shown}")), "{text}");
    }
}

#[test]
fn what_callers_act_on_and_errors_outside_a_fleet_are_kept() {
    for error in [
        ModelError::Cancelled,
        ModelError::ContentFiltered { usage: None },
        ModelError::Refused {
            refusal: "no".into(),
            usage: None,
        },
        ModelError::Aborted {
            reason: "loop".into(),
            partial: String::new(),
        },
    ] {
        assert_eq!(located(error.clone(), URL, &options(true)), error);
    }
    let outside = OpenAiOptions {
        provider: None,
        ..options(true)
    };
    assert_eq!(located(http(401, "x"), URL, &outside), http(401, "x"));
    // a 404 names the URL itself: only the provider is added
    let text = text(http(404, "POST … was not found"), &options(true));
    assert_eq!(
        text,
        "providers.s: model endpoint answered HTTP 404 after 1 attempt(s): POST … was not found"
    );
    // retryable as the failure is
    assert!(located(http(503, "x"), URL, &options(true)).is_retryable());
    assert!(!located(http(401, "x"), URL, &options(true)).is_retryable());
}

/// Regression (QA): a summariser's call, retried at most once whatever
/// `max_retries` allows, failed saying "on every attempt
/// (providers.s.max_retries = 4)", pointing at a setting that does not
/// change it. It says how many attempts it had and why; a turn's call
/// still names the setting.
#[test]
fn a_summarisers_failure_says_how_many_attempts_it_had() {
    let four = OpenAiOptions {
        max_retries: 4,
        ..options(true)
    };
    for status in [408, 429, 503] {
        let told = located_after(http(status, "x"), URL, &four, 1).to_string();
        assert!(
            told.contains("2 attempts: a summariser's call is retried at most once, whatever providers.s.max_retries (4) allows"),
            "{told}"
        );
        let turn = located_after(http(status, "x"), URL, &four, 4).to_string();
        assert!(turn.contains("(providers.s.max_retries = 4)"), "{turn}");
    }
}

/// A server or proxy that refuses `stream_options` (older vLLM and TGI)
/// is first told to drop the field (`stream_usage = false`), which keeps
/// the answers streaming; `stream = false` only if it still refuses.
/// Once the field is off, a message naming it is not blamed on it.
#[test]
fn a_refused_stream_options_names_stream_usage_first() {
    let refusals = [
        "Unrecognized request argument supplied: stream_options",
        r#"{"detail":[{"type":"extra_forbidden","loc":["body","stream_options"]}]}"#,
    ];
    for body in refusals {
        for status in [400, 422] {
            let text = text(http(status, body), &options(true));
            let usage = text.find("set providers.s.stream_usage = false");
            let stream = text.find("set providers.s.stream = false");
            assert!(
                matches!((usage, stream), (Some(u), Some(s)) if u < s),
                "{text}"
            );
        }
    }
    let without = OpenAiOptions {
        stream_usage: false,
        ..options(true)
    };
    let text = text(http(400, refusals[0]), &without);
    assert!(!text.contains("stream_usage"), "{text}");
}

/// A server that does not stream for the model is told to set `stream =
/// false` (QA, 2026-12-05: it got the general advice to check the model);
/// with streaming off already, the advice does not say to turn it off.
#[test]
fn a_refused_stream_names_stream_false() {
    for body in [
        r#"{"error":{"message":"Streaming is not supported for this model","param":"stream"}}"#,
        r#"{"error":{"message":"stream: unsupported value","param": "stream"}}"#,
    ] {
        let text = text(http(400, body), &options(true));
        assert!(text.contains("set providers.s.stream = false"), "{text}");
    }
    let off = text(
        http(400, r#"{"error":{"message":"Streaming is not supported"}}"#),
        &OpenAiOptions {
            stream: false,
            ..options(true)
        },
    );
    assert!(!off.contains("stream = false"), "{off}");
    // an "upstream" error is no refusal to stream (QA: a gateway's
    // "Upstream error …: tools are not supported" was told to turn
    // streaming off), nor a body that echoes `"stream": true` beside
    // another field it refuses
    for body in [
        r#"{"error":{"message":"Upstream error from provider: tools are not supported for this model"}}"#,
        r#"{"detail":"logprobs is not supported","request":{"stream":true,"logprobs":true}}"#,
    ] {
        let said = text(http(400, body), &options(true));
        assert!(!said.contains("stream = false"), "{body}: {said}");
    }
}

/// Regression (QA): an `https://` base_url pointed at a plain-HTTP server
/// was told to "check that the server is running and reachable", which it
/// was; the handshake is what failed, and `http://` is the likely fix.
#[test]
fn tls_spoken_to_a_plain_http_server_says_so() {
    let mut keyed = options(true);
    keyed.base_url = "https://127.0.0.1:8000/v1".into();
    let url = "https://127.0.0.1:8000/v1/chat/completions";
    let error = || ModelError::Unreachable {
        attempts: 3,
        detail: "error sending request: client error (Connect): received corrupt message of \
                 type InvalidContentType"
            .into(),
    };
    let told = located(error(), url, &keyed).to_string();
    assert!(
        told.contains("TLS handshake failed")
            && told.contains("providers.s.base_url = \"http://127.0.0.1:8000/v1\""),
        "{told}"
    );
    // refused or unknown: nothing was reached, the old advice stands
    let refused = ModelError::Unreachable {
        attempts: 3,
        detail: "tcp connect error: Connection refused".into(),
    };
    let told = located(refused, url, &keyed).to_string();
    assert!(!told.contains("TLS"), "{told}");
    // plain HTTP: no TLS to blame
    let told = located(error(), "http://127.0.0.1:8000/v1", &keyed).to_string();
    assert!(!told.contains("TLS"), "{told}");
}

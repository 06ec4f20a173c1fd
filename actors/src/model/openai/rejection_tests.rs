use pretty_assertions::assert_eq;
use reqwest::StatusCode;

use super::super::super::ModelError;
use super::super::OpenAiOptions;
use super::rejection;

fn options(provider: Option<&str>) -> OpenAiOptions {
    OpenAiOptions {
        provider: provider.map(str::to_owned),
        ..OpenAiOptions::new("http://127.0.0.1:1/v1", "m")
    }
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap()
}

/// The window each provider's wording names, or `Some(None)` for an
/// overflow without one.
fn window(code: u16, body: &str) -> Option<Option<u64>> {
    match rejection(status(code), body, &options(Some("p")))? {
        ModelError::ContextOverflow { window, .. } => Some(window),
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_providers_context_overflow_is_recognised_with_its_window() {
    let openai = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    assert_eq!(window(400, openai), Some(Some(8192)));
    let vllm = r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#;
    assert_eq!(window(400, vllm), Some(Some(4096)));
    let vllm_new = r#"{"object":"error","message":"The decoder prompt (length 40000) is longer than the maximum model length of 32,768. Make sure that `max_model_len` is no smaller than the number of text tokens.","type":"BadRequestError","code":400}"#;
    assert_eq!(window(400, vllm_new), Some(Some(32768)));
    let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}"#;
    assert_eq!(window(400, llama), Some(Some(8192)));
    let code_only = r#"{"error":{"message":"too long","code":"context_length_exceeded"}}"#;
    assert_eq!(window(400, code_only), Some(None));
    let plain = "Input is too long: maximum context length is 2048 tokens";
    assert_eq!(window(413, plain), Some(Some(2048)));
}

#[test]
fn other_errors_are_left_alone() {
    let o = options(None);
    for (code, body) in [
        (
            400,
            r#"{"error":{"message":"Invalid 'messages[0].role'","code":"invalid_value"}}"#,
        ),
        (401, r#"{"error":{"message":"Incorrect API key provided"}}"#),
        (
            429,
            r#"{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}"#,
        ),
        // a 5xx is retried whatever it says
        (
            500,
            r#"{"error":{"message":"maximum context length is 8 tokens"}}"#,
        ),
        (400, "not json"),
        (400, ""),
    ] {
        assert_eq!(rejection(status(code), body, &o), None, "{code} {body}");
    }
}

#[test]
fn an_account_out_of_quota_is_not_a_rate_limit() {
    let body = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
    let error = rejection(status(429), body, &options(None)).unwrap();
    assert_eq!(
        error,
        ModelError::QuotaExhausted {
            status: 429,
            body: body.to_owned()
        }
    );
    assert!(!error.is_retryable());
    assert!(
        error.to_string().contains("out of quota or credit"),
        "{error}"
    );
    // OpenRouter's empty account
    let openrouter = r#"{"error":{"message":"Insufficient credits","code":402}}"#;
    assert!(matches!(
        rejection(status(402), openrouter, &options(None)),
        Some(ModelError::QuotaExhausted { status: 402, .. })
    ));
}

#[test]
fn the_overflow_error_names_the_key_to_lower() {
    let body = r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}"#;
    let error = rejection(status(400), body, &options(Some("local"))).unwrap();
    assert!(!error.is_retryable());
    let text = error.to_string();
    assert!(
        text.contains("context window")
            && text.contains("8192 tokens")
            && text.contains("providers.local.compact_at_tokens")
            && text.contains("e.g. 6144")
            && text.contains("maximum context length is 8192"),
        "{text}"
    );
    // without a provider name, or a window, it still says which key
    let text = rejection(
        status(400),
        r#"{"error":{"code":"context_length_exceeded"}}"#,
        &options(None),
    )
    .unwrap()
    .to_string();
    assert!(
        text.contains("compact_at_tokens of this bot's provider"),
        "{text}"
    );
}

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
            status: Some(429),
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
        Some(ModelError::QuotaExhausted {
            status: Some(402),
            ..
        })
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
    // set below the window already: the advice is a lower value, never
    // the window's three quarters above it (QA, 2026-12-05: "set it below
    // 8192, e.g. 6144" to a fleet at 6000)
    let mut set = options(Some("local"));
    set.compact_at_tokens = Some(6000);
    let text = rejection(status(400), body, &set).unwrap().to_string();
    assert!(
        text.contains("providers.local.compact_at_tokens in the fleet file is 6000, below it")
            && text.contains("e.g. 4000")
            && !text.contains("6144"),
        "{text}"
    );
    // at the least it may be: no lower value is offered
    set.compact_at_tokens = Some(1000);
    let text = rejection(status(400), body, &set).unwrap().to_string();
    assert!(
        text.contains("is 1000, the least it may be") && !text.contains("e.g."),
        "{text}"
    );
    // above it: the three quarters, saying what it is now
    set.compact_at_tokens = Some(10_000);
    let text = rejection(status(400), body, &set).unwrap().to_string();
    assert!(text.contains("e.g. 6144; it is 10000"), "{text}");
}

/// The real bodies (status, body, window) of LM Studio, SGLang, TGI and
/// Gemini's OpenAI endpoint for a request longer than the window. Before,
/// each was an ordinary 400 or 422 ("the server refused the request"),
/// which said nothing of the window or of `compact_at_tokens`.
const MORE_OVERFLOWS: &[(&str, u16, &str, Option<u64>)] = &[
    // lmstudio-ai/lmstudio-bug-tracker#237 (its own words, in this order)
    (
        "LM Studio",
        400,
        r#"{"error":"Trying to keep the first 6269 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}"#,
        Some(4096),
    ),
    // LM Studio's later wording (as quoted by clients' overflow tables)
    (
        "LM Studio, later",
        400,
        r#"{"error":"The number of tokens to keep from the initial prompt is greater than the context length. Try to load the model with a larger context length, or provide a shorter input."}"#,
        None,
    ),
    // QwenLM/Qwen3#1321, served by SGLang
    (
        "SGLang",
        400,
        r#"{"object":"error","message":"The input (61709 tokens) is longer than the model's context length (40960 tokens).","type":"BadRequestError","param":null,"code":400}"#,
        Some(40960),
    ),
    // SGLang's tokenizer_manager, when the prompt and max_tokens pass it
    (
        "SGLang, with the completion",
        400,
        r#"{"object":"error","message":"Requested token count exceeds the model's maximum context length of 64000 tokens. You requested a total of 71897 tokens: 7897 tokens from the input messages and 64000 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.","type":"BadRequestError","param":null,"code":400}"#,
        Some(64000),
    ),
    // huggingface/text-generation-inference: validation.rs MaxTotalTokens
    (
        "TGI",
        422,
        r#"{"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 1512. Given: 30 `inputs` tokens and 3984 `max_new_tokens`","error_type":"validation"}"#,
        Some(1512),
    ),
    // huggingface/text-generation-inference#695: InputLength
    (
        "TGI, the input alone",
        422,
        r#"{"error":"Input validation error: `inputs` must have less than 1024 tokens. Given: 1168","error_type":"validation"}"#,
        Some(1024),
    ),
    // google-gemini/gemini-cli#6678's message, in the list the OpenAI
    // endpoint (v1beta/openai) answers with
    (
        "Gemini",
        400,
        r#"[{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]"#,
        Some(1048576),
    ),
];

#[test]
fn lm_studio_sglang_tgi_and_gemini_overflows_are_recognised_with_their_window() {
    for (server, code, body, expected) in MORE_OVERFLOWS {
        assert_eq!(window(*code, body), Some(*expected), "{server}: {body}");
        let error = rejection(status(*code), body, &options(Some("p"))).unwrap();
        assert!(!error.is_retryable(), "{server}");
        assert!(
            error.to_string().contains("providers.p.compact_at_tokens"),
            "{server}: {error}"
        );
    }
}

/// Other refusals of the same servers stay what they are.
#[test]
fn other_refusals_of_these_servers_are_not_overflows() {
    let o = options(None);
    for (code, body) in [
        // Gemini's OpenAI endpoint (ComfyUI-NewBie-LLM-Formatter#3)
        (
            400,
            r#"[{"error":{"code":400,"message":"Invalid JSON payload received. Unknown name \"reasoning\": Cannot find field.","status":"INVALID_ARGUMENT"}}]"#,
        ),
        (
            400,
            r#"[{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}]"#,
        ),
        (
            429,
            r#"[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]"#,
        ),
        // TGI: the output limit alone, and another field
        (
            422,
            r#"{"error":"Input validation error: `max_new_tokens` must be <= 4096. Given: 8192","error_type":"validation"}"#,
        ),
        (
            422,
            r#"{"error":"Input validation error: `temperature` must be strictly positive","error_type":"validation"}"#,
        ),
        // SGLang and LM Studio
        (
            400,
            r#"{"object":"error","message":"The model `gpt-4` does not exist.","type":"NotFoundError","param":null,"code":404}"#,
        ),
        (
            400,
            r#"{"error":"No models loaded. Please load a model in the developer page or use the `lms load` command."}"#,
        ),
        // a server error is retried whatever it says
        (
            500,
            r#"{"error":"Trying to keep the first 6269 tokens when context the overflows."}"#,
        ),
    ] {
        assert_eq!(rejection(status(code), body, &o), None, "{code} {body}");
    }
}

/// Regression (QA, 2026-12-05): OpenRouter's rate limit inside a 200
/// stream (`{"error": {"code": 429, …}}`) was retried at once as an
/// answer that broke off, three times in a second, and the turn's error
/// named a broken answer. It is a 429: waited out, and named so.
#[test]
fn a_rate_limit_reported_inside_an_answer_is_a_429() {
    let error =
        serde_json::json!({"code": 429, "message": "Rate limit exceeded: free-models-per-day"});
    let failure = super::reported(&error, &super::Redactor::default(), &options(None));
    let super::Failure::Status { status, body, .. } = &failure else {
        panic!("{failure:?}");
    };
    assert_eq!(*status, StatusCode::TOO_MANY_REQUESTS);
    assert!(body.contains("Rate limit exceeded"), "{body}");
    // an account out of credit stays final
    let quota =
        serde_json::json!({"code": 429, "type": "insufficient_quota", "message": "out of credit"});
    assert!(matches!(
        super::reported(&quota, &super::Redactor::default(), &options(None)),
        super::Failure::Final(ModelError::QuotaExhausted { .. })
    ));
}

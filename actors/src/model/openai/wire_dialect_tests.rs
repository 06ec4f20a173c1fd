//! Provider dialects of the answer: parallel calls sharing an index,
//! reasoning, the legacy `function_call`, content arrays, bare errors.

use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::super::super::ModelError;
use super::super::super::ModelResponse;
use super::Assembler;
use super::Completion;
use super::StreamChunk;

fn assemble(chunks: Vec<Value>) -> Result<ModelResponse, ModelError> {
    let mut assembler = Assembler::default();
    for value in chunks {
        let chunk: StreamChunk = serde_json::from_value(value).unwrap();
        assembler.apply_chunk(chunk).unwrap();
    }
    assembler.into_response()
}

fn whole(value: Value) -> ModelResponse {
    let completion: Completion = serde_json::from_value(value).unwrap();
    let mut assembler = Assembler::default();
    assembler.apply_completion(completion).unwrap();
    assembler.into_response().unwrap()
}

fn calls_of(response: ModelResponse) -> Vec<(String, String, String)> {
    response
        .tool_calls
        .into_iter()
        .map(|c| (c.id, c.name, c.arguments))
        .collect()
}

fn triple(id: &str, name: &str, arguments: &str) -> (String, String, String) {
    (id.to_owned(), name.to_owned(), arguments.to_owned())
}

fn piece(part: Value) -> Value {
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [part]}}]})
}

fn stop(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

/// Regression: parallel calls that all came at index 0 with their own ids
/// (Ollama behind LiteLLM, some Qwen setups) ran into one call
/// `RememberSendMessage` with arguments `{…}{…}`, and both were lost.
#[test]
fn parallel_calls_sharing_index_zero_are_told_apart_by_their_ids() {
    let response = assemble(vec![
        piece(json!({"index": 0, "id": "call_r1", "type": "function",
            "function": {"name": "Remember", "arguments": "{\"text\":\"likes jazz\"}"}})),
        piece(json!({"index": 0, "id": "call_s1", "type": "function",
            "function": {"name": "SendMessage", "arguments": "{\"text\":\"noted\"}"}})),
        stop("tool_calls"),
    ])
    .unwrap();
    assert_eq!(
        calls_of(response),
        vec![
            triple("call_r1", "Remember", r#"{"text":"likes jazz"}"#),
            triple("call_s1", "SendMessage", r#"{"text":"noted"}"#),
        ]
    );
    // two calls of one tool, each split over pieces
    let response = assemble(vec![
        piece(json!({"index": 0, "id": "a", "function": {"name": "SendMessage", "arguments": ""}})),
        piece(json!({"index": 0, "function": {"arguments": "{\"text\":"}})),
        piece(json!({"index": 0, "function": {"arguments": "\"one\"}"}})),
        piece(json!({"index": 0, "id": "b", "function": {"name": "SendMessage", "arguments": ""}})),
        piece(json!({"index": 0, "function": {"arguments": "{\"text\":\"two\"}"}})),
        stop("tool_calls"),
    ])
    .unwrap();
    assert_eq!(
        calls_of(response),
        vec![
            triple("a", "SendMessage", r#"{"text":"one"}"#),
            triple("b", "SendMessage", r#"{"text":"two"}"#),
        ]
    );
}

/// Regression: two whole calls of one tool at the same index without ids,
/// or with neither index nor id, in separate chunks became one call with
/// invalid JSON arguments.
#[test]
fn a_whole_call_after_a_finished_one_starts_a_new_call() {
    for index in [Some(0), None] {
        let part = |text: &str| {
            let mut part = json!({"function": {"name": "SendMessage",
                "arguments": json!({"text": text}).to_string()}});
            if let Some(index) = index {
                part["index"] = json!(index);
            }
            piece(part)
        };
        let response = assemble(vec![part("one"), part("two"), stop("tool_calls")]).unwrap();
        let texts: Vec<String> = calls_of(response)
            .into_iter()
            .map(|(_, name, arguments)| format!("{name} {arguments}"))
            .collect();
        assert_eq!(
            texts,
            [
                r#"SendMessage {"text":"one"}"#,
                r#"SendMessage {"text":"two"}"#
            ],
            "index {index:?}"
        );
    }
}

/// The shapes that assembled right before still do.
#[test]
fn shapes_that_worked_still_work() {
    // the id late, the same id and name repeated in every piece
    let response = assemble(vec![
        piece(json!({"index": 0, "function": {"name": "Read", "arguments": "{\"pa"}})),
        piece(json!({"index": 0, "id": "late", "function": {"arguments": "th\":1}"}})),
        piece(json!({"index": 0, "id": "late", "function": {"name": "Read", "arguments": ""}})),
        stop("tool_calls"),
    ])
    .unwrap();
    assert_eq!(
        calls_of(response),
        vec![triple("late", "Read", r#"{"path":1}"#)]
    );
    // ids without index, interleaved by id
    let response = assemble(vec![
        piece(json!({"id": "x", "function": {"name": "A", "arguments": "{"}})),
        piece(json!({"id": "y", "function": {"name": "B", "arguments": "{"}})),
        piece(json!({"id": "x", "function": {"arguments": "}"}})),
        piece(json!({"id": "y", "function": {"arguments": "}"}})),
    ])
    .unwrap();
    assert_eq!(
        calls_of(response),
        vec![triple("x", "A", "{}"), triple("y", "B", "{}")]
    );
}

/// Regression: `reasoning_content` (DeepSeek, Kimi) and `reasoning`
/// (vLLM, OpenRouter) were dropped; they are kept apart from the text.
#[test]
fn reasoning_is_kept_apart_from_the_text() {
    let mut assembler = Assembler::default();
    let mut deltas = Vec::new();
    for value in [
        json!({"choices": [{"delta": {"role": "assistant", "reasoning_content": "Think "}}]}),
        json!({"choices": [{"delta": {"reasoning_content": "hard."}}]}),
        json!({"choices": [{"delta": {"content": "Hi"}}]}),
        stop("stop"),
    ] {
        let chunk: StreamChunk = serde_json::from_value(value).unwrap();
        deltas.extend(assembler.apply_chunk(chunk).unwrap());
    }
    assert_eq!(deltas, ["Hi"], "reasoning is not streamed to the sink");
    let response = assembler.into_response().unwrap();
    assert_eq!(
        (response.text.as_str(), response.reasoning.as_deref()),
        ("Hi", Some("Think hard."))
    );
    let response = whole(json!({"choices": [{"message": {"content": "ok",
        "reasoning": "other name"}, "finish_reason": "stop"}]}));
    assert_eq!(response.reasoning.as_deref(), Some("other name"));
    let response = whole(json!({"choices": [{"message": {"content": "ok",
        "reasoning_content": "kept", "reasoning": "both"}}]}));
    assert_eq!(response.reasoning.as_deref(), Some("kept"));
    // no field, or null: no reasoning
    let response = whole(json!({"choices": [{"message": {"content": "ok",
        "reasoning_content": null}}]}));
    assert_eq!(response.reasoning, None);
}

/// Regression (QA, 2026-12-05): an empty reasoning (DeepSeek V4 sends one
/// on some tool-call rounds) was taken as none, and left out of every
/// later request, which DeepSeek refused for good (400 "Missing
/// `reasoning_content` field"). Present and empty, it is kept so, in a
/// stream and in a whole answer.
#[test]
fn an_empty_reasoning_is_kept_as_sent() {
    let mut assembler = Assembler::default();
    for value in [
        json!({"choices": [{"delta": {"role": "assistant", "reasoning_content": ""}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
            "function": {"name": "Read", "arguments": "{}"}}]}}]}),
        stop("tool_calls"),
    ] {
        let chunk: StreamChunk = serde_json::from_value(value).unwrap();
        assembler.apply_chunk(chunk).unwrap();
    }
    let response = assembler.into_response().unwrap();
    assert_eq!(response.reasoning.as_deref(), Some(""));
    let response = whole(json!({"choices": [{"message": {"content": null,
        "reasoning_content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "Read", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]}));
    assert_eq!(response.reasoning.as_deref(), Some(""));
    // an empty `reasoning` (vLLM's, OpenRouter's name) is none: such a
    // server may refuse a `reasoning_content` sent back
    let response = whole(json!({"choices": [{"message": {"content": null,
        "reasoning": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "Read", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]}));
    assert_eq!(response.reasoning, None);
}

/// Regression: the legacy `function_call` was ignored, streamed or whole.
#[test]
fn a_legacy_function_call_is_one_tool_call() {
    let response = assemble(vec![
        json!({"choices": [{"delta": {"function_call": {"name": "SendMessage", "arguments": ""}}}]}),
        json!({"choices": [{"delta": {"function_call": {"arguments": "{\"text\":"}}}]}),
        json!({"choices": [{"delta": {"function_call": {"arguments": "\"hi\"}"}}}]}),
        stop("function_call"),
    ])
    .unwrap();
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].name, "SendMessage");
    assert_eq!(response.tool_calls[0].arguments, r#"{"text":"hi"}"#);
    let response = whole(json!({"choices": [{"finish_reason": "function_call",
        "message": {"content": null, "function_call":
            {"name": "Read", "arguments": "{\"path\":\"a\"}"}}}]}));
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(
        (
            response.tool_calls[0].name.as_str(),
            response.tool_calls[0].arguments.as_str()
        ),
        ("Read", r#"{"path":"a"}"#)
    );
}

/// Regression: Mistral-style content arrays failed the turn with
/// "invalid type: sequence".
#[test]
fn content_arrays_are_joined_text() {
    let response = assemble(vec![
        json!({"choices": [{"delta": {"content": [{"type": "text", "text": "Hel"}]}}]}),
        json!({"choices": [{"delta": {"content": [{"type": "text", "text": "lo"},
            {"type": "image_url", "image_url": {"url": "x"}}]}}]}),
        stop("stop"),
    ])
    .unwrap();
    assert_eq!(response.text, "Hello");
    let response = whole(json!({"choices": [{"message": {"content": [
        {"type": "text", "text": "a"}, {"type": "reference", "ids": [1]},
        {"type": "text", "text": "b"}]}}]}));
    assert_eq!(response.text, "ab");
    let error =
        serde_json::from_value::<Completion>(json!({"choices": [{"message": {"content": 5}}]}))
            .unwrap_err();
    assert!(error.to_string().contains("array of"), "{error}");
}

/// A bare JSON error body is read for its message; anything else is not.
#[test]
fn a_bare_error_body_gives_its_message() {
    assert_eq!(
        super::bare_error(br#" {"error": {"message": "quota exceeded", "code": 429}} "#)
            .as_ref()
            .map(super::error_message)
            .as_deref(),
        Some("quota exceeded")
    );
    assert_eq!(super::bare_error(b"{\"choices\": []}"), None);
    assert_eq!(super::bare_error(b"not json"), None);
}

/// Regression (QA): a server that gives every piece of one call a new id
/// (Poolside's API; mlx-openai-server before its fix) had the rest of the
/// arguments, sent without a name, made a call of its own: `SendMessage`
/// with `{"text":` and `missing_function_name` with the rest, and the bot
/// could never deliver through it.
#[test]
fn a_piece_under_a_new_id_without_a_name_continues_the_call() {
    let response = assemble(vec![
        piece(json!({"index": 0, "id": "call_first", "type": "function",
            "function": {"name": "SendMessage", "arguments": "{\"text\":"}})),
        piece(json!({"index": 0, "id": "call_second", "type": "function",
            "function": {"arguments": " \"hello from the model\"}"}})),
        stop("tool_calls"),
    ])
    .unwrap();
    let calls = calls_of(response);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].1, "SendMessage");
    assert_eq!(calls[0].2, r#"{"text": "hello from the model"}"#);
    // a new id with a name, or after whole arguments, is a new call
    let response = assemble(vec![
        piece(json!({"index": 0, "id": "a", "function": {"name": "Read", "arguments": "{\"path\":\"x\"}"}})),
        piece(json!({"index": 0, "id": "b", "function": {"arguments": "{\"path\":\"y\"}"}})),
        stop("tool_calls"),
    ])
    .unwrap();
    assert_eq!(calls_of(response).len(), 2);
}

/// Regression (QA): the rest of a call's arguments at the next index,
/// without id or name (seen from Nebius and Cerebras), and DeepSeek
/// behind a proxy (its second call's head at index 0 with a new id, its
/// arguments at index 1), made a `missing_function_name` call.
#[test]
fn arguments_at_the_next_index_without_id_or_name_continue_the_call() {
    let response = assemble(vec![
        piece(json!({"index": 0, "id": "c1", "function": {"name": "SendMessage", "arguments": "{\"te"}})),
        piece(json!({"index": 1, "function": {"arguments": "xt\":\"hi\"}"}})),
        stop("tool_calls"),
    ])
    .unwrap();
    assert_eq!(
        calls_of(response),
        vec![triple("c1", "SendMessage", r#"{"text":"hi"}"#)]
    );
    let response = assemble(vec![
        piece(json!({"index": 0, "id": "r1", "function": {"name": "Remember", "arguments": "{\"text\":\"jazz\"}"}})),
        piece(json!({"index": 0, "id": "s1", "function": {"name": "SendMessage", "arguments": ""}})),
        piece(json!({"index": 1, "function": {"arguments": "{\"text\":"}})),
        piece(json!({"index": 1, "function": {"arguments": "\"noted\"}"}})),
        stop("tool_calls"),
    ])
    .unwrap();
    assert_eq!(
        calls_of(response),
        vec![
            triple("r1", "Remember", r#"{"text":"jazz"}"#),
            triple("s1", "SendMessage", r#"{"text":"noted"}"#),
        ]
    );
    // parallel calls interleaved by id at one index keep their pieces
    let response = assemble(vec![
        piece(json!({"index": 0, "id": "x", "function": {"name": "A", "arguments": "{"}})),
        piece(json!({"index": 0, "id": "y", "function": {"name": "B", "arguments": "{"}})),
        piece(json!({"index": 0, "id": "x", "function": {"arguments": "}"}})),
        piece(json!({"index": 0, "id": "y", "function": {"arguments": "}"}})),
        stop("tool_calls"),
    ])
    .unwrap();
    assert_eq!(
        calls_of(response),
        vec![triple("x", "A", "{}"), triple("y", "B", "{}")]
    );
}

fn finish() -> Value {
    stop("tool_calls")
}

/// Regression (QA, 2026-12-05): a server that sends a call's name after
/// its first arguments, or after all of them, had the call split in two
/// broken ones (`missing_function_name {"text` and `SendMessage ": …`).
#[test]
fn a_name_that_comes_after_the_arguments_names_the_call() {
    for chunks in [
        vec![
            piece(json!({"index": 0, "id": "c1", "type": "function",
                         "function": {"arguments": "{\"text"}})),
            piece(json!({"index": 0, "type": "function",
                         "function": {"name": "SendMessage", "arguments": "\": \"hi\"}"}})),
            finish(),
        ],
        vec![
            piece(json!({"index": 0, "id": "c1", "type": "function",
                         "function": {"arguments": "{\"text\": \"hi\"}"}})),
            piece(json!({"index": 0, "function": {"name": "SendMessage"}})),
            finish(),
        ],
    ] {
        assert_eq!(
            calls_of(assemble(chunks).unwrap()),
            vec![(
                "c1".to_owned(),
                "SendMessage".to_owned(),
                r#"{"text": "hi"}"#.to_owned()
            )]
        );
    }
}

/// Regression (QA, 2026-12-05): a server that sends a finished call again
/// whole in its last chunk (same id, name and arguments) had it run twice.
#[test]
fn a_call_sent_again_whole_is_one_call() {
    let args = r#"{"command": "echo once >> runs.txt"}"#;
    let chunks = vec![
        piece(json!({"index": 0, "id": "call_1", "type": "function",
                     "function": {"name": "Shell", "arguments": ""}})),
        piece(json!({"index": 0, "type": "function", "function": {"arguments": args}})),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "Shell", "arguments": args}}]},
            "finish_reason": "tool_calls"}]}),
    ];
    assert_eq!(
        calls_of(assemble(chunks).unwrap()),
        vec![("call_1".to_owned(), "Shell".to_owned(), args.to_owned())]
    );
    // two calls at index 0 with other ids, or other arguments, stay two
    let chunks = vec![
        piece(json!({"index": 0, "id": "a", "type": "function",
                     "function": {"name": "Shell", "arguments": args}})),
        piece(json!({"index": 0, "id": "b", "type": "function",
                     "function": {"name": "Shell", "arguments": args}})),
        piece(json!({"index": 0, "type": "function",
                     "function": {"name": "Shell", "arguments": r#"{"command": "ls"}"#}})),
        finish(),
    ];
    assert_eq!(calls_of(assemble(chunks).unwrap()).len(), 3);
}

/// Regression (QA, 2026-12-05): a trailing piece of only whitespace that
/// repeated the id and name made a phantom call with no arguments.
#[test]
fn a_piece_of_whitespace_continues_its_call() {
    let call = |arguments: &str| {
        piece(json!({"index": 0, "id": "call_r", "type": "function",
                     "function": {"name": "Shell", "arguments": arguments}}))
    };
    let chunks = vec![
        call("{\"command"),
        call("\": \"echo x"),
        call("\"}"),
        call("\n"),
        finish(),
    ];
    let calls = calls_of(assemble(chunks).unwrap());
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].2.trim(), r#"{"command": "echo x"}"#);
}

/// Regression (QA, 2026-12-05): a streamed chunk that carries its choice
/// as `message` (the whole answer in one chunk) was taken for an empty
/// answer, and the turn ended undelivered.
#[test]
fn a_streamed_choice_sent_as_a_message_is_read() {
    let chunks = vec![
        json!({"choices": [{"index": 0, "message": {"role": "assistant",
        "content": null, "tool_calls": [{"index": 0, "id": "m1", "type": "function",
        "function": {"name": "SendMessage", "arguments": "{\"text\": \"hi\"}"}}]},
        "finish_reason": "tool_calls"}]}),
    ];
    assert_eq!(
        calls_of(assemble(chunks).unwrap()),
        vec![triple("m1", "SendMessage", r#"{"text": "hi"}"#)]
    );
}

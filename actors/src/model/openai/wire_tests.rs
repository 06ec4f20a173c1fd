use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::super::super::FinishReason;
use super::super::super::ModelError;
use super::super::super::ModelResponse;
use super::super::super::ToolCall;
use super::super::super::Usage;
use super::Assembler;
use super::Completion;
use super::StreamChunk;

fn chunk(value: Value) -> StreamChunk {
    serde_json::from_value(value).unwrap()
}

#[test]
fn assembles_interleaved_tool_call_deltas() {
    let mut assembler = Assembler::default();
    let chunks = [
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "Let me check."}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 1, "id": "b", "type": "function",
             "function": {"name": "Two", "arguments": ""}},
            {"index": 0, "id": "a", "type": "function",
             "function": {"name": "One", "arguments": "{\"x\""}}
        ]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 1, "function": {"arguments": "{\"y\":"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": ":1}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 1, "function": {"arguments": "2}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
               "usage": null}),
        json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": 8}}}),
    ];
    let mut deltas = Vec::new();
    for value in chunks {
        deltas.extend(assembler.apply_chunk(chunk(value)).unwrap());
    }
    assert_eq!(deltas, vec!["Let me check.".to_owned()]);
    assert_eq!(
        assembler.into_response().unwrap(),
        ModelResponse {
            reasoning: None,
            text: "Let me check.".to_owned(),
            tool_calls: vec![
                ToolCall {
                    id: "a".to_owned(),
                    name: "One".to_owned(),
                    arguments: r#"{"x":1}"#.to_owned(),
                },
                ToolCall {
                    id: "b".to_owned(),
                    name: "Two".to_owned(),
                    arguments: r#"{"y":2}"#.to_owned(),
                },
            ],
            finish: FinishReason::ToolCalls,
            usage: Some(Usage {
                prompt_tokens: 9,
                completion_tokens: 4,
                cached_prompt_tokens: 8,
            }),
        }
    );
}

#[test]
fn accepts_deepseek_cache_hits() {
    let mut assembler = Assembler::default();
    assembler
        .apply_chunk(chunk(
            json!({"usage": {"prompt_tokens": 5, "completion_tokens": 1,
            "prompt_cache_hit_tokens": 3, "prompt_cache_miss_tokens": 2}}),
        ))
        .unwrap();
    assert_eq!(
        assembler.into_response().unwrap().usage,
        Some(Usage {
            prompt_tokens: 5,
            completion_tokens: 1,
            cached_prompt_tokens: 3,
        })
    );
}

#[test]
fn fills_missing_ids_arguments_and_finish() {
    let mut assembler = Assembler::default();
    assembler
        .apply_chunk(chunk(json!({"choices": [{"delta": {"tool_calls": [
            {"function": {"name": "Ping"}}]}}]})))
        .unwrap();
    let response = assembler.into_response().unwrap();
    let [call] = response.tool_calls.as_slice() else {
        panic!("{response:?}");
    };
    assert_eq!(
        (call.name.as_str(), call.arguments.as_str()),
        ("Ping", "{}")
    );
    assert_eq!(response.finish, FinishReason::ToolCalls);
    // a fresh id, not `call_<index>` (which every step would repeat)
    assert!(
        call.id.starts_with("call_") && call.id.len() > 20,
        "{}",
        call.id
    );
    let mut again = Assembler::default();
    again
        .apply_chunk(chunk(json!({"choices": [{"delta": {"tool_calls": [
            {"function": {"name": "Ping"}}]}}]})))
        .unwrap();
    assert_ne!(again.into_response().unwrap().tool_calls[0].id, call.id);
}

#[test]
fn counts_the_bytes_of_text_and_arguments() {
    let mut assembler = Assembler::default();
    assembler
        .apply_chunk(chunk(json!({"choices": [{"delta": {"content": "héllo",
            "tool_calls": [{"index": 0, "id": "a", "function": {"name": "Ping", "arguments": "{\"x\""}}]}}]})))
        .unwrap();
    assembler
        .apply_chunk(chunk(json!({"choices": [{"delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": ":1}"}}]}}]})))
        .unwrap();
    assembler
        .apply_chunk(chunk(json!({"choices": [{"delta": {"tool_calls": [
            {"index": 0, "id": "a", "function": {"name": "Ping"}}]}}]})))
        .unwrap();
    assert_eq!(
        assembler.size(),
        "héllo".len() + "a".len() + "Ping".len() + r#"{"x":1}"#.len()
    );
}

/// Regression: a call without a name failed the whole turn ("tool call 0
/// has no function name") where a call of an unknown tool is answered
/// with an error result and the turn goes on.
#[test]
fn a_call_without_a_name_is_named_for_what_it_lacks() {
    let mut assembler = Assembler::default();
    assembler
        .apply_chunk(chunk(json!({"choices": [{"delta": {"tool_calls": [
            {"index": 0, "id": "x", "function": {"name": "", "arguments": "{}"}},
            {"index": 1, "id": "y", "function": {"name": "Ping", "arguments": "{}"}}]}}]})))
        .unwrap();
    assert_eq!(
        calls_of(assembler.into_response()),
        vec![
            triple("x", super::NAMELESS_CALL, "{}"),
            triple("y", "Ping", "{}")
        ]
    );
}

/// Streamed or whole, an answer is a choice: none at all is no answer
/// (the caller retries it), one without a finish reason is accepted.
#[test]
fn an_answer_without_a_choice_is_told_apart_from_one_without_a_finish_reason() {
    let mut streamed = Assembler::default();
    streamed.apply_chunk(chunk(json!({"choices": []}))).unwrap();
    assert!(!streamed.has_choice());
    let mut whole = Assembler::default();
    let completion: Completion = serde_json::from_value(json!({"choices": []})).unwrap();
    assert_eq!(whole.apply_completion(completion), Ok(None));
    assert!(!whole.has_choice());

    let mut streamed = Assembler::default();
    streamed
        .apply_chunk(chunk(
            json!({"choices": [{"index": 0, "delta": {"content": "hi"}}]}),
        ))
        .unwrap();
    assert!(streamed.has_choice() && !streamed.has_finished());
    let mut whole = Assembler::default();
    let completion: Completion = serde_json::from_value(json!({"choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}}]}))
    .unwrap();
    whole.apply_completion(completion).unwrap();
    assert!(whole.has_choice());
    for assembler in [streamed, whole] {
        let response = assembler.into_response().unwrap();
        assert_eq!(
            (response.text.as_str(), response.finish),
            ("hi", FinishReason::Stop)
        );
    }
}

#[test]
fn maps_finish_reasons() {
    for (reason, expected) in [
        ("stop", FinishReason::Stop),
        ("tool_calls", FinishReason::ToolCalls),
        ("function_call", FinishReason::ToolCalls),
        ("length", FinishReason::Length),
        ("something_new", FinishReason::Other),
    ] {
        assert_eq!(
            super::finish_reason(reason),
            super::Finish::Reason(expected),
            "{reason}"
        );
    }
}

/// `error` and `abort` say the server stopped the answer; other reasons
/// do not.
#[test]
fn error_and_abort_are_failed_finishes() {
    for (reason, failed) in [
        ("error", Some("error")),
        ("abort", Some("abort")),
        ("stop", None),
        ("eos_token", None),
    ] {
        let mut assembler = Assembler::default();
        assembler
            .apply_chunk(chunk(json!({"choices": [
                {"index": 0, "delta": {"content": "half"}, "finish_reason": reason}]})))
            .unwrap();
        assert_eq!(assembler.failed_finish(), failed, "{reason}");
    }
}

/// After a finish reason only the end is to come, unless the answer goes
/// on (a gateway that puts `stop` on every chunk); the usage chunk is told
/// apart by its empty `choices`.
#[test]
fn a_finish_reason_ends_the_answer_unless_it_goes_on() {
    let stop = |text: &str| {
        chunk(json!({"choices": [
            {"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}))
    };
    let mut assembler = Assembler::default();
    assembler.apply_chunk(stop("one")).unwrap();
    assert!(assembler.only_the_end_to_come());
    // an empty delta after it is not more answer
    assembler.apply_chunk(stop("")).unwrap();
    assert!(assembler.only_the_end_to_come());
    assembler.apply_chunk(stop(" two")).unwrap();
    assert!(assembler.has_finished() && !assembler.only_the_end_to_come());

    let usage = json!({"prompt_tokens": 1, "completion_tokens": 2});
    assert!(chunk(json!({"choices": [], "usage": usage})).is_usage_only());
    assert!(chunk(json!({"usage": usage})).is_usage_only());
    assert!(
        !chunk(json!({"choices": [{"index": 0, "delta": {}}], "usage": usage})).is_usage_only()
    );
    assert!(!chunk(json!({"choices": [], "usage": null})).is_usage_only());
}

/// Applies `chunks` to a fresh assembler and assembles the response.
fn assemble(chunks: Vec<Value>) -> Result<ModelResponse, ModelError> {
    let mut assembler = Assembler::default();
    for value in chunks {
        assembler.apply_chunk(chunk(value)).unwrap();
    }
    assembler.into_response()
}

fn calls_of(response: Result<ModelResponse, ModelError>) -> Vec<(String, String, String)> {
    response
        .unwrap()
        .tool_calls
        .into_iter()
        .map(|c| (c.id, c.name, c.arguments))
        .collect()
}

fn triple(id: &str, name: &str, arguments: &str) -> (String, String, String) {
    (id.to_owned(), name.to_owned(), arguments.to_owned())
}

/// Regression: a call at the largest index a server can send, then a
/// piece of another call without an index, overflowed the key of the call
/// after it (a panic in a debug build, the new call put first in release).
#[test]
fn a_call_after_the_largest_index_comes_after_it() {
    let piece = |part: Value| json!({"choices": [{"index": 0, "delta": {"tool_calls": [part]}}]});
    let response = assemble(vec![
        piece(json!({"index": u32::MAX, "id": "a", "type": "function",
            "function": {"name": "Read", "arguments": "{}"}})),
        piece(json!({"id": "b", "type": "function",
            "function": {"name": "Write", "arguments": "{}"}})),
    ]);
    assert_eq!(
        calls_of(response),
        vec![triple("a", "Read", "{}"), triple("b", "Write", "{}")]
    );
}

/// Regression: two calls streamed without `index`, each in its own
/// chunks with its own id, became one call (the second id replaced the
/// first, the arguments ran together).
#[test]
fn calls_without_index_are_told_apart_by_their_ids() {
    let piece = |part: Value| json!({"choices": [{"index": 0, "delta": {"tool_calls": [part]}}]});
    let response = assemble(vec![
        piece(json!({"id": "a", "type": "function",
            "function": {"name": "Read", "arguments": "{\"path\":"}})),
        piece(json!({"function": {"arguments": "\"x\"}"}})),
        piece(json!({"id": "b", "type": "function",
            "function": {"name": "Read", "arguments": "{\"path\":"}})),
        piece(json!({"function": {"arguments": "\"y\"}"}})),
        // a server repeating the id of the first call with a late piece
        piece(json!({"id": "a", "function": {"arguments": ""}})),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    assert_eq!(
        calls_of(response),
        vec![
            triple("a", "Read", r#"{"path":"x"}"#),
            triple("b", "Read", r#"{"path":"y"}"#),
        ]
    );
}

#[test]
fn calls_without_index_or_id_stay_apart() {
    // whole calls in one chunk, then another whole call in the next
    let response = assemble(vec![
        json!({"choices": [{"delta": {"tool_calls": [
            {"function": {"name": "One", "arguments": "{}"}},
            {"function": {"name": "Two", "arguments": "{\"n\":2}"}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [
            {"function": {"name": "Three", "arguments": "{}"}}]}}]}),
    ])
    .unwrap();
    let names: Vec<&str> = response
        .tool_calls
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, vec!["One", "Two", "Three"]);
    assert_eq!(response.tool_calls[1].arguments, r#"{"n":2}"#);
}

/// Regression: a name split over deltas kept only its last piece.
#[test]
fn a_name_split_over_deltas_is_joined_and_a_repeated_one_kept_once() {
    let piece = |part: Value| json!({"choices": [{"index": 0, "delta": {"tool_calls": [part]}}]});
    let split = assemble(vec![
        piece(json!({"index": 0, "id": "s", "function": {"name": "Send"}})),
        piece(json!({"index": 0, "function": {"name": "Message", "arguments": "{}"}})),
    ]);
    assert_eq!(calls_of(split), vec![triple("s", "SendMessage", "{}")]);
    let repeated = assemble(vec![
        piece(json!({"index": 0, "id": "p", "function": {"name": "Ping", "arguments": "{"}})),
        piece(json!({"index": 0, "id": "p", "function": {"name": "Ping", "arguments": "}"}})),
    ]);
    assert_eq!(calls_of(repeated), vec![triple("p", "Ping", "{}")]);
    // the name's second piece after the first arguments (QA: two calls,
    // `SendMess` and `age`, each "no such tool")
    let between = assemble(vec![
        piece(
            json!({"index": 0, "id": "b", "function": {"name": "SendMess", "arguments": "{\"tex"}}),
        ),
        piece(json!({"index": 0, "function": {"name": "age", "arguments": "t\": \"hi\"}"}})),
    ]);
    assert_eq!(
        calls_of(between),
        vec![triple("b", "SendMessage", r#"{"text": "hi"}"#)]
    );
    // another name once the arguments are whole is another call
    let two = assemble(vec![
        piece(json!({"index": 0, "id": "t", "function": {"name": "One", "arguments": "{}"}})),
        piece(json!({"index": 0, "function": {"name": "Two", "arguments": "{}"}})),
    ]);
    assert_eq!(
        calls_of(two)
            .into_iter()
            .map(|(_, name, _)| name)
            .collect::<Vec<_>>(),
        vec!["One".to_owned(), "Two".to_owned()]
    );
}

/// Regression: a `refusal` was dropped, and the turn ended as if the model
/// had said nothing.
#[test]
fn a_refusal_is_an_error_carrying_its_words() {
    let refused = |text: &str| ModelError::Refused {
        refusal: text.to_owned(),
        usage: None,
    };
    let streamed = assemble(vec![
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null,
            "refusal": ""}}]}),
        json!({"choices": [{"index": 0, "delta": {"refusal": "I can't "}}]}),
        json!({"choices": [{"index": 0, "delta": {"refusal": "help with that."}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]);
    assert_eq!(streamed, Err(refused("I can't help with that.")));

    let completion: Completion = serde_json::from_value(json!({
        "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": null, "refusal": "No."}}]
    }))
    .unwrap();
    let mut assembler = Assembler::default();
    assert_eq!(assembler.apply_completion(completion), Ok(None));
    assert_eq!(assembler.into_response(), Err(refused("No.")));

    // a null or empty refusal is no refusal
    let answered = assemble(vec![json!({"choices": [{"index": 0,
        "delta": {"content": "hi", "refusal": null}, "finish_reason": "stop"}]})]);
    assert_eq!(answered.unwrap().text, "hi");
}

#[test]
fn a_content_filter_stop_is_an_error() {
    let filtered = assemble(vec![json!({"choices": [{"index": 0,
        "delta": {"content": "partial"}, "finish_reason": "content_filter"}]})]);
    assert_eq!(filtered, Err(ModelError::ContentFiltered { usage: None }));
}

#[test]
fn a_cut_off_answer_keeps_its_calls_and_says_length() {
    let response = assemble(vec![
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "c", "function": {"name": "Write", "arguments": "{\"text\": \"lo"}}
    ]}, "finish_reason": "length"}]}),
    ])
    .unwrap();
    assert_eq!(response.finish, FinishReason::Length);
    assert_eq!(
        calls_of(Ok(response)),
        vec![triple("c", "Write", r#"{"text": "lo"#)]
    );
}

#[test]
fn an_error_chunk_reports_the_provider_message() {
    let mut assembler = Assembler::default();
    let result = assembler.apply_chunk(chunk(
        json!({"error": {"message": "upstream overloaded", "code": 502}}),
    ));
    let error = result.unwrap_err();
    assert_eq!(
        error,
        json!({"message": "upstream overloaded", "code": 502})
    );
    assert_eq!(super::error_message(&error), "upstream overloaded");
}

#[test]
fn decodes_a_whole_completion() {
    let completion: Completion = serde_json::from_value(json!({
        "id": "x", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "Send", "arguments": {"text": "hi"}}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2}
    }))
    .unwrap();
    let mut assembler = Assembler::default();
    assert_eq!(assembler.apply_completion(completion), Ok(None));
    assert_eq!(
        assembler.into_response().unwrap(),
        ModelResponse {
            reasoning: None,
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "c".to_owned(),
                name: "Send".to_owned(),
                arguments: r#"{"text":"hi"}"#.to_owned(),
            }],
            finish: FinishReason::ToolCalls,
            usage: Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
                cached_prompt_tokens: 0,
            }),
        }
    );
}

/// Regression: `"usage": {}` (or null counts) read as 0 tokens, so the
/// engine did not count them itself and a daily token budget was never
/// spent.
#[test]
fn a_usage_without_token_counts_is_no_usage() {
    for usage in [
        json!({}),
        json!({"prompt_tokens": null, "completion_tokens": null}),
        json!({"prompt_tokens": 7}),
        json!({"completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 1}}),
    ] {
        let completion: Completion = serde_json::from_value(json!({
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "hi"}}],
            "usage": usage,
        }))
        .unwrap();
        let mut assembler = Assembler::default();
        assembler.apply_completion(completion).unwrap();
        assert_eq!(assembler.into_response().unwrap().usage, None, "{usage}");

        let mut assembler = Assembler::default();
        assembler
            .apply_chunk(chunk(json!({"choices": [], "usage": usage})))
            .unwrap();
        assert_eq!(assembler.into_response().unwrap().usage, None, "{usage}");
    }
    // a chunk with empty usage after one with counts keeps the counts
    let mut assembler = Assembler::default();
    for value in [
        json!({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 1}}),
        json!({"choices": [], "usage": {}}),
    ] {
        assembler.apply_chunk(chunk(value)).unwrap();
    }
    assert_eq!(
        assembler.into_response().unwrap().usage,
        Some(Usage {
            prompt_tokens: 4,
            completion_tokens: 1,
            cached_prompt_tokens: 0,
        })
    );
}

/// A whole completion as the assembler reads it.
fn completion(value: Value) -> Completion {
    serde_json::from_value(value).unwrap()
}

/// Regression: two calls of a whole completion sharing an id were placed
/// by that id, as stream pieces are, and ran together into one call
/// (`SendMessage` with arguments `{"text":"first"}{"text":"second"}`).
/// Each element is its own call; the engine renames the repeated id.
#[test]
fn calls_of_a_whole_completion_sharing_an_id_stay_apart() {
    let call = |name: &str, text: &str| {
        json!({"id": "same", "type": "function",
            "function": {"name": name, "arguments": json!({"text": text}).to_string()}})
    };
    for (second, expected) in [("SendMessage", "SendMessage"), ("Read", "Read")] {
        let mut assembler = Assembler::default();
        assembler
            .apply_completion(completion(json!({"choices": [{"index": 0,
                "finish_reason": "tool_calls", "message": {"role": "assistant",
                "tool_calls": [call("SendMessage", "first"), call(second, "second")]}}]})))
            .unwrap();
        assert_eq!(
            calls_of(assembler.into_response()),
            vec![
                triple("same", "SendMessage", r#"{"text":"first"}"#),
                triple("same", expected, r#"{"text":"second"}"#),
            ]
        );
    }
    // elements with an index of their own (or the same one) are apart too
    let mut assembler = Assembler::default();
    assembler
        .apply_completion(completion(json!({"choices": [{"message": {"tool_calls": [
            {"index": 0, "function": {"name": "One", "arguments": "{}"}},
            {"index": 0, "function": {"name": "Two", "arguments": "{}"}}]}}]})))
        .unwrap();
    let names: Vec<String> = calls_of(assembler.into_response())
        .into_iter()
        .map(|(_, name, _)| name)
        .collect();
    assert_eq!(names, ["One", "Two"]);
}

/// Regression: a lone surrogate escaped inside a call's arguments (JSON
/// text in a JSON string) left them invalid JSON ("unexpected end of hex
/// escape"), streamed or not; it is U+FFFD, while a pair whose halves
/// came in two pieces is whole.
#[test]
fn a_lone_surrogate_escaped_in_arguments_becomes_a_replacement_character() {
    let piece = |index: u32, arguments: &str| {
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index,
            "id": format!("c{index}"), "function": {"name": "Send", "arguments": arguments}}]}}]})
    };
    let streamed = assemble(vec![
        piece(0, r#"{"text":"a \ud8"#),
        piece(0, r#"00 b"}"#),
        piece(1, r#"{"text":"\ud83d"#),
        piece(1, r#"\ude00"}"#),
    ]);
    let mut assembler = Assembler::default();
    assembler
        .apply_completion(completion(json!({"choices": [{"message": {"tool_calls": [
            {"id": "c0", "function": {"name": "Send", "arguments": r#"{"text":"a \ud800 b"}"#}},
            {"id": "c1", "function": {"name": "Send", "arguments": r#"{"text":"\ud83d\ude00"}"#}},
        ]}}]})))
        .unwrap();
    for response in [streamed, assembler.into_response()] {
        let texts: Vec<Value> = calls_of(response)
            .into_iter()
            .map(|(_, _, arguments)| {
                serde_json::from_str::<Value>(&arguments).unwrap()["text"].clone()
            })
            .collect();
        assert_eq!(texts, [json!("a \u{FFFD} b"), json!("😀")]);
    }
}

/// Regression: a lone surrogate in a whole completion's text failed the
/// turn ("response is not a chat completion"); marked as a stream event's
/// is, it becomes U+FFFD, in the text and in a call's name alike.
#[test]
fn a_lone_surrogate_in_a_whole_completion_becomes_a_replacement_character() {
    let body = br#"{"choices":[{"index":0,"finish_reason":"tool_calls","message":{
        "content":"note \ud800 x","tool_calls":[{"id":"c","function":{
        "name":"Send\udc00","arguments":{"text":"y \ud83d"}}}]}}]}"#;
    let marked = super::surrogates::mark_lone(body);
    let mut assembler = Assembler::default();
    let text = assembler
        .apply_completion(serde_json::from_slice(&marked).unwrap())
        .unwrap();
    assert!(text.is_some());
    let response = assembler.into_response().unwrap();
    assert_eq!(response.text, "note \u{FFFD} x");
    assert_eq!(
        calls_of(Ok(response)),
        vec![triple("c", "Send\u{FFFD}", "{\"text\":\"y \u{FFFD}\"}")]
    );
}

/// What a streamed answer made besides its text is handed on once, as
/// the answer keeps it: one of `reasoning_content` and `reasoning` (a
/// server may send both; both were counted), a call's name and arguments
/// without a repeated whole call, and nothing for a whole answer.
#[test]
fn unshown_pieces_are_what_the_answer_keeps() {
    let mut a = Assembler::default();
    let chunk = |v: Value| serde_json::from_value::<StreamChunk>(v).unwrap();
    a.apply_chunk(chunk(json!({"choices": [{"index": 0, "delta": {
        "reasoning_content": "think", "reasoning": "think"}}]})))
        .unwrap();
    assert_eq!(a.take_unshown(), "think");
    let call = json!({"index": 0, "id": "c", "function": {"name": "Send", "arguments": "{}"}});
    for _ in 0..2 {
        a.apply_chunk(chunk(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}),
        ))
        .unwrap();
    }
    assert_eq!(a.take_unshown(), "Send{}");
    let mut whole = Assembler::default();
    let completion: Completion = serde_json::from_value(json!({
        "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": "hi", "reasoning_content": "long thought"}}]
    }))
    .unwrap();
    whole.apply_completion(completion).unwrap();
    assert_eq!(whole.take_unshown(), "");
}

/// Pieces without `index` whose id comes late, on a piece that goes on
/// with the first one's arguments: one call, its id the late one (it was
/// taken for a new call, splitting one SendMessage into a broken call and
/// a nameless one; audit, 2026-12-07). A new id on a piece that names a
/// function is still a new call.
#[test]
fn a_late_id_without_an_index_joins_the_call_it_goes_on_with() {
    let piece = |call: Value| json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]});
    let calls = calls_of(assemble(vec![
        piece(json!({"function": {"name": "SendMessage", "arguments": "{\"text\": \"late"}})),
        piece(json!({"id": "call_late", "function": {"arguments": " id reply\"}"}})),
        piece(json!({"id": "call_2", "function": {"name": "Read", "arguments": "{}"}})),
    ]));
    assert_eq!(
        calls,
        vec![
            (
                "call_late".to_owned(),
                "SendMessage".to_owned(),
                r#"{"text": "late id reply"}"#.to_owned()
            ),
            ("call_2".to_owned(), "Read".to_owned(), "{}".to_owned()),
        ]
    );
}

use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::super::super::ChatMessage;
use super::super::super::ModelRequest;
use super::super::super::Purpose;
use super::super::super::ToolCall;
use super::super::super::ToolSpec;
use super::Fields;
use super::MaxTokensField;
use super::encode_request;

fn request() -> ModelRequest {
    ModelRequest {
        purpose: Purpose::Turn,
        bot: "ada".to_owned(),
        messages: vec![
            ChatMessage::System {
                content: "be brief".to_owned(),
            },
            ChatMessage::User {
                content: "weather?".to_owned(),
            },
            ChatMessage::Assistant {
                reasoning: None,
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call_1".to_owned(),
                    name: "Weather".to_owned(),
                    arguments: r#"{"city":"Oslo"}"#.to_owned(),
                }],
            },
            ChatMessage::Tool {
                tool_call_id: "call_1".to_owned(),
                content: "rain".to_owned(),
            },
            ChatMessage::Assistant {
                reasoning: None,
                content: "It rains.".to_owned(),
                tool_calls: Vec::new(),
            },
        ],
        tools: vec![std::sync::Arc::new(ToolSpec {
            name: "Weather".to_owned(),
            description: "Forecast".to_owned(),
            parameters: json!({"type": "object"}),
        })],
        max_tokens: Some(100),
    }
}

/// The encoding's fields, no reasoning filled.
fn fields(
    stream: bool,
    stream_usage: bool,
    temperature: Option<f32>,
    max_tokens_field: MaxTokensField,
) -> Fields {
    Fields {
        stream,
        stream_usage,
        temperature,
        max_tokens_field,
        fill_reasoning: false,
    }
}

#[test]
fn encodes_the_chat_completions_shape() {
    let body: Value = serde_json::from_slice(
        &encode_request(
            "m",
            &request(),
            &fields(true, true, Some(0.5), MaxTokensField::MaxTokens),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        body,
        json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "Weather", "arguments": "{\"city\":\"Oslo\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
                {"role": "assistant", "content": "It rains."}
            ],
            "tools": [{"type": "function", "function":
                {"name": "Weather", "description": "Forecast", "parameters": {"type": "object"}}}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 100,
            "temperature": 0.5
        })
    );
}

/// `stream_usage = false` (for servers that refuse `stream_options`):
/// the request still streams, without asking for the usage chunk.
#[test]
fn a_stream_without_usage_sends_no_stream_options() {
    let request = ModelRequest {
        messages: vec![ChatMessage::User {
            content: "hi".to_owned(),
        }],
        ..ModelRequest::default()
    };
    let body = String::from_utf8(
        encode_request(
            "m",
            &request,
            &fields(true, false, None, MaxTokensField::MaxTokens),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        body,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#
    );
}

#[test]
fn omits_empty_tools_and_unset_options() {
    let request = ModelRequest {
        messages: vec![ChatMessage::User {
            content: "hi".to_owned(),
        }],
        ..ModelRequest::default()
    };
    let body = String::from_utf8(
        encode_request(
            "m",
            &request,
            &fields(false, true, None, MaxTokensField::MaxTokens),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        body,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false}"#
    );
}

/// The `function.<field>` of each of `calls`, as an earlier assistant
/// message's calls are sent back in a request.
fn sent_back(calls: Vec<ToolCall>, field: &str) -> Vec<String> {
    let request = ModelRequest {
        messages: vec![ChatMessage::Assistant {
            reasoning: None,
            content: String::new(),
            tool_calls: calls,
        }],
        ..ModelRequest::default()
    };
    let body: Value = serde_json::from_slice(
        &encode_request(
            "m",
            &request,
            &fields(false, true, None, MaxTokensField::MaxTokens),
        )
        .unwrap(),
    )
    .unwrap();
    body["messages"][0]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["function"][field].as_str().unwrap().to_owned())
        .collect()
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    }
}

#[test]
fn arguments_that_are_not_a_json_object_are_sent_back_as_empty() {
    let sent = sent_back(
        vec![
            call("a", "Send", r#"{"text": "cut off"#),
            call("b", "Send", ""),
            call("c", "Send", "[1, 2]"),
            call("d", "Send", r#" {"text": "whole", "n": {"deep": [1]}} "#),
        ],
        "arguments",
    );
    assert_eq!(
        sent,
        vec![
            "{}",
            "{}",
            "{}",
            r#" {"text": "whole", "n": {"deep": [1]}} "#
        ]
    );
}

/// Names outside OpenAI's pattern go back made to fit it (QA: a model's
/// `functions.SendMessage` had OpenAI refuse every later request of the
/// session); names that fit go back as written.
#[test]
fn names_openai_refuses_are_sent_back_made_to_fit() {
    let long = "a".repeat(70);
    let names = [
        "Send_Message-2",
        "functions.SendMessage",
        "Send Message\n",
        "发消息",
        &long,
        "",
    ];
    let calls = names
        .iter()
        .enumerate()
        .map(|(i, name)| call(&format!("id-{i}"), name, "{}"))
        .collect();
    assert_eq!(
        sent_back(calls, "name"),
        vec![
            "Send_Message-2",
            "functions_SendMessage",
            "Send_Message_",
            "___",
            &long[..64],
            "missing_function_name",
        ]
    );
}

/// Ids no server should be sent go back as a stable `call_<hash>`, the
/// same in the assistant message and in the tool message answering it
/// (QA: a 100,000-character id, or one with a newline, NUL or U+202E, went
/// back as written); ids that fit go back as written.
#[test]
fn tool_call_ids_no_server_should_be_sent_go_back_hashed_alike() {
    let long = "x".repeat(100_000);
    let ids = [
        "call_abc",
        "functions.Read:0",
        &long,
        "a\nb",
        "a\0b",
        "a\u{202E}b",
        "",
    ];
    let mut messages = vec![ChatMessage::Assistant {
        reasoning: None,
        content: String::new(),
        tool_calls: ids.iter().map(|id| call(id, "Read", "{}")).collect(),
    }];
    messages.extend(ids.iter().map(|id| ChatMessage::Tool {
        tool_call_id: (*id).to_owned(),
        content: "ok".into(),
    }));
    let request = ModelRequest {
        messages,
        ..ModelRequest::default()
    };
    let body: Value = serde_json::from_slice(
        &encode_request(
            "m",
            &request,
            &fields(false, true, None, MaxTokensField::MaxTokens),
        )
        .unwrap(),
    )
    .unwrap();
    let sent: Vec<&str> = body["messages"][0]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    let answered: Vec<&str> = body["messages"].as_array().unwrap()[1..]
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(sent, answered);
    assert_eq!(&sent[..2], &["call_abc", "functions.Read:0"]);
    for id in &sent[2..] {
        assert!(
            id.len() == 21
                && id.starts_with("call_")
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{id}"
        );
    }
    let distinct: std::collections::HashSet<&&str> = sent.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "{sent:?}");
}

/// Regression: an assistant message's reasoning was never sent back, and
/// thinking-mode servers (DeepSeek, Kimi) refused the turn's second step
/// ("The reasoning_content in the thinking mode must be passed back").
#[test]
fn reasoning_goes_back_as_reasoning_content() {
    let request = ModelRequest {
        messages: vec![
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c1".to_owned(),
                    name: "Read".to_owned(),
                    arguments: "{}".to_owned(),
                }],
                reasoning: Some("I should read it.".to_owned()),
            },
            ChatMessage::Assistant {
                content: "done".to_owned(),
                tool_calls: Vec::new(),
                reasoning: None,
            },
            // an empty one, as the model sent it (QA, 2026-12-05)
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c2".to_owned(),
                    name: "Read".to_owned(),
                    arguments: "{}".to_owned(),
                }],
                reasoning: Some(String::new()),
            },
        ],
        ..ModelRequest::default()
    };
    let body: Value = serde_json::from_slice(
        &encode_request(
            "m",
            &request,
            &fields(false, true, None, MaxTokensField::MaxTokens),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        body["messages"][0]["reasoning_content"],
        "I should read it."
    );
    assert!(body["messages"][1].get("reasoning_content").is_none());
    assert_eq!(body["messages"][2]["reasoning_content"], "");
    // filled (a thinking-mode server refused calls without it): calls
    // stored with none go with an empty one; text alone still goes without
    let mut request = request;
    if let ChatMessage::Assistant { reasoning, .. } = &mut request.messages[2] {
        *reasoning = None;
    }
    let filled = Fields {
        fill_reasoning: true,
        ..fields(false, true, None, MaxTokensField::MaxTokens)
    };
    let body: Value =
        serde_json::from_slice(&encode_request("m", &request, &filled).unwrap()).unwrap();
    assert_eq!(
        body["messages"][0]["reasoning_content"],
        "I should read it."
    );
    assert!(body["messages"][1].get("reasoning_content").is_none());
    assert_eq!(body["messages"][2]["reasoning_content"], "");
}

/// Regression: compaction and extraction sent `max_tokens`, which
/// OpenAI's reasoning models refuse (`unsupported_parameter`).
#[test]
fn the_token_limit_goes_under_the_chosen_field() {
    let request = ModelRequest {
        max_tokens: Some(700),
        ..ModelRequest::default()
    };
    for (field, name, other) in [
        (
            MaxTokensField::MaxTokens,
            "max_tokens",
            "max_completion_tokens",
        ),
        (
            MaxTokensField::MaxCompletionTokens,
            "max_completion_tokens",
            "max_tokens",
        ),
    ] {
        let body: Value = serde_json::from_slice(
            &encode_request("m", &request, &fields(false, true, None, field)).unwrap(),
        )
        .unwrap();
        assert_eq!(body[name], 700, "{name}");
        assert!(body.get(other).is_none(), "{other} sent with {name}");
    }
    assert_eq!(
        MaxTokensField::parse("max_completion_tokens"),
        Ok(MaxTokensField::MaxCompletionTokens)
    );
    let error = MaxTokensField::parse("max_output_tokens").unwrap_err();
    assert!(error.contains("\"max_output_tokens\"") && error.contains("max_completion_tokens"));
}

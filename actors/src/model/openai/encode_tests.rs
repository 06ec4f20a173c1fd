use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::super::super::ChatMessage;
use super::super::super::ModelRequest;
use super::super::super::Purpose;
use super::super::super::ToolCall;
use super::super::super::ToolSpec;
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
                reasoning: String::new(),
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
                reasoning: String::new(),
                content: "It rains.".to_owned(),
                tool_calls: Vec::new(),
            },
        ],
        tools: vec![ToolSpec {
            name: "Weather".to_owned(),
            description: "Forecast".to_owned(),
            parameters: json!({"type": "object"}),
        }],
        max_tokens: Some(100),
    }
}

#[test]
fn encodes_the_chat_completions_shape() {
    let body: Value = serde_json::from_slice(
        &encode_request(
            "m",
            &request(),
            true,
            true,
            Some(0.5),
            MaxTokensField::MaxTokens,
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
        encode_request("m", &request, true, false, None, MaxTokensField::MaxTokens).unwrap(),
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
        encode_request("m", &request, false, true, None, MaxTokensField::MaxTokens).unwrap(),
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
            reasoning: String::new(),
            content: String::new(),
            tool_calls: calls,
        }],
        ..ModelRequest::default()
    };
    let body: Value = serde_json::from_slice(
        &encode_request("m", &request, false, true, None, MaxTokensField::MaxTokens).unwrap(),
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
                reasoning: "I should read it.".to_owned(),
            },
            ChatMessage::Assistant {
                content: "done".to_owned(),
                tool_calls: Vec::new(),
                reasoning: String::new(),
            },
        ],
        ..ModelRequest::default()
    };
    let body: Value = serde_json::from_slice(
        &encode_request("m", &request, false, true, None, MaxTokensField::MaxTokens).unwrap(),
    )
    .unwrap();
    assert_eq!(
        body["messages"][0]["reasoning_content"],
        "I should read it."
    );
    assert!(body["messages"][1].get("reasoning_content").is_none());
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
            &encode_request("m", &request, false, true, None, field).unwrap(),
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

use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::super::super::ChatMessage;
use super::super::super::ModelRequest;
use super::super::super::Purpose;
use super::super::super::ToolCall;
use super::super::super::ToolSpec;
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
    let body: Value =
        serde_json::from_slice(&encode_request("m", &request(), true, Some(0.5)).unwrap()).unwrap();
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

#[test]
fn omits_empty_tools_and_unset_options() {
    let request = ModelRequest {
        messages: vec![ChatMessage::User {
            content: "hi".to_owned(),
        }],
        ..ModelRequest::default()
    };
    let body = String::from_utf8(encode_request("m", &request, false, None).unwrap()).unwrap();
    assert_eq!(
        body,
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false}"#
    );
}

#[test]
fn arguments_that_are_not_a_json_object_are_sent_back_as_empty() {
    let call = |id: &str, arguments: &str| ToolCall {
        id: id.to_owned(),
        name: "Send".to_owned(),
        arguments: arguments.to_owned(),
    };
    let request = ModelRequest {
        messages: vec![ChatMessage::Assistant {
            content: String::new(),
            tool_calls: vec![
                call("a", r#"{"text": "cut off"#),
                call("b", ""),
                call("c", "[1, 2]"),
                call("d", r#" {"text": "whole", "n": {"deep": [1]}} "#),
            ],
        }],
        ..ModelRequest::default()
    };
    let body: Value =
        serde_json::from_slice(&encode_request("m", &request, false, None).unwrap()).unwrap();
    let sent: Vec<&str> = body["messages"][0]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["function"]["arguments"].as_str().unwrap())
        .collect();
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

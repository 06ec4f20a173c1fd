#![allow(clippy::unwrap_used, clippy::expect_used)]

use pretty_assertions::assert_eq;

use super::*;

const ECHO: &str = r#"
[[rule]]
name = "hello"
match = "(?i)^hello"
steps = [
  { tool = "SendMessage", args = { text = "Hi {{input}}!" } },
]

[[rule]]
purpose = "compact"
steps = [ { text = "summary" } ]

[[rule]]
name = "fallback"
steps = [
  { text = "thinking", calls = [ { tool = "Read", args = { path = "a.txt" } }, { tool = "Read", args = { path = "b.txt" } } ] },
  { tool = "SendMessage", args = { text = "got {{tool_result}}" } },
]
"#;

fn user(text: &str) -> ChatMessage {
    ChatMessage::User {
        content: text.into(),
    }
}

async fn ask(model: &ScriptedModel, messages: Vec<ChatMessage>) -> ModelResponse {
    let req = ModelRequest {
        bot: "r".into(),
        messages,
        ..Default::default()
    };
    model
        .complete(&req, &mut (), &CancellationToken::new())
        .await
        .unwrap()
}

#[tokio::test]
async fn picks_rules_and_steps() {
    let model = ScriptedModel::new(Script::parse(ECHO, "test").unwrap());
    let r = ask(&model, vec![user("hello there")]).await;
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].name, "SendMessage");
    assert_eq!(r.tool_calls[0].arguments, r#"{"text":"Hi hello there!"}"#);

    let first = ask(&model, vec![user("what")]).await;
    assert_eq!(first.text, "thinking");
    assert_eq!(first.tool_calls.len(), 2);
    let second = ask(
        &model,
        vec![
            user("what"),
            ChatMessage::Assistant {
                reasoning: None,
                content: first.text.clone(),
                tool_calls: first.tool_calls.clone(),
            },
            ChatMessage::Tool {
                tool_call_id: first.tool_calls[0].id.clone(),
                content: "A".into(),
            },
            ChatMessage::Tool {
                tool_call_id: first.tool_calls[1].id.clone(),
                content: "B".into(),
            },
        ],
    )
    .await;
    assert_eq!(second.tool_calls[0].arguments, r#"{"text":"got B"}"#);
    let mut history = vec![
        user("what"),
        ChatMessage::Assistant {
            reasoning: None,
            content: String::new(),
            tool_calls: vec![],
        },
        ChatMessage::Assistant {
            reasoning: None,
            content: String::new(),
            tool_calls: vec![],
        },
    ];
    let third = ask(&model, history.clone()).await;
    assert_eq!(third, ModelResponse::default());
    history.push(user("hello again"));
    assert_eq!(ask(&model, history).await.tool_calls.len(), 1);
}

#[tokio::test]
async fn repeat_streams_and_sink_can_abort() {
    let script = Script::parse(
        "[[rule]]\nsteps = [ { text = \"Same sentence. \", repeat = 500 } ]\n",
        "t",
    )
    .unwrap();
    let model = ScriptedModel::new(script);
    struct StopAfter(usize);
    impl StreamSink for StopAfter {
        fn on_text(&mut self, _d: &str) -> SinkControl {
            self.0 -= 1;
            if self.0 == 0 {
                SinkControl::Abort {
                    reason: "loop".into(),
                }
            } else {
                SinkControl::Continue
            }
        }

        fn on_restart(&mut self) {}
    }
    let req = ModelRequest {
        messages: vec![user("x")],
        ..Default::default()
    };
    let err = model
        .complete(&req, &mut StopAfter(10), &CancellationToken::new())
        .await
        .unwrap_err();
    match err {
        ModelError::Aborted { partial, .. } => assert_eq!(partial.len(), 150),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_scripts_are_explained() {
    let err = Script::parse("[[rule]]\nmatch = \"(\"\n", "s.toml").unwrap_err();
    assert!(err.to_string().contains("not a valid regex"), "{err}");
    let err = Script::parse("[[rule]]\nbogus = 1\n", "s.toml").unwrap_err();
    assert!(err.to_string().contains("bogus"), "{err}");
    let err = Script::parse("", "s.toml").unwrap_err();
    assert!(err.to_string().contains("no [[rule]]"), "{err}");
}

#[tokio::test]
async fn placeholders_in_the_input_are_echoed_verbatim() {
    let script = Script::parse(
        "[[rule]]\nsteps = [ { text = \"echo: {{input}}\", tool = \"SendMessage\", args = { text = \"{{input}} / {{bot}} {{step}} {{unknown}} {{\" } } ]\n",
        "t",
    )
    .unwrap();
    let model = ScriptedModel::new(script);
    let input = "template {{bot}} {{step}} {{tool_result}} {{input}}";
    let r = ask(&model, vec![user(input)]).await;
    assert_eq!(r.text, format!("echo: {input}"));
    let args: Value = serde_json::from_str(&r.tool_calls[0].arguments).unwrap();
    assert_eq!(args["text"], format!("{input} / r 0 {{{{unknown}}}} {{{{"));
}

#[test]
fn a_script_answers_only_the_purposes_it_has_rules_for() {
    let with = ScriptedModel::new(Script::parse(ECHO, "test").unwrap());
    assert!(with.answers(Purpose::Turn) && with.answers(Purpose::Compact));
    assert!(!with.answers(Purpose::Extract));
    let plain = "[[rule]]\nsteps = [ { text = \"hi\" } ]\n";
    let without = ScriptedModel::new(Script::parse(plain, "test").unwrap());
    assert!(without.answers(Purpose::Turn));
    assert!(!without.answers(Purpose::Compact));
}

/// The offline fleet's echo rule: `{{inputs}}` is what people said.
const INPUTS: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "You said: {{inputs}}" } } ]
"#;

fn said(r: &ModelResponse) -> String {
    let args: Value = serde_json::from_str(&r.tool_calls[0].arguments).unwrap();
    args["text"].as_str().unwrap().to_owned()
}

fn assistant_sent(id: &str) -> [ChatMessage; 2] {
    [
        ChatMessage::Assistant {
            reasoning: None,
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "SendMessage".into(),
                arguments: "{}".into(),
            }],
        },
        ChatMessage::Tool {
            tool_call_id: id.into(),
            content: "sent".into(),
        },
    ]
}

/// After a compaction the summary leads the context: it is the runtime's,
/// not something anyone said, so `{{inputs}}` leaves it out (it quoted the
/// whole summary back, until SendMessage refused the length).
#[tokio::test]
async fn inputs_leave_out_a_compaction_summary() {
    let model = ScriptedModel::new(Script::parse(INPUTS, "t").unwrap());
    let summary = prompts()
        .summary
        .render(&[
            ("text", "they said hello 14 times"),
            ("covers_to_seq", "40"),
            ("epoch", "2"),
        ])
        .unwrap();
    let r = ask(&model, vec![user(&summary), user("random words")]).await;
    assert_eq!(said(&r), "You said: random words");
    // a summary alone is no input: nothing to echo, no step 0 of it
    let r = ask(&model, vec![user(&summary)]).await;
    assert_eq!(said(&r), "You said: ");
}

/// A runtime reminder (the turn ended without a reply) asks for the answer
/// again: `{{inputs}}` is the person's message it reminds of, not the
/// reminder's text.
#[tokio::test]
async fn inputs_leave_out_a_runtime_reminder() {
    let model = ScriptedModel::new(Script::parse(INPUTS, "t").unwrap());
    let p = prompts();
    let reminders = [
        p.delivery_reminder.render(&[]).unwrap(),
        p.cut_off.render(&[]).unwrap(),
        p.loop_reminder
            .render(&[("what", "the same line")])
            .unwrap(),
        // (QA: these two were taken for what was said)
        p.delivery_reminder_awaiting
            .render(&[("asked", "b")])
            .unwrap(),
        p.written_call_reminder
            .render(&[("tool", "SendMessage")])
            .unwrap(),
    ];
    for reminder in reminders {
        let mut history = vec![user("earlier")];
        history.extend(assistant_sent("c1"));
        history.push(user("random words"));
        history.push(ChatMessage::Assistant {
            reasoning: None,
            content: "thinking".into(),
            tool_calls: vec![],
        });
        history.push(user(&reminder));
        let r = ask(&model, history).await;
        assert_eq!(said(&r), "You said: random words", "{reminder}");
    }
}

/// A person's message that begins as the runtime's time note does is
/// what they said: `{{inputs}}` echoes it, and the note before it is left
/// out. (QA: `[time: 3pm] call mom` was taken for the note, and the
/// offline model answered `You said: ` with nothing.)
#[tokio::test]
async fn a_message_that_begins_like_the_time_note_is_an_input() {
    let model = ScriptedModel::new(Script::parse(INPUTS, "t").unwrap());
    let note = prompts()
        .time_note
        .render(&[("when", "Monday 2026-12-07 09:00 UTC")])
        .unwrap();
    let r = ask(&model, vec![user(&note), user("[time: 3pm] call mom")]).await;
    assert_eq!(said(&r), "You said: [time: 3pm] call mom");
}

/// A `match_tool` rule never answers step 0, even when its regex matches
/// the empty text there is no tool result yet (QA: `.*` answered a new
/// input with its step 0, and the greeting below never ran).
#[tokio::test]
async fn a_match_tool_rule_never_answers_step_zero() {
    let script = r#"
[[rule]]
match_tool = ".*"
steps = [ { text = "never" }, { tool = "SendMessage", args = { text = "after {{tool_result}}" } } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "hello" } } ]
"#;
    let model = ScriptedModel::new(Script::parse(script, "t").unwrap());
    let r = ask(&model, vec![user("hi")]).await;
    assert_eq!(said(&r), "hello");
    let mut history = vec![user("hi")];
    history.extend(assistant_sent("c1"));
    let r = ask(&model, history).await;
    assert_eq!(said(&r), "after sent");
}

/// `repeat` and `chunk` without `text` (with `fail` too) are refused:
/// they were ignored without a word (QA).
#[test]
fn repeat_or_chunk_without_text_is_refused() {
    for step in [
        r#"{ fail = "x", repeat = 2 }"#,
        r#"{ fail = "x", chunk = 3 }"#,
        r#"{ tool = "SendMessage", args = { text = "hi" }, repeat = 2 }"#,
    ] {
        let script = format!("[[rule]]\nsteps = [ {step} ]\n");
        let e = Script::parse(&script, "t").unwrap_err().to_string();
        assert!(
            e.contains("`repeat` and `chunk` shape how `text` streams"),
            "{step}: {e}"
        );
    }
    // a slow failure is fine
    Script::parse(
        "[[rule]]\nsteps = [ { fail = \"x\", delay_ms = 5 } ]\n",
        "t",
    )
    .unwrap();
}

#![allow(clippy::unwrap_used)]

use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use serde_json::Value;
use serde_json::json;

use super::ReactToMessage;
use super::SendMessage;
use crate::tools::Tool;
use crate::tools::test_support::ToolFixture;

fn delivered_entry(effects: &[Mutation]) -> (botfleet_memory::EntryId, String) {
    let Some(Mutation::Append(entry)) = effects.first() else {
        panic!("a delivery appends its entry first: {effects:?}");
    };
    let EntryKind::Delivery { text, .. } = &entry.kind else {
        panic!("not a delivery: {:?}", entry.kind);
    };
    (entry.id, text.clone())
}

#[tokio::test]
async fn send_message_results_are_the_same_text_and_the_ids_stay_in_the_entries() {
    let f = ToolFixture::new();
    let first = SendMessage
        .call(&f.ctx("c1"), json!({"text": "one"}))
        .await
        .unwrap();
    let second = SendMessage
        .call(&f.ctx("c2"), json!({"text": "two"}))
        .await
        .unwrap();
    // no per-message id in what the model reads back: it would be resent
    // in every later prompt and defeat the cached token counts
    assert_eq!(first.content, "delivered");
    assert_eq!(second.content, first.content);
    assert!(first.delivered && second.delivered);
    let (id1, text1) = delivered_entry(&first.effects);
    let (id2, text2) = delivered_entry(&second.effects);
    assert_eq!((text1.as_str(), text2.as_str()), ("one", "two"));
    assert_ne!(id1, id2, "each delivery keeps its own stable id");
    // the id is derived from the turn and the call: a re-run gives the same
    let again = SendMessage
        .call(&f.ctx("c1"), json!({"text": "one"}))
        .await
        .unwrap();
    assert_eq!(delivered_entry(&again.effects).0, id1);
}

/// Regression (QA): a message of nothing but invisible characters was
/// delivered, a blank reply that met the turn's obligation; the API
/// refuses the same text from a person as empty.
#[tokio::test]
async fn a_message_that_shows_nothing_is_refused_as_empty() {
    let f = ToolFixture::new();
    for (call, text) in [
        ("c1", "\u{200b}"),
        ("c2", "\u{feff}\u{200b} \n"),
        ("c3", "\u{2060}"),
        ("c5", "\u{2800}\u{2800}"),
    ] {
        let err = SendMessage
            .call(&f.ctx(call), json!({"text": text}))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "error: the message text is empty (nothing but spaces or invisible characters such \
             as U+200B). Next step: call SendMessage with the text you want the person to read"
        );
    }
    // a visible character among them is a message
    let out = SendMessage
        .call(&f.ctx("c4"), json!({"text": "\u{200b}ok"}))
        .await
        .unwrap();
    assert!(out.delivered);
}

/// What SendMessage says about a card: the error's text, or "delivered".
async fn send_card(f: &ToolFixture, card: Value) -> String {
    match SendMessage
        .call(&f.ctx("c1"), json!({"text": "see the card", "card": card}))
        .await
    {
        Ok(out) => out.content,
        Err(e) => e.to_string(),
    }
}

/// A card is bounded per field and in total, its buttons' urls are web
/// addresses, and its shape is the one clients draw; each refusal names
/// the field and its limit. (A 3 MB title, a 100 KB label and a
/// `javascript:` url were delivered.)
#[tokio::test]
async fn a_card_is_bounded_and_its_urls_are_web_addresses() {
    let f = ToolFixture::new();
    let ok = json!({
        "title": "Deploy",
        "text": "Ready to ship.",
        "fields": [{"name": "branch", "value": "main"}, ["tests", 42]],
        "buttons": ["Yes", {"label": "Docs", "url": "https://example.org/docs"},
                    {"label": "Ask", "value": "please explain"}],
    });
    assert_eq!(send_card(&f, ok).await, "delivered");
    let secret = json!({"type": "secret_request", "name": "GITHUB_TOKEN", "description": "repo"});
    assert_eq!(send_card(&f, secret).await, "delivered");
    let fields = json!({"fields": {"a": 1, "b": [1, 2]}});
    assert_eq!(send_card(&f, fields).await, "delivered");

    let many: Vec<Value> = (0..11).map(|i| json!(format!("b{i}"))).collect();
    for (card, want) in [
        (
            json!({"title": "t".repeat(3_000_000)}),
            "`card.title` has 3000000 characters; the limit is 200",
        ),
        (
            json!({"buttons": [{"label": "l".repeat(100_000)}]}),
            "`card.buttons[0].label` has 100000 characters; the limit is 80",
        ),
        (
            json!({"buttons": [{"label": "Open", "url": "javascript:alert(1)"}]}),
            "`card.buttons[0].url` is \"javascript:alert(1)\"; a button opens only an http:// or https:// address",
        ),
        (
            json!({"buttons": ["ok", {"url": "/v1/secrets"}]}),
            "`card.buttons[1].url` is \"/v1/secrets\"",
        ),
        (
            json!({"buttons": many}),
            "`card.buttons` has 11 entries; the limit is 10",
        ),
        (
            json!({"fields": [{"name": "n", "value": "v".repeat(1_001)}]}),
            "`card.fields[0].value` has 1001 characters; the limit is 1000",
        ),
        (
            json!({"title": "t", "subtitle": "s", "image": "x"}),
            "card has fields that clients do not show: `image`, `subtitle`",
        ),
        (
            json!({"type": "poll"}),
            "`card.type` is \"poll\"; the only card type is \"secret_request\"",
        ),
        (
            json!({"type": "secret_request", "name": "PATH"}),
            "`card.name`: \"PATH\" is reserved",
        ),
        (json!("just text"), "`card` must be an object"),
    ] {
        let got = send_card(&f, card).await;
        assert!(got.contains(want), "want {want:?} in {got:?}");
        assert!(
            got.starts_with("error: SendMessage refused the card"),
            "{got}"
        );
    }
    // the whole card is bounded too
    let got = send_card(&f, json!({"fields": wide_fields()})).await;
    assert!(
        got.contains("characters of JSON; the limit is 8000"),
        "{got}"
    );
}

/// Twenty fields of 900 characters: each within its limit, together over
/// the card's.
fn wide_fields() -> Value {
    (0..20)
        .map(|i| (format!("f{i}"), json!("v".repeat(900))))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Appends entries of `kinds` to the fixture's session (seqs 1, 2, ...).
async fn append(f: &ToolFixture, kinds: Vec<EntryKind>) {
    let mut writes = vec![Mutation::EnsureSession(f.scope.session.clone())];
    for kind in kinds {
        writes.push(Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session: f.scope.session.id,
            author: "u".into(),
            turn: None,
            kind,
        })));
    }
    f.rt.store.write(writes).await.unwrap();
}

async fn react(f: &ToolFixture, seq: i64, emoji: &str) -> String {
    match ReactToMessage
        .call(&f.ctx("c1"), json!({"seq": seq, "emoji": emoji}))
        .await
    {
        Ok(out) => out.content,
        Err(e) => e.to_string(),
    }
}

/// A reaction goes on a message people see, never on the bot's internal
/// steps, and its emoji has no control, space or bidi character. (It
/// reacted to an `assistant` entry, and took "a\nb" and a lone U+202E.)
#[tokio::test]
async fn reactions_go_on_messages_people_see_with_a_plain_emoji() {
    let f = ToolFixture::new();
    append(
        &f,
        vec![
            EntryKind::UserMessage { text: "hi".into() },
            EntryKind::Assistant {
                reasoning: None,
                text: "thinking".into(),
                tool_calls: vec![],
            },
            EntryKind::Delivery {
                text: "hello".into(),
                card: None,
                call_id: "c0".into(),
            },
            EntryKind::Reminder {
                text: "deliver".into(),
            },
        ],
    )
    .await;
    assert_eq!(react(&f, 1, "👍").await, "reacted 👍 to message 1");
    assert_eq!(react(&f, 3, " 👍🏽 ").await, "reacted 👍🏽 to message 3");
    assert_eq!(react(&f, 1, "👨‍👩‍👧").await, "reacted 👨‍👩‍👧 to message 1");
    let got = react(&f, 2, "👍").await;
    assert!(
        got.contains("entry 2 is an assistant, which people do not see as a message"),
        "{got}"
    );
    let got = react(&f, 4, "👍").await;
    assert!(got.contains("entry 4 is a reminder"), "{got}");
    for (emoji, want) in [
        ("a\nb", "has a control or space character (U+000A)"),
        ("\u{202E}", "has a bidi control character (U+202E)"),
        ("👍 👍", "has a control or space character (U+0020)"),
        ("\u{1b}[31m", "has a control or space character (U+001B)"),
    ] {
        let got = react(&f, 1, emoji).await;
        assert!(got.contains(want), "{emoji:?}: {got}");
    }
}

/// Regression: the one-emoji check counted code points (1-8), so the
/// kiss 👩🏽‍❤️‍💋‍👨🏿 (one emoji, ten code points) was refused, and "abc",
/// "中文" or a lone U+200B were taken as one emoji. It is one grapheme
/// cluster that is an emoji now.
#[tokio::test]
async fn a_reaction_is_exactly_one_emoji_as_people_see_it() {
    let f = ToolFixture::new();
    append(&f, vec![EntryKind::UserMessage { text: "hi".into() }]).await;
    let kiss = "👩🏽\u{200d}❤\u{fe0f}\u{200d}💋\u{200d}👨🏿";
    for ok in [kiss, "🇫🇷", "1\u{fe0f}\u{20e3}", "❤\u{fe0f}", "👍🏽"] {
        assert_eq!(react(&f, 1, ok).await, format!("reacted {ok} to message 1"));
    }
    for (bad, want) in [
        ("abc", "is 3 symbols; the emoji must be exactly one"),
        ("中文", "is 2 symbols"),
        ("👍👍", "is 2 symbols"),
        ("\u{200b}", "is not an emoji"),
        ("a", "is not an emoji"),
        ("\u{1f1eb}", "is not an emoji"),
    ] {
        let got = react(&f, 1, bad).await;
        assert!(got.contains(want), "{bad:?}: {got}");
    }
    let long = format!("👍{}", "\u{fe0f}".repeat(20));
    let got = react(&f, 1, &long).await;
    assert!(
        got.contains("code points; an emoji has at most 16"),
        "{got}"
    );
}

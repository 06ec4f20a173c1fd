//! A bot asked by another that writes its answer as text, which reaches
//! nobody: its turn is reminded once to answer with SendToAgent; if it
//! still ends without a word, the asker is woken by an event saying no
//! answer is coming, and can tell its person. An answer is owed nothing
//! back (a thank-you too); a question handed on to a third bot is owed
//! when its answer comes back; at the hop budget's last hop the asker is
//! told without a reminder, or, when it asked from a conversation with a
//! bot (where all it could do is refused), the person who started the
//! chain. (QA: B's "B is 2" stayed its private note; R, which told the
//! person it would answer once the replies came, and the person waited
//! for good.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

use super::agents::ALL;
use super::moved_bot_agents::agent_session;

/// R asks A and B; A answers with SendToAgent, B writes "B is 2" as
/// text. `b_after_reminder` is B's rule for the reminder, if any.
fn script(b_after_reminder: &str) -> String {
    format!(
        r#"
[[rule]]
bot = "r"
match = "^ask"
steps = [
  {{ calls = [
      {{ tool = "SendToAgent", args = {{ agent = "a", text = "what is A?" }} }},
      {{ tool = "SendToAgent", args = {{ agent = "b", text = "what is B?" }} }},
      {{ tool = "SendMessage", args = {{ text = "I asked A and B; I will report back." }} }},
  ] }},
]

[[rule]]
bot = "r"
match = "without answering it"
steps = [ {{ tool = "SendMessage", args = {{ text = "NO ANSWER: {{{{inputs}}}}" }} }} ]

[[rule]]
bot = "r"
match = "Message from bot"
steps = [ {{ tool = "SendMessage", args = {{ text = "SUMMARY: {{{{inputs}}}}" }} }} ]

[[rule]]
bot = "a"
match = "what is A"
steps = [ {{ tool = "SendToAgent", args = {{ agent = "r", text = "A is 1" }} }} ]
{b_after_reminder}
[[rule]]
bot = "b"
match = "what is B"
steps = [ {{ text = "B is 2" }} ]
"#
    )
}

async fn start(script: &str) -> TestHost {
    TestFleet::new()
        .script("s", script)
        .bot("r", "s", ALL)
        .bot("a", "s", ALL)
        .bot("b", "s", ALL)
        .start()
        .await
}

/// R asks B alone and tells its person it will report back.
const R_ASKS_B: &str = r#"
[[rule]]
bot = "r"
match = "^ask"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "b", text = "what is B?" } },
  { tool = "SendMessage", args = { text = "I asked B; I will report back." } },
] } ]
"#;

/// B's conversation with R, on B's side.
fn b_with_r() -> String {
    agent_session("b", "r")
}

fn reminders(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e["kind"] == "reminder")
        .map(|e| e["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn a_bot_that_answered_in_text_is_reminded_and_its_answer_reaches_the_asker() {
    let host = start(&script(
        r#"
[[rule]]
bot = "b"
match = "waits for your answer"
steps = [ { tool = "SendToAgent", args = { agent = "r", text = "B is 2" } } ]
"#,
    ))
    .await;
    let (_, sent) = host.send("r", "ask A and B", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let es = host
        .wait_for(&session, |es| {
            let text = deliveries(es).join("\n");
            (text.contains("A is 1") && text.contains("B is 2")).then(|| json!(es))
        })
        .await;
    let es = es.as_array().unwrap();
    assert!(
        !deliveries(es).join("\n").contains("NO ANSWER"),
        "{:?}",
        deliveries(es)
    );
    let theirs = host.entries(&b_with_r()).await;
    let reminded = reminders(&theirs);
    assert_eq!(reminded.len(), 1, "{reminded:?}");
    assert!(reminded[0].contains("r wrote to you"), "{reminded:?}");
    // A's and B's answers are owed nothing back: R's turns over them were
    // not reminded to answer A or B
    assert!(
        reminders(es).iter().all(|r| !r.contains("wrote to you")),
        "{:?}",
        reminders(es)
    );
    let answers: Vec<&Value> = es.iter().filter(|e| e["kind"] == "agent_message").collect();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(answers.iter().all(|e| e["answers"] == true), "{answers:?}");
    // B's SendToAgent is told its answer is owed no reply (QA: it was told
    // one would arrive later, and a model waited for it); R's questions
    // are told the replies will come
    let result_of = |es: &[Value]| -> Vec<String> {
        es.iter()
            .filter(|e| e["kind"] == "tool_result" && e["name"] == "SendToAgent")
            .map(|e| e["content"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    let b_said = result_of(&theirs);
    assert_eq!(b_said.len(), 1, "{b_said:?}");
    assert!(
        b_said[0].contains("it answers that bot's message, so no reply is owed and none will come"),
        "{b_said:?}"
    );
    let r_said = result_of(es);
    assert_eq!(r_said.len(), 2, "{r_said:?}");
    assert!(
        r_said
            .iter()
            .all(|c| c.ends_with("its reply will arrive later as a new message")),
        "{r_said:?}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn the_asker_hears_when_a_bot_still_does_not_answer() {
    let host = start(&script("")).await;
    let (_, sent) = host.send("r", "ask A and B", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let es = host
        .wait_for(&session, |es| {
            let text = deliveries(es).join("\n");
            (text.contains("A is 1") && text.contains("NO ANSWER")).then(|| json!(es))
        })
        .await;
    let es = es.as_array().unwrap();
    // the event names who did not answer and what it was asked, in the
    // conversation R asked from, and wakes R there
    let events: Vec<&Value> = es
        .iter()
        .filter(|e| e["kind"] == "event" && e["origin"] == "bot_no_reply:b")
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0]["text"].as_str().unwrap().contains("what is B?"),
        "{events:?}"
    );
    let no_answer = deliveries(es)
        .into_iter()
        .find(|d| d.contains("NO ANSWER"))
        .unwrap();
    assert!(no_answer.contains("b ended its turn"), "{no_answer}");
    // B was reminded once, and its turn still ended completed
    let theirs = host.entries(&b_with_r()).await;
    assert_eq!(reminders(&theirs).len(), 1, "{:?}", reminders(&theirs));
    let end = theirs
        .iter()
        .rev()
        .find(|e| e["kind"] == "turn_end")
        .unwrap();
    assert_eq!(end["status"], "completed");
    host.shutdown().await;
}

/// Regression (review): B handed R's question on to Q and waited; Q's
/// answer woke B in its conversation with R, where B wrote its answer as
/// text: no reminder (none of its inputs was R's) and no word to R. The
/// question is still owed there.
#[tokio::test]
async fn a_question_handed_on_is_still_owed_when_the_answer_comes_back() {
    let script = format!(
        "{R_ASKS_B}{}",
        r#"
[[rule]]
bot = "r"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "SUMMARY: {{inputs}}" } } ]

[[rule]]
bot = "b"
match = "what is B"
steps = [ { tool = "SendToAgent", args = { agent = "q", text = "q, what is B really?" } } ]

[[rule]]
bot = "b"
match = "waits for your answer"
steps = [ { tool = "SendMessage", args = { text = "B is 2, says q" } } ]

[[rule]]
bot = "b"
match = "B is 2"
steps = [ { text = "B is 2, q says" } ]

[[rule]]
bot = "q"
match = "what is B really"
steps = [ { tool = "SendMessage", args = { text = "B is 2" } } ]
"#
    );
    let host = TestFleet::new()
        .script("s", &script)
        .bot("r", "s", ALL)
        .bot("b", "s", ALL)
        .bot("q", "s", ALL)
        .start()
        .await;
    let (_, sent) = host.send("r", "ask B", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    host.wait_for(&session, |es| {
        deliveries(es)
            .iter()
            .any(|d| d.contains("SUMMARY") && d.contains("B is 2, says q"))
            .then(|| json!(es))
    })
    .await;
    let theirs = host.entries(&b_with_r()).await;
    let reminded = reminders(&theirs);
    assert_eq!(reminded.len(), 1, "{reminded:?}");
    assert!(reminded[0].contains("r wrote to you"), "{reminded:?}");
    host.shutdown().await;
}

/// Regression (review): a reply to an answer was taken as a question:
/// R's "thanks!" for B's answer was owed a reply, B was reminded, and its
/// silence woke R with "no answer is coming", which R told the person
/// after they had their answer. A reply to an answer is owed nothing.
#[tokio::test]
async fn a_thank_you_for_an_answer_is_owed_nothing() {
    let script = format!(
        "{R_ASKS_B}{}",
        r#"
[[rule]]
bot = "r"
match = "without answering it"
steps = [ { tool = "SendMessage", args = { text = "NO ANSWER" } } ]

[[rule]]
bot = "r"
match = "B is 2"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "b", text = "thanks!" } },
  { tool = "SendMessage", args = { text = "SUMMARY: {{inputs}}" } },
] } ]

[[rule]]
bot = "b"
match = "what is B"
steps = [ { tool = "SendToAgent", args = { agent = "r", text = "B is 2" } } ]

[[rule]]
bot = "b"
match = "thanks"
steps = [ { text = "nothing to say" } ]
"#
    );
    let host = TestFleet::new()
        .script("s", &script)
        .bot("r", "s", ALL)
        .bot("b", "s", ALL)
        .start()
        .await;
    let (_, sent) = host.send("r", "ask B", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    // r thanked b as it told the person; then b's two turns end: over
    // the question, and over the thanks
    host.wait_for(&session, |es| {
        deliveries(es)
            .iter()
            .any(|d| d.contains("SUMMARY"))
            .then(|| json!(es))
    })
    .await;
    let theirs = host
        .wait_for(&b_with_r(), |es| {
            (es.iter().filter(|e| e["kind"] == "turn_end").count() == 2).then(|| json!(es))
        })
        .await;
    let theirs = theirs.as_array().unwrap();
    let thanks = theirs
        .iter()
        .find(|e| e["kind"] == "agent_message" && e["text"] == "thanks!")
        .unwrap();
    assert_eq!(thanks["answers"], true, "{thanks}");
    assert!(reminders(theirs).is_empty(), "{:?}", reminders(theirs));
    // an event to r would have been written with b's second turn's end
    let es = host.entries(&session).await;
    assert!(
        es.iter().all(|e| e["origin"] != "bot_no_reply:b"),
        "{es:#?}"
    );
    assert!(!deliveries(&es).join("\n").contains("NO ANSWER"));
    host.shutdown().await;
}

/// Regression (review): at the hop budget's last hop the asked bot cannot
/// answer (and is not reminded); its silence was told to nobody, and no
/// hop budget notice came either (none is written without a refused
/// send). The asker hears of it.
#[tokio::test]
async fn a_bot_that_cannot_answer_within_the_hop_budget_leaves_word_of_it() {
    let host = TestFleet::new()
        .script("s", &script(""))
        .bot("r", "s", ALL)
        .bot("a", "s", ALL)
        .bot("b", "s", ALL)
        .runtime("max_hops = 1")
        .start()
        .await;
    let (_, sent) = host.send("r", "ask A and B", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    let es = host
        .wait_for(&session, |es| {
            deliveries(es)
                .iter()
                .any(|d| d.contains("NO ANSWER"))
                .then(|| json!(es))
        })
        .await;
    let es = es.as_array().unwrap();
    assert!(
        es.iter().any(|e| e["origin"] == "bot_no_reply:b"),
        "{es:#?}"
    );
    // b was not reminded: it could not send one more
    assert!(reminders(&host.entries(&b_with_r()).await).is_empty());
    host.shutdown().await;
}

/// r, in alice's conversation, asks a, which hands the question on to b at
/// the hop budget's last hop (`max_hops = 2`); b's rule is `b_rule`.
async fn chain_to_the_last_hop(b_rule: &str) -> (TestHost, String) {
    let script = format!(
        r#"
[[rule]]
bot = "r"
match = "^ask"
steps = [ {{ calls = [
  {{ tool = "SendToAgent", args = {{ agent = "a", text = "ask b what B is" }} }},
  {{ tool = "SendMessage", args = {{ text = "I asked a; I will report back." }} }},
] }} ]

[[rule]]
bot = "a"
match = "ask b"
steps = [ {{ tool = "SendToAgent", args = {{ agent = "b", text = "what is B?" }} }} ]

[[rule]]
bot = "a"
steps = [ {{ tool = "SendMessage", args = {{ text = "A WOKEN: {{{{inputs}}}}" }} }} ]
{b_rule}
"#
    );
    let host = TestFleet::new()
        .script("s", &script)
        .bot("r", "s", ALL)
        .bot("a", "s", ALL)
        .bot("b", "s", ALL)
        .runtime("max_hops = 2\nextract_memory = false")
        .start()
        .await;
    let (status, sent) = host.send("r", "ask a", None).await;
    assert_eq!(status, 202, "{sent}");
    (host, sent["session"].as_str().unwrap().to_owned())
}

/// The `hop_budget` notices in alice's conversation with r, once b's turn
/// has ended and one is there.
async fn budget_notices(host: &TestHost, dm: &str) -> Vec<String> {
    host.wait_get("/v1/bots/b/turns", |v| {
        let turns = v["turns"].as_array()?;
        (turns.len() == 1 && turns[0]["status"] == "completed").then_some(json!(true))
    })
    .await;
    let es = host
        .wait_for(dm, |es| {
            es.iter()
                .any(|e| e["kind"] == "notice" && e["code"] == "hop_budget")
                .then(|| json!(es))
        })
        .await;
    es.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "notice" && e["code"] == "hop_budget")
        .map(|e| e["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// The events that would wake a in its conversation with r, where it
/// asked b: written with b's turn's end, so there once that turn ended.
async fn no_reply_events_for_a(host: &TestHost) -> Vec<Value> {
    host.entries(&agent_session("a", "r"))
        .await
        .into_iter()
        .filter(|e| e["origin"] == "bot_no_reply:b")
        .collect()
}

/// Regression (agent-load: every chain's bot before the last had its send
/// refused twice): at the hop budget's last hop, b ends without answering
/// a, which asked from its conversation with r, where every message it
/// sends is refused past the budget. a is not woken to no end; alice, whose
/// message started the chain, gets the hop budget's notice instead.
#[tokio::test]
async fn a_silence_at_the_last_hop_between_bots_is_told_to_the_person() {
    told_once_and_a_not_woken(r#"{ text = "B is 2" }"#, "b could not answer a").await;
}

/// The same when b tried to answer and was refused: the refusal's notice
/// is the one alice gets, and a is not woken either.
#[tokio::test]
async fn a_refused_answer_at_the_last_hop_is_told_to_the_person_once() {
    told_once_and_a_not_woken(
        r#"{ tool = "SendToAgent", args = { agent = "r", text = "B is 2" } }"#,
        "b could not send one more to r",
    )
    .await;
}

/// b, at the last hop of the chain, takes `b_step` over a's question:
/// alice gets one `hop_budget` notice, which says `told`, and nothing
/// wakes a, which could only have its own message refused.
async fn told_once_and_a_not_woken(b_step: &str, told: &str) {
    let (host, dm) = chain_to_the_last_hop(&format!(
        "\n[[rule]]\nbot = \"b\"\nmatch = \"what is B\"\nsteps = [ {b_step} ]\n"
    ))
    .await;
    let notices = budget_notices(&host, &dm).await;
    assert_eq!(notices.len(), 1, "{notices:#?}");
    assert!(notices[0].contains(told), "{}", notices[0]);
    assert_eq!(no_reply_events_for_a(&host).await, Vec::<Value>::new());
    host.shutdown().await;
}

//! `botfleet transcript`: what the text output shows of each entry kind;
//! and what every printer of the CLI makes of others' text (escape
//! sequences shown, never sent to the terminal).

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;

/// A compaction summary is part of what `--all` shows (it was printed only
/// with `--json`: the text output had no arm for it).
#[tokio::test]
async fn transcript_all_shows_compaction_summaries() {
    let script = r#"
[[rule]]
purpose = "compact"
steps = [ { text = "SUMMARY OF THE TALK" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"]);
    let path = fleet.write();
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "kind = \"scripted\"",
        "kind = \"scripted\"\ncompact_at_tokens = 1000\nbackground_compact_at_tokens = 1000",
    );
    std::fs::write(&path, text).unwrap();
    let host = crate::support::fleet::restart(fleet).await;
    let filler = "lorem ipsum dolor sit amet consectetur adipiscing elit ".repeat(12);
    let mut session = String::new();
    for i in 0..12 {
        let (_, sent) = host.send("r", &format!("note {i}: {filler}"), None).await;
        session = sent["session"].as_str().unwrap().to_owned();
        host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
            .await;
    }
    let summary = host
        .wait_for(&session, |es| {
            es.iter().find(|e| e["kind"] == "summary").cloned()
        })
        .await;
    let line = format!(
        "#{} (summary up to #{}) SUMMARY OF THE TALK",
        summary["seq"], summary["covers_to_seq"]
    );
    let (code, out, err) = cli(&["transcript", "r", "--all"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&line), "{line} not in:\n{out}");
    // without --all the internal steps, summaries included, stay out
    let (code, out, _) = cli(&["transcript", "r"], &host.url, TOKEN).await;
    assert_eq!(code, 0);
    assert!(!out.contains("SUMMARY OF THE TALK"), "{out}");
    host.shutdown().await;
}

/// What a person posts, and a bot echoes: an OSC 52 clipboard write, a
/// screen clear, a C1 CSI, a bidi override and DEL.
const EVIL: &str =
    "pineapple \u{1b}]52;c;aGk=\u{7}\u{1b}[2J\r\u{9b}31m \u{202e}txe.exe\u{7f} \u{2066}x";

/// Fails if `out` holds a character a terminal acts on (a C0 control but
/// newline and tab, DEL, a C1 control, a bidi embedding, override or
/// isolate).
fn assert_inert(what: &str, out: &str) {
    let bad: Vec<char> = out
        .chars()
        .filter(|&c| {
            matches!(c,
                '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
                | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(bad.is_empty(), "{what} printed {bad:?} raw:\n{out:?}");
}

/// Regression: the CLI printed others' text to the terminal as it was, so
/// a room member's message or a bot's echo of a webhook payload could
/// write the reader's clipboard (OSC 52) or clear the screen. Every text
/// output shows those characters as `\u{1b}`; `--json` escapes them as
/// JSON (`\u001b`, and `\u009b` for what serde leaves) and keeps the text.
#[tokio::test]
async fn others_text_reaches_the_terminal_escaped() {
    let script = r#"
[[rule]]
steps = [ { calls = [
  { tool = "Remember", args = { text = "{{input}}", layer = "log" } },
  { tool = "SendMessage", args = { text = "echo: {{input}}" } },
] } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "Remember"])
        .bot("q", "s", &["SendMessage", "Remember"])
        .start()
        .await;
    let shown = "pineapple \\u{1b}]52;c;aGk=\\u{7}\\u{1b}[2J\\u{d}\\u{9b}31m \\u{202e}txe.exe\\u{7f} \\u{2066}x";
    let run = async |args: &[&str]| {
        let (code, out, err) = cli(args, &host.url, TOKEN).await;
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_inert(&format!("{args:?} (stdout)"), &out);
        assert_inert(&format!("{args:?} (stderr)"), &err);
        out
    };
    let out = run(&["send", "r", EVIL]).await;
    assert_eq!(out.trim_end(), format!("echo: {shown}"));
    let out = run(&["transcript", "r", "--all"]).await;
    assert!(out.contains(&format!("alice: {shown}")), "{out}");
    // (memory keeps a carriage return as a space)
    let out = run(&["memory", "r"]).await;
    assert!(out.contains(&shown[..40]), "{out}");
    host.wait_get("/v1/search?q=pineapple", |v| {
        v["hits"]
            .as_array()
            .filter(|h| !h.is_empty())
            .cloned()
            .map(Value::from)
    })
    .await;
    let out = run(&["search", "pineapple"]).await;
    assert!(out.contains("\\u{1b}"), "{out}");

    run(&["group", "create", "room", "--members", "r,q"]).await;
    let out = run(&["group", "send", "room", EVIL]).await;
    // (a room input breaks the message's line at the carriage return and
    // indents the rest: no text starts a line of its own there; the reply
    // printed indents each line after its first again)
    let (before_cr, after_cr) = shown.split_once("\\u{d}").unwrap();
    assert!(
        out.starts_with("r-name (bot r) ▸ echo: ")
            && out.contains(&format!("alice (person): {before_cr}\n      {after_cr}")),
        "{out}"
    );
    let out = run(&["group", "transcript", "room"]).await;
    assert!(out.contains(&format!("alice: {shown}")), "{out}");

    // the host's error messages quote what they were given
    let (code, _, err) = cli(&["transcript", "\u{1b}[2Jx"], &host.url, TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert_inert("an error", &err);

    // JSON: escaped as JSON (`run` checked), the same text once parsed
    let sent = &EVIL[10..26];
    for args in [
        &["transcript", "r", "--json"][..],
        &["group", "transcript", "room", "--json"],
        &["memory", "r", "--json"],
        &["search", "pineapple", "--json"],
    ] {
        let out = run(args).await;
        assert!(out.contains("\\u001b]52"), "{args:?}: {out}");
        let holds = serde_json::Deserializer::from_str(&out)
            .into_iter::<Value>()
            .any(|v| holds(&v.unwrap(), sent));
        assert!(holds, "{args:?}: {out}");
    }
    let (code, out, err) = cli(&["send", "r", EVIL, "--json"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert_inert("send --json", &out);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["deliveries"][0]["text"], format!("echo: {EVIL}"));
    host.shutdown().await;
}

/// Whether a string in `v` contains `text`.
fn holds(v: &Value, text: &str) -> bool {
    match v {
        Value::String(s) => s.contains(text),
        Value::Array(items) => items.iter().any(|i| holds(i, text)),
        Value::Object(map) => map.values().any(|i| holds(i, text)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// Regression: a message written on Windows (`a\r\nb`) printed `a\u{d}`
/// at each line end. A CR LF pair prints as a plain line end; a lone CR
/// (it would overwrite the line) is still shown escaped.
#[tokio::test]
async fn windows_line_ends_print_as_line_ends() {
    let script = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (code, out, err) = cli(
        &["send", "r", "first line\r\nsecond line\r\nthird\rover"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_inert("send", &out);
    assert_eq!(
        out.trim_end(),
        "echo: first line\nsecond line\nthird\\u{d}over"
    );
    let (code, out, err) = cli(&["transcript", "r"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert_inert("transcript", &out);
    assert!(
        out.contains("alice: first line\n    second line\n    third\\u{d}over\n"),
        "{out}"
    );
    assert!(!out.contains("\\u{d}\n"), "{out}");
    host.shutdown().await;
}

/// `--last N` prints only the conversation's last N printed entries (H2 of round
/// 20: a 32,000-entry conversation was printed whole, 10,776 lines, with
/// no way to see only its end); N larger than the conversation prints it
/// all, and `0` prints nothing.
#[tokio::test]
async fn transcript_last_prints_only_the_end() {
    let script = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    for i in 0..5 {
        let (_, sent) = host.send("r", &format!("message {i}"), None).await;
        let session = sent["session"].as_str().unwrap().to_owned();
        host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
            .await;
    }
    let (code, whole, err) = cli(&["transcript", "r", "--all"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let whole: Vec<&str> = whole.lines().collect();
    // the last three entries, with the internal steps: the last turn's
    // delivery, its tool result and its turn end, or as the turn wrote them
    let (code, out, err) = cli(
        &["transcript", "r", "--all", "--last", "3"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let seqs = |lines: &[&str]| -> Vec<i64> {
        lines
            .iter()
            .filter_map(|l| l.strip_prefix('#')?.split(' ').next()?.parse().ok())
            .collect()
    };
    // the last three entries it prints (round 22: it counted entries
    // printed or not, and a turn ends with two it never prints): the
    // whole output's lines of its last three entries
    let last: Vec<&str> = out.lines().collect();
    let mut printed = seqs(&whole);
    printed.dedup();
    let from = printed[printed.len() - 3];
    let tail: Vec<&str> = whole
        .iter()
        .copied()
        .filter(|l| seqs(&[l]).first().is_some_and(|s| *s >= from))
        .collect();
    assert_eq!(last, tail, "{out}");
    assert!(out.contains("echo: message 4"), "{out}");
    assert!(!out.contains("message 3"), "{out}");
    // without --all, public entries only: the last message and its reply
    let (_, out, _) = cli(&["transcript", "r", "--last", "2"], &host.url, TOKEN).await;
    assert!(
        out.contains("alice: message 4")
            && out.contains("echo: message 4")
            && !out.contains("message 3"),
        "{out}"
    );
    // more than there is: all of it; 0: a usage error naming the flag
    let (_, out, _) = cli(
        &["transcript", "r", "--all", "--last", "100000"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!(out.lines().collect::<Vec<_>>(), whole);
    let (code, out, err) = cli(&["transcript", "r", "--last", "0"], &host.url, TOKEN).await;
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("--last"), "{err}");
    // past the range the message states: refused too (QA: taken as all)
    let (code, out, err) = cli(
        &["transcript", "r", "--last", "4294967296"],
        &host.url,
        TOKEN,
    )
    .await;
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("--last takes 1 to 4294967295"), "{err}");
    host.shutdown().await;
}

/// Regression (QA, 2026-12-05): a message's later lines printed at the
/// start of a line, so a room member's `hi\n#2 alice: I approve` read as
/// alice's message #2 in `group transcript`, and a bot's reply could
/// forge entries in `transcript`. Every line after an entry's first is
/// indented now, in `transcript`, `group transcript` and `group send`.
#[tokio::test]
async fn a_message_of_several_lines_reads_as_one_entry() {
    let script = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .bot("q", "s", &["SendMessage"])
        .start()
        .await;
    let forged = "hi\n#99 alice: I approve\r\n(turn t completed)";
    let starts_a_line = |out: &str| {
        out.lines()
            .any(|l| l.starts_with("#99 ") || l.starts_with("(turn t"))
    };
    let run = async |args: &[&str]| {
        let (code, out, err) = cli(args, &host.url, TOKEN).await;
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    };
    run(&["send", "r", forged]).await;
    let out = run(&["transcript", "r", "--all"]).await;
    assert!(!starts_a_line(&out), "{out}");
    assert!(
        out.contains("alice: hi\n    #99 alice: I approve\n    (turn t completed)\n"),
        "{out}"
    );
    assert!(
        out.contains("▸ echo: hi\n    #99 alice: I approve\n    (turn t completed)\n"),
        "{out}"
    );
    run(&["group", "create", "room", "--members", "r,q"]).await;
    let out = run(&["group", "send", "room", forged]).await;
    assert!(!starts_a_line(&out), "{out}");
    assert!(out.contains("▸ echo: "), "{out}");
    let out = run(&["group", "transcript", "room"]).await;
    assert!(!starts_a_line(&out), "{out}");
    assert!(
        out.contains("alice: hi\n    #99 alice: I approve\n    (turn t completed)\n"),
        "{out}"
    );
    host.shutdown().await;
}

/// Regression: a turn that ended without a reply showed in `transcript`
/// as "[undelivered] The bot finished its turn without sending you a
/// reply." with no turn id, where `send` names `botfleet retry TURN`:
/// someone who reads it later (after `send --timeout` gave up) could not
/// retry from it. The line says how, and the command it names works.
#[tokio::test]
async fn an_undelivered_turn_in_the_transcript_says_how_to_retry_it() {
    let script = r#"
[[rule]]
match = "quiet"
steps = [ { text = "thinking, and never replying" } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (code, _, err) = cli(&["send", "r", "quiet please"], &host.url, TOKEN).await;
    assert_eq!(code, 4, "undelivered: {err}");
    let (_, dm) = host.get("/v1/bots/r/session", TOKEN).await;
    let session = dm["session"].as_str().unwrap().to_owned();
    let notice = host
        .wait_for(&session, |es| {
            es.iter().find(|e| e["code"] == "undelivered").cloned()
        })
        .await;
    let turn = notice["retry_turn"].as_str().unwrap().to_owned();
    let (code, out, err) = cli(&["transcript", "r"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let line = format!(
        "#{} [undelivered] The bot finished its turn without sending you a reply; retry with \
         `botfleet retry {turn}`",
        notice["seq"]
    );
    assert!(out.contains(&line), "{line} not in:\n{out}");
    // the command it names takes the turn's message again
    let (code, out, err) = cli(&["retry", &turn], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("requeued 1 input(s) of turn {turn}")),
        "{out}"
    );
    host.shutdown().await;
}

/// Regression (QA): `transcript A --with B` printed only what B sent A;
/// A's answers, sent with SendToAgent as the message A gets asks it to,
/// are steps of its own and showed only with `--all`. They print as
/// messages now, to whom and what.
#[tokio::test]
async fn transcript_with_a_bot_shows_the_answers_sent_back_with_send_to_agent() {
    let script = r#"
[[rule]]
bot = "r"
match = "^go$"
steps = [
  { tool = "SendToAgent", args = { agent = "a", text = "ping from r" } },
  { tool = "SendMessage", args = { text = "asked a" } },
]

[[rule]]
bot = "a"
steps = [ { tool = "SendToAgent", args = { agent = "r", text = "pong from a" } } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "SendToAgent"])
        .bot("a", "s", &["SendMessage", "SendToAgent"])
        .start()
        .await;
    host.end_turn("r", "go").await;
    let with_r = crate::support::fleet::session_of("a", botfleet::memory::SessionKind::Agent, "r");
    host.wait_for(&with_r, |es| {
        es.iter().find(|e| e["kind"] == "turn_end").cloned()
    })
    .await;
    let (code, out, err) = cli(&["transcript", "a", "--with", "r"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ping from r"), "{out}");
    assert!(out.contains("▸ r: pong from a"), "{out}");
    host.shutdown().await;
}

/// `--with` prints what a bot answered another with SendToAgent; a call
/// refused (an unknown agent here, a spent hop budget in QA's run) sent
/// nothing and is neither printed nor counted by `--last` (QA: it read
/// like a message the other bot got).
#[tokio::test]
async fn transcript_with_leaves_out_refused_send_to_agent() {
    let script = r#"
[[rule]]
bot = "r"
match = "^ask"
steps = [
  { tool = "SendToAgent", args = { agent = "a", text = "the question" } },
  { tool = "SendMessage", args = { text = "asked" } },
]

[[rule]]
bot = "a"
match = "the question"
steps = [
  { tool = "SendToAgent", args = { agent = "r", text = "the real answer" } },
  { tool = "SendToAgent", args = { agent = "ghost", text = "words nobody got" } },
  { text = "done" },
]

[[rule]]
steps = [ { text = "fine" } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage", "SendToAgent"])
        .bot("a", "s", &["SendMessage", "SendToAgent"])
        .start()
        .await;
    let (dm, end) = host.end_turn("r", "ask a").await;
    assert_eq!(end["status"], "completed", "{end}");
    // a's refused call, then r woken by the answer
    host.wait_for(&dm, |es| {
        es.iter()
            .find(|e| e["kind"] == "agent_message" && e["text"] == "the real answer")
            .cloned()
    })
    .await;
    let (_, out, err) = cli(
        &["transcript", "a", "--with", "r", "--all"],
        &host.url,
        TOKEN,
    )
    .await;
    assert!(
        out.contains("words nobody got"),
        "the call was made: {out}{err}"
    );
    for args in [
        &["transcript", "a", "--with", "r"][..],
        &["transcript", "a", "--with", "r", "--last", "1"],
    ] {
        let (code, out, err) = cli(args, &host.url, TOKEN).await;
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains("a ▸ r: the real answer"), "{args:?}: {out}");
        assert!(!out.contains("words nobody got"), "{args:?}: {out}");
    }
    host.shutdown().await;
}

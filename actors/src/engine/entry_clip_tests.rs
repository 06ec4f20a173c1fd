#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;

use super::*;

/// A note as plain as the prompts': `start|[cut of chars]|end`.
fn note(c: Cut<'_>) -> String {
    format!("{}|[{} of {}]|{}", c.head, c.cut, c.chars, c.tail)
}

/// Words that count about as English does, different along the text.
fn words(n: usize) -> String {
    (0..n).map(|k| format!("word{} ", k % 113)).collect()
}

#[test]
fn the_cap_is_a_quarter_of_the_threshold_and_never_tiny() {
    // turn budget = half of compact_at_tokens
    assert_eq!(entry_cap(50_000), 25_000);
    assert_eq!(entry_cap(20_000), 10_000);
    assert_eq!(entry_cap(500), MIN_ENTRY_TOKENS);
}

#[test]
fn a_text_that_fits_is_not_clipped() {
    let text = words(100);
    let e = Encoding::O200kBase;
    let tokens = u64::from(e.count(&text));
    assert_eq!(clip(&text, tokens, e, &note), None);
    assert!(clip(&text, tokens - 1, e, &note).is_some());
}

/// A long text keeps its start and its end, about as many tokens as it
/// may take, and the note counts the characters cut; the same text gives
/// the same clip.
#[test]
fn a_long_text_keeps_its_start_and_end_within_the_budget() {
    let e = Encoding::O200kBase;
    let text = format!("FIRST {} LAST", words(60_000));
    let chars = text.chars().count();
    let out = clip(&text, 2_000, e, &note).unwrap();
    let tokens = u64::from(e.count(&out));
    assert!(tokens <= 2_000, "{tokens}");
    assert!(tokens > 1_800, "{tokens}: the budget is used");
    assert!(out.starts_with("FIRST word0 "), "{out:.100}");
    assert!(out.ends_with(" LAST"), "{out:.100}");
    let (head, rest) = out.split_once("|[").unwrap();
    let (counts, tail) = rest.split_once("]|").unwrap();
    let (cut, all) = counts.split_once(" of ").unwrap();
    assert_eq!(all, chars.to_string());
    assert_eq!(
        head.chars().count() + tail.chars().count() + cut.parse::<usize>().unwrap(),
        chars
    );
    assert!(text.starts_with(head) && text.ends_with(tail));
    assert_eq!(clip(&text, 2_000, e, &note), Some(out));
}

/// Text of several bytes per character and more tokens per character
/// (CJK) is cut at character boundaries and still fits.
#[test]
fn wide_characters_are_cut_whole_and_fit() {
    let e = Encoding::O200kBase;
    let text: String = "漢字かな交じり文、".repeat(20_000);
    let out = clip(&text, 1_500, e, &note).unwrap();
    assert!(u64::from(e.count(&out)) <= 1_500);
    let (head, _) = out.split_once("|[").unwrap();
    assert!(head.starts_with("漢字"), "{head:.20}");
}

#[test]
fn fair_shares_keep_small_parts_whole_and_split_the_rest_evenly() {
    // all fit together: nothing clipped
    assert_eq!(fair_shares(&[500, 400], 1_000), vec![None, None]);
    // the small ones whole, the two large ones half of what is left
    assert_eq!(
        fair_shares(&[100, 5_000, 8_000, 50], 2_000),
        vec![None, Some(925), Some(925), None]
    );
    // never a share under the floor, however many parts
    assert_eq!(
        fair_shares(&[1_000; 20], 1_000),
        vec![Some(MIN_SHARE_TOKENS); 20]
    );
}

fn user(text: String) -> ChatMessage {
    ChatMessage::User { content: text }
}

/// Regression: each input of a turn was clipped to the cap alone, so ten
/// huge inputs batched into one turn sent ten caps. The running turn's
/// user-side messages share one cap (a small one stays whole); a message
/// before the turn keeps a cap of its own.
#[test]
fn a_turns_inputs_share_one_cap() {
    let e = Encoding::default();
    let mut messages = vec![
        ChatMessage::System {
            content: "sys".into(),
        },
        user(format!("EARLIER {}", words(20_000))),
        user("a short one".into()),
    ];
    for k in 0..10 {
        messages.push(user(format!("INPUT{k} {} END{k}", words(20_000))));
    }
    let seqs: Vec<i64> = (0..messages.len() as i64).collect();
    let counts: Vec<u32> = messages
        .iter()
        .map(|m| e.count_message(&m.token_text()))
        .collect();
    let sent = plan_clips(&messages, &seqs, &counts, 4_000, Some(2), e);
    assert!(!sent.contains_key(&2), "the short input stays whole");
    let earlier = sent[&1].tokens;
    assert!(earlier > 3_500 && earlier <= 4_000, "{earlier}");
    let turn: u64 = (2..messages.len())
        .map(|i| u64::from(sent.get(&i).map_or(counts[i], |s| s.tokens)))
        .sum();
    assert!(turn <= 4_000, "the turn's inputs sent {turn} tokens");
    for k in 0..10 {
        let text = &sent[&(3 + k)].text;
        assert!(text.starts_with(&format!("INPUT{k} ")), "{text:.50}");
        assert!(text.ends_with(&format!("END{k}")));
    }
}

/// A lone huge input is clipped alike while its turn runs and in the next
/// turns (the prefix stays byte-identical): its time note takes no part
/// of its share. (It was clipped to the cap less the note's size while
/// its turn ran, to the whole cap after.)
#[test]
fn a_lone_inputs_clip_is_the_same_during_and_after_its_turn() {
    let e = Encoding::default();
    let tz: chrono_tz::Tz = "Asia/Shanghai".parse().unwrap();
    let messages = vec![
        ChatMessage::System {
            content: "sys".into(),
        },
        user(crate::engine::context::local_time::note(1_780_000_000_000, tz).unwrap()),
        user(format!("PASTE {} END", words(20_000))),
    ];
    let seqs: Vec<i64> = (0..messages.len() as i64).collect();
    let counts: Vec<u32> = messages
        .iter()
        .map(|m| e.count_message(&m.token_text()))
        .collect();
    let running = plan_clips(&messages, &seqs, &counts, 4_000, Some(1), e);
    let after = plan_clips(&messages, &seqs, &counts, 4_000, None, e);
    assert!(!running.contains_key(&1), "the note is sent whole");
    assert_eq!(running[&2].text, after[&2].text);
}

/// A call's huge argument is clipped inside its JSON: the other fields
/// and the structure stay, the string keeps its start and end around the
/// note; arguments that are no JSON go as a JSON string.
#[test]
fn long_arguments_are_clipped_inside_their_json() {
    let e = Encoding::default();
    let content = format!("BEGIN {} FINISH", words(100_000));
    let arguments =
        serde_json::json!({ "path": "big.txt", "content": content, "n": 3 }).to_string();
    let out = clip_arguments(&arguments, 1_000, e, "Write", "7").unwrap();
    assert!(u64::from(e.count(&out)) <= 1_100, "{}", e.count(&out));
    let value: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(value["path"], "big.txt");
    assert_eq!(value["n"], 3);
    let sent = value["content"].as_str().unwrap();
    assert!(sent.starts_with("BEGIN word0") && sent.ends_with(" FINISH"));
    assert!(sent.contains("characters are cut here") && sent.contains("entry #7"));
    assert!(sent.contains("The Write call was made with it whole"));
    assert_eq!(
        clip_arguments(r#"{"path":"a"}"#, 1_000, e, "Write", "7"),
        None
    );
    let raw = clip_arguments(&content, 1_000, e, "Write", "7").unwrap();
    assert!(serde_json::from_str::<Value>(&raw).unwrap().is_string());
}

/// An assistant message whose call carries a huge argument is sent with
/// the argument clipped, within the cap, its text and the call's id kept.
#[test]
fn an_assistant_messages_huge_call_is_clipped_within_the_cap() {
    let e = Encoding::default();
    let arguments = serde_json::json!({ "path": "big.txt", "content": words(100_000) }).to_string();
    let call = ToolCall {
        id: "w".into(),
        name: "Write".into(),
        arguments,
    };
    let messages = vec![
        ChatMessage::System {
            content: "sys".into(),
        },
        ChatMessage::Assistant {
            reasoning: None,
            content: "writing it".into(),
            tool_calls: vec![call],
        },
    ];
    let counts: Vec<u32> = messages
        .iter()
        .map(|m| e.count_message(&m.token_text()))
        .collect();
    let sent = plan_clips(&messages, &[0, 5], &counts, 2_000, None, e);
    let clipped = &sent[&1];
    assert_eq!(clipped.text, "writing it");
    assert!(clipped.tokens <= 2_100, "{}", clipped.tokens);
    let calls = clipped.calls.as_ref().unwrap();
    assert_eq!(calls[0].id, "w");
    let value: Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert!(value["content"].as_str().unwrap().contains("entry #5"));
}

/// Regression: the clip cut at a char count, so "e" + U+0301 repeated
/// lost the accent of the head's last "e" to the note (where it sat
/// orphaned at the tail's start), and flags and ZWJ emoji were split in
/// half the same way. Cuts fall on grapheme-cluster boundaries now.
#[test]
fn a_clip_never_splits_a_grapheme_cluster() {
    let e = Encoding::O200kBase;
    for unit in ["e\u{301}", "🇫🇷", "👩🏽\u{200d}❤\u{fe0f}\u{200d}💋\u{200d}👨🏿"]
    {
        let text = unit.repeat(16_000);
        let clipped = clip(&text, 1_000, e, &note).unwrap();
        let (head, rest) = clipped.split_once('|').unwrap();
        let (_, tail) = rest.rsplit_once('|').unwrap();
        assert!(!head.is_empty() && !tail.is_empty(), "{unit:?}");
        assert_eq!(head.len() % unit.len(), 0, "{unit:?}: head {head:?}");
        assert_eq!(head, unit.repeat(head.len() / unit.len()), "{unit:?}");
        assert_eq!(tail, unit.repeat(tail.len() / unit.len()), "{unit:?}");
    }
}

/// A prefix for a character budget ends at a grapheme boundary and is
/// never longer than the budget.
#[test]
fn a_grapheme_prefix_stays_within_its_chars() {
    let text = "ae\u{301}e\u{301}";
    assert_eq!(grapheme_prefix(text, 0), "");
    assert_eq!(grapheme_prefix(text, 2), "a");
    assert_eq!(grapheme_prefix(text, 3), "ae\u{301}");
    assert_eq!(grapheme_prefix(text, 4), "ae\u{301}");
    assert_eq!(grapheme_prefix(text, 9), text);
    assert_eq!(grapheme_prefix("🇫🇷🇩🇪", 3), "🇫🇷");
}

/// A clipped result says how to ask its own tool for less: Read's
/// `offset` and `limit` only for Read (a ReadTranscript result was told to
/// "Read with `offset` and `limit`", which ReadTranscript does not take,
/// and a bot without Read was pointed at it; QA, 2026-12-04).
#[test]
fn a_clipped_result_says_how_to_ask_its_own_tool_for_less() {
    let e = Encoding::O200kBase;
    let text = words(20_000);
    let hint = |tool: &str| clip(&text, 1_000, e, &|c| result_note(c, tool, "7")).unwrap();
    let read = hint("Read");
    assert!(
        read.contains("Read again with `offset` and `limit`"),
        "{read}"
    );
    assert!(read.contains("entry #7"), "{read}");
    let transcript = hint("ReadTranscript");
    assert!(
        transcript.contains("ReadTranscript again with smaller `before` and `after`"),
        "{transcript}"
    );
    let shell = hint("Shell");
    assert!(shell.contains("a command that prints less"), "{shell}");
    for other in [transcript, shell, hint("SearchTranscript")] {
        assert!(!other.contains("`offset`"), "{other}");
    }
}

/// Regression (QA, 2026-12-05): an assistant message with a thinking
/// model's reasoning, clipped for its long arguments, was counted as its
/// text and calls alone, though its reasoning goes back whole with it: a
/// session of long reasoning looked smaller than it was. The tokens sent
/// count the reasoning, and the calls still get their share.
#[test]
fn a_clipped_assistant_message_counts_its_reasoning() {
    let e = Encoding::O200kBase;
    let reasoning = words(3_000);
    let message = ChatMessage::Assistant {
        content: String::new(),
        tool_calls: vec![ToolCall {
            id: "c1".into(),
            name: "SendMessage".into(),
            arguments: serde_json::json!({ "text": words(3_000) }).to_string(),
        }],
        reasoning: Some(reasoning.clone()),
    };
    let messages = vec![
        ChatMessage::System {
            content: "sys".into(),
        },
        message,
    ];
    let seqs = vec![0, 1];
    let counts: Vec<u32> = messages
        .iter()
        .map(|m| e.count_message(&m.token_text()))
        .collect();
    let sent = plan_clips(&messages, &seqs, &counts, 2_000, None, e);
    let clipped = &sent[&1];
    let calls = clipped.calls.as_ref().expect("its arguments are clipped");
    let thought = e.count(&reasoning);
    assert!(
        clipped.tokens > thought,
        "{} sent, {thought} of reasoning",
        clipped.tokens
    );
    let arguments: u32 = calls.iter().map(|c| e.count(&c.arguments)).sum();
    assert!(arguments >= 900, "the calls kept {arguments} tokens");
}

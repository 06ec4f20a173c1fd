#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;

use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionId;

use super::*;
use crate::runtime::StateBlock;

/// `texts` as a plan of what is sent instead (their tokens unknown).
fn sent_of(texts: &HashMap<usize, String>) -> HashMap<usize, Sent> {
    texts
        .iter()
        .map(|(&i, text)| {
            (
                i,
                Sent {
                    text: text.clone(),
                    calls: None,
                    tokens: 0,
                },
            )
        })
        .collect()
}

fn system(text: &str) -> ChatMessage {
    ChatMessage::System {
        content: text.into(),
    }
}

fn user(text: &str) -> ChatMessage {
    ChatMessage::User {
        content: text.into(),
    }
}

fn assistant(text: &str, calls: &[(&str, &str)]) -> ChatMessage {
    ChatMessage::Assistant {
        reasoning: None,
        content: text.into(),
        tool_calls: calls
            .iter()
            .map(|(id, name)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: "{}".into(),
            })
            .collect(),
    }
}

fn tool(id: &str, content: &str) -> ChatMessage {
    ChatMessage::Tool {
        tool_call_id: id.into(),
        content: content.into(),
    }
}

fn roles(messages: &[ChatMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m {
            ChatMessage::System { content } => format!("system:{content}"),
            ChatMessage::User { content } => format!("user:{content}"),
            ChatMessage::Assistant {
                content,
                tool_calls,
                ..
            } => format!("assistant:{content}:{}", tool_calls.len()),
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => format!("tool:{tool_call_id}:{content}"),
        })
        .collect()
}

/// Regression: two user messages in a row (the summary and the next
/// message, a failed turn's input and the next one, the inputs and a
/// memory update) and the empty assistant message every finished turn
/// leaves went out as they were; chat templates that want roles to
/// alternate (Mistral, Gemma under vLLM) refused the request. They go as
/// one user message, and the context gets its own messages back.
#[test]
fn roles_alternate_and_the_context_gets_its_messages_back() {
    let context = vec![
        system("sys"),
        user("[summary] s"),
        user("first"),
        assistant("", &[]),
        user("second"),
        assistant("", &[("c1", "Read")]),
        tool("c1", "r1"),
        assistant("", &[]),
        user("third"),
        user("fourth"),
    ];
    let update = Some((9, "[memory update] m".to_owned()));
    let (request, undo) = shape(context.clone(), update, &HashMap::new(), true);
    assert_eq!(
        roles(&request),
        vec![
            "system:sys",
            "user:[summary] s\n\nfirst\n\nsecond",
            "assistant::1",
            "tool:c1:r1",
            "user:third\n\n[memory update] m\n\nfourth",
        ]
    );
    assert_eq!(roles(&undo.restore(request)), roles(&context));
    // for a model that reads each message on its own (the scripted one)
    // only the update is added
    let update = Some((9, "[memory update] m".to_owned()));
    let (request, undo) = shape(context.clone(), update, &HashMap::new(), false);
    let mut want = roles(&context);
    want.insert(9, "user:[memory update] m".into());
    assert_eq!(roles(&request), want);
    assert_eq!(roles(&undo.restore(request)), roles(&context));
    // with nothing to change the request is the context
    let plain = vec![system("sys"), user("a"), assistant("b", &[])];
    let (request, undo) = shape(plain.clone(), None, &HashMap::new(), true);
    assert_eq!(roles(&request), roles(&plain));
    assert_eq!(roles(&undo.restore(request)), roles(&plain));
    // an update past the end goes last
    let (request, undo) = shape(plain.clone(), Some((7, "u".into())), &HashMap::new(), true);
    assert_eq!(roles(&request).last().unwrap(), "user:u");
    assert_eq!(roles(&undo.restore(request)), roles(&plain));
}

/// A context of an earlier turn, then a turn (input at seq 10) of `n`
/// steps, each a Read whose result is `size` characters; with its seqs and
/// token counts (one token per character, as the test counts them).
fn long_turn(n: usize, size: usize) -> (Vec<ChatMessage>, Vec<i64>, Vec<u32>) {
    let mut messages = vec![system("sys"), user("old"), assistant("", &[("o", "Read")])];
    messages.push(tool("o", &"o".repeat(size)));
    let mut seqs = vec![0, 1, 2, 3];
    messages.push(user("read them all"));
    seqs.push(10);
    for k in 0..n {
        let id = format!("c{k}");
        messages.push(assistant("", &[(&id, "Read")]));
        let letter = char::from(b'a' + u8::try_from(k).unwrap());
        messages.push(tool(&id, &letter.to_string().repeat(size)));
        let seq = 11 + 2 * k as i64;
        seqs.extend([seq, seq + 1]);
    }
    let counts = messages
        .iter()
        .map(|m| u32::try_from(m.token_text().len()).unwrap())
        .collect();
    (messages, seqs, counts)
}

fn stubbed(stubs: &HashMap<usize, String>) -> Vec<usize> {
    let mut at: Vec<usize> = stubs.keys().copied().collect();
    at.sort_unstable();
    at
}

/// Regression: within one turn tool results piled up without bound (ten
/// 32 KB reads grew each request by ~33 KB, to ~1.3 MB in 40 steps;
/// compaction keeps a running turn). Past the turn's budget its older
/// results go as a stub naming the call, oldest first, down to half the
/// budget; the newest stays whole, every call keeps its result message,
/// and the earlier turn's results are not the running turn's to cut.
#[test]
fn a_long_turn_cuts_its_older_results_to_stubs() {
    let (messages, seqs, counts) = long_turn(10, 4_000);
    let mut cut = TurnCut {
        from_seq: 10,
        budget: 20_000,
        through: 0,
    };
    let stubs = plan_cuts(&messages, &seqs, &counts, 1, &mut cut, Encoding::O200kBase);
    // 10 results of 4,000: cut down to at most 10,000 → the 8 oldest
    let results: Vec<usize> = (0..10).map(|k| 6 + 2 * k).collect();
    assert_eq!(stubbed(&stubs), results[..8].to_vec());
    assert_eq!(cut.through, seqs[results[7]]);
    assert_eq!(
        stubs[&results[2]],
        "[result of Read call #3 cut to save context: 4,000 characters; call it again if you need it]"
    );
    let (request, undo) = shape(messages.clone(), None, &sent_of(&stubs), true);
    // pairing: every call still has its result, in place
    for (i, m) in request.iter().enumerate() {
        if let ChatMessage::Assistant { tool_calls, .. } = m {
            for c in tool_calls {
                assert!(
                    matches!(&request[i + 1], ChatMessage::Tool { tool_call_id, .. } if *tool_call_id == c.id),
                    "{:?}",
                    roles(&request)
                );
            }
        }
    }
    let sizes: usize = request.iter().map(|m| m.token_text().len()).sum();
    assert!(sizes < 4_000 + 3 * 4_000 + 2_000, "{sizes}");
    // the newest results and the earlier turn's are whole
    assert_eq!(request[3], messages[3]);
    assert_eq!(request[results[9]], messages[results[9]]);
    assert_eq!(undo.restore(request), messages);

    // the next step adds one more result: under the budget with the cuts
    // made, nothing more is cut (the prefix stays as it was sent)
    let (messages, seqs, counts) = long_turn(11, 4_000);
    let again = plan_cuts(&messages, &seqs, &counts, 1, &mut cut, Encoding::O200kBase);
    assert_eq!(stubbed(&again), results[..8].to_vec());
    // past the budget again: cut further, never the newest
    let (messages, seqs, counts) = long_turn(14, 4_000);
    let more = plan_cuts(&messages, &seqs, &counts, 1, &mut cut, Encoding::O200kBase);
    let all: Vec<usize> = (0..14).map(|k| 6 + 2 * k).collect();
    assert_eq!(stubbed(&more), all[..12].to_vec());
}

/// Short results are not worth a stub, and a turn under its budget is
/// sent whole.
#[test]
fn short_results_and_a_turn_under_budget_stay_whole() {
    let (messages, seqs, counts) = long_turn(10, 300);
    let mut cut = TurnCut {
        from_seq: 10,
        budget: 1_000,
        through: 0,
    };
    assert!(plan_cuts(&messages, &seqs, &counts, 1, &mut cut, Encoding::O200kBase).is_empty());
    // results of 500 characters are cut past the budget (QA: under 1,000
    // none was, and a turn of many small reads grew without bound)
    let (messages, seqs, counts) = long_turn(10, 500);
    let mut cut = TurnCut {
        from_seq: 10,
        budget: 1_000,
        through: 0,
    };
    let stubs = plan_cuts(&messages, &seqs, &counts, 1, &mut cut, Encoding::O200kBase);
    let results: Vec<usize> = (0..10).map(|k| 6 + 2 * k).collect();
    assert_eq!(stubbed(&stubs), results[..9].to_vec());
    let (messages, seqs, counts) = long_turn(3, 4_000);
    let mut cut = TurnCut {
        from_seq: 10,
        budget: 20_000,
        through: 0,
    };
    assert!(plan_cuts(&messages, &seqs, &counts, 1, &mut cut, Encoding::O200kBase).is_empty());
    assert_eq!(cut.through, 0);
}

fn plain_entry(session: SessionId, seq: i64, kind: EntryKind) -> Entry {
    Entry {
        id: EntryId::new_v7(),
        session,
        seq,
        gid: seq,
        author: "alice".into(),
        turn: None,
        created_at: 0,
        kind,
    }
}

/// A refused call's arguments are cut after its step was counted: the
/// count is taken again (the tail's total is what a fresh tail counts),
/// and a request over the turn's budget cuts the turn's older results
/// while the context gets its messages back unchanged.
/// Pushes `count` Read calls of the running turn onto `tail` from seq 4
/// on, ids `{prefix}0`…, each answered by `result`.
fn push_reads(tail: &mut SessionTail, session: SessionId, prefix: &str, count: i64, result: &str) {
    for k in 0..count {
        let seq = 4 + 2 * k;
        let id = format!("{prefix}{k}");
        tail.push(&plain_entry(
            session,
            seq,
            EntryKind::Assistant {
                reasoning: None,
                text: String::new(),
                tool_calls: vec![botfleet_memory::ToolCallBody {
                    id: id.clone(),
                    name: "Read".into(),
                    arguments: "{}".into(),
                }],
            },
        ));
        tail.push(&plain_entry(
            session,
            seq + 1,
            EntryKind::ToolResult {
                call_id: id,
                name: "Read".into(),
                content: result.into(),
                is_error: false,
            },
        ));
    }
}

#[test]
fn a_request_is_shaped_and_the_context_kept() {
    let session = SessionId::new_v7();
    let huge = serde_json::json!({ "text": "x".repeat(50_000) }).to_string();
    let mut entries = vec![
        plain_entry(session, 1, EntryKind::UserMessage { text: "go".into() }),
        plain_entry(
            session,
            2,
            EntryKind::Assistant {
                reasoning: None,
                text: String::new(),
                tool_calls: vec![botfleet_memory::ToolCallBody {
                    id: "s".into(),
                    name: "SendMessage".into(),
                    arguments: huge,
                }],
            },
        ),
    ];
    let state = StateBlock::default();
    let fill = |entries: &[Entry]| {
        let mut tail = SessionTail::new(session);
        tail.fill(None, "sys", &state, None, entries, Encoding::default());
        tail
    };
    let mut tail = fill(&entries);
    let before = tail.tokens();
    let refusal = crate::tools::ToolError::new("too long", "shorten it").to_string();
    let result = plain_entry(
        session,
        3,
        EntryKind::ToolResult {
            call_id: "s".into(),
            name: "SendMessage".into(),
            content: refusal,
            is_error: true,
        },
    );
    tail.push(&result);
    entries.push(result);
    let after = tail.tokens();
    assert!(after < before / 10, "{before} → {after}");
    assert_eq!(after, fill(&entries).tokens());

    // four reads of 3,000 characters in the turn, over a budget of 2,000
    push_reads(&mut tail, session, "r", 4, &"word ".repeat(600));
    let context: Vec<ChatMessage> = tail.context.messages().to_vec();
    let total = tail.tokens();
    tail.shape_requests(Some(1), 2_000, true);
    let request = tail.take_request(None, &mut None);
    let stubs: Vec<&str> = request
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } if content.starts_with("[result of Read") => {
                Some(content.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(stubs.len(), 3, "{request:#?}");
    assert!(stubs[0].contains("call #2"), "{stubs:?}");
    // every message is sent, the input's time note joined to it (roles
    // alternate)
    assert_eq!(request.len(), context.len() - 1);
    tail.restore_request(request, None);
    assert_eq!(tail.context.messages(), context.as_slice());
    assert_eq!(tail.tokens(), total);
}

/// The text of each message of `request`.
fn texts(request: &[ChatMessage]) -> Vec<String> {
    request
        .iter()
        .map(|m| match m {
            ChatMessage::System { content }
            | ChatMessage::User { content }
            | ChatMessage::Assistant { content, .. }
            | ChatMessage::Tool { content, .. } => content.clone(),
        })
        .collect()
}

/// A tail holding a person's huge message (seq 1), a step whose text is
/// huge and that read (seq 2) a huge result (seq 3), each of `chars`
/// characters of words.
fn huge_turn(session: SessionId, chars: usize) -> SessionTail {
    huge_turn_of(session, chars, "Read")
}

/// [`huge_turn`] with a call of `tool` (`{"path":"big.txt"}`).
fn huge_turn_of(session: SessionId, chars: usize, tool: &str) -> SessionTail {
    let words = |word: &str| format!("{word} ").repeat(chars / (word.len() + 1));
    let entries = vec![
        plain_entry(
            session,
            1,
            EntryKind::UserMessage {
                text: format!("PASTE {} END", words("paste")),
            },
        ),
        plain_entry(
            session,
            2,
            EntryKind::Assistant {
                reasoning: None,
                text: format!("THOUGHT {} DONE", words("thought")),
                tool_calls: vec![botfleet_memory::ToolCallBody {
                    id: "r".into(),
                    name: tool.into(),
                    arguments: r#"{"path":"big.txt"}"#.into(),
                }],
            },
        ),
        plain_entry(
            session,
            3,
            EntryKind::ToolResult {
                call_id: "r".into(),
                name: tool.into(),
                content: format!("FILE {} EOF", words("line")),
                is_error: false,
            },
        ),
    ];
    let mut tail = SessionTail::new(session);
    tail.fill(
        None,
        "sys",
        &StateBlock::default(),
        None,
        &entries,
        Encoding::default(),
    );
    tail
}

/// Regression (QA): a clipped result of a tool the index leaves out
/// (SearchTranscript, ReadTranscript, CheckSubagent) told the bot that
/// SearchTranscript finds words in it, which it never does. Its note says
/// search does not hold it; another tool's note still points to search.
#[test]
fn a_clipped_result_search_leaves_out_does_not_send_the_bot_to_search_it() {
    for (tool, searchable) in [
        ("SearchTranscript", false),
        ("ReadTranscript", false),
        ("CheckSubagent", false),
        ("Shell", true),
    ] {
        let mut tail = huge_turn_of(SessionId::new_v7(), 60_000, tool);
        tail.shape_requests(Some(1), 4_000, true);
        let request = tail.take_request(None, &mut None);
        let result = &texts(&request)[3];
        assert!(result.contains("of this result's"), "{tool}: {result:.200}");
        assert_eq!(
            result.contains("SearchTranscript, if you have it, finds words in it"),
            searchable,
            "{tool}"
        );
        assert_eq!(
            result.contains("but search does not"),
            !searchable,
            "{tool}"
        );
    }
}

/// Regression: one huge entry (a person's paste, the newest tool result,
/// the bot's own long text) went whole into the request. Each is sent as
/// its start and its end around a note within the cap (half the turn's
/// budget), the assistant message keeps its call, the compaction check
/// counts what is sent, and the context gets every message back whole.
#[test]
fn a_huge_entry_is_sent_clipped_and_the_context_keeps_it() {
    let session = SessionId::new_v7();
    let mut tail = huge_turn(session, 60_000);
    let context: Vec<ChatMessage> = tail.context.messages().to_vec();
    let whole = tail.tokens();
    // a budget of 4,000 for the turn: a cap of 2,000 per message
    tail.shape_requests(Some(1), 4_000, true);
    let sent = tail.sent_tokens();
    assert!(sent < 4 * 2_000, "{sent} of {whole}");
    assert!(whole > 20_000, "{whole}");
    let request = tail.take_request(None, &mut None);
    // every message is sent, the paste's time note joined to it (roles
    // alternate)
    assert_eq!(request.len(), context.len() - 1);
    let texts = texts(&request);
    let e = Encoding::default();
    for (i, (start, end)) in [
        (1, ("[time: ", " END")),
        (2, ("THOUGHT", "DONE")),
        (3, ("FILE", "EOF")),
    ] {
        let text = &texts[i];
        assert!(
            text.starts_with(start) && text.ends_with(end),
            "{i}: {text:.80}"
        );
        assert!(
            e.count_message(text) <= 2_000,
            "{i}: {}",
            e.count_message(text)
        );
    }
    assert!(
        texts[1].contains("characters are cut here: it is too long for your context")
            && texts[1].contains("entry #1 of this conversation"),
        "{:.300}",
        &texts[1][texts[1].len() / 2 - 150..]
    );
    assert!(texts[1].contains(")]\n\nPASTE paste"), "{:.200}", texts[1]);
    assert!(texts[2].contains("entry #2"), "the step's own text");
    assert!(
        texts[3].contains("of this result's")
            && texts[3].contains("Read again with `offset` and `limit`"),
        "the newest result"
    );
    let ChatMessage::Assistant { tool_calls, .. } = &request[2] else {
        panic!("{:?}", request[2]);
    };
    assert_eq!(tool_calls[0].arguments, r#"{"path":"big.txt"}"#);
    let counted: u64 = texts
        .iter()
        .map(|t| u64::from(e.count_message(t)))
        .sum::<u64>()
        + 10;
    assert!(sent.abs_diff(counted) < 50, "{sent} counted as {counted}");
    tail.restore_request(request, None);
    assert_eq!(tail.context.messages(), context.as_slice());
    assert_eq!(tail.tokens(), whole);
    // every request clips the same way (the cached prefix holds)
    let again = tail.take_request(None, &mut None);
    assert_eq!(self::texts(&again)[1], texts[1]);
    tail.restore_request(again, None);
}

/// Joined to the user-side message before it (roles alternate), a clip
/// is sent inside the joined message, and the context gets both back.
#[test]
fn a_clipped_message_joins_the_one_before_it() {
    let context = vec![system("sys"), user("before"), user("huge")];
    let sent = HashMap::from([(2, "clipped".to_owned())]);
    let (request, undo) = shape(context.clone(), None, &sent_of(&sent), true);
    assert_eq!(
        roles(&request),
        vec!["system:sys", "user:before\n\nclipped"]
    );
    assert_eq!(undo.restore(request), context);
    let (request, undo) = shape(context.clone(), None, &sent_of(&sent), false);
    assert_eq!(
        roles(&request),
        vec!["system:sys", "user:before", "user:clipped"]
    );
    assert_eq!(undo.restore(request), context);
}

/// What the compaction check counts is what the request sends: a long
/// turn's older results as stubs; looking does not move the turn's
/// watermark, so the request cuts the same.
#[test]
fn sent_tokens_count_the_stubs_and_move_nothing() {
    let session = SessionId::new_v7();
    let mut tail = huge_turn(session, 100);
    push_reads(&mut tail, session, "c", 6, &"word ".repeat(2_000));
    let whole = tail.tokens();
    tail.shape_requests(Some(1), 6_000, true);
    let sent = tail.sent_tokens();
    assert_eq!(tail.turn_cut.as_ref().map(|c| c.through), Some(0));
    assert!(sent < whole / 2, "{sent} of {whole}");
    let request = tail.take_request(None, &mut None);
    let e = Encoding::default();
    let counted: u64 = texts(&request)
        .iter()
        .map(|t| u64::from(e.count_message(t)))
        .sum::<u64>()
        + 6 * 4;
    assert!(sent.abs_diff(counted) < 50, "{sent} counted as {counted}");
    tail.restore_request(request, None);
}

/// A request with nothing to shape (no update, no clip or stub, roles not
/// joined) is the context's own vector, and it goes back as it came: no
/// message moves and the vector keeps its spare room, so the entries a
/// step pushes next do not copy the context to grow it. A shaped request
/// gives the context back with room too.
#[test]
fn an_unshaped_request_moves_no_message() {
    let mut context = Vec::with_capacity(64);
    context.extend([
        system("sys"),
        user("a"),
        assistant("", &[("c1", "Read")]),
        tool("c1", "r1"),
        assistant("", &[]),
    ]);
    let (at, room) = (context.as_ptr(), context.capacity());
    let (request, undo) = shape(context, None, &HashMap::new(), false);
    assert_eq!(request.as_ptr(), at, "the request is the context's vector");
    let back = undo.restore(request);
    assert_eq!(back.as_ptr(), at, "the context gets its vector back");
    assert_eq!(back.capacity(), room);
    assert_eq!(
        roles(&back),
        vec![
            "system:sys",
            "user:a",
            "assistant::1",
            "tool:c1:r1",
            "assistant::0"
        ]
    );
    // shaped (an update added): rebuilt, with room for the next entries
    let (request, undo) = shape(back, Some((2, "u".into())), &HashMap::new(), false);
    let back = undo.restore(request);
    assert_eq!(back.len(), 5);
    assert!(back.capacity() >= 5 + RESTORE_ROOM, "{}", back.capacity());
}

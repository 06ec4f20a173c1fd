#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read as _;

use pretty_assertions::assert_eq;

use super::*;

fn window(line: u64, column: u64, limit: u64, budget: usize) -> Window {
    Window {
        line,
        column,
        limit,
        budget,
        context: 0,
    }
}

fn read(text: &[u8], w: Window) -> Result<Shown, WindowError> {
    read_window(text, w, &CancellationToken::new())
}

fn shown(text: &str, stop: Stop) -> Shown {
    Shown {
        text: text.into(),
        stop,
        before: Vec::new(),
        after: Vec::new(),
    }
}

#[test]
fn windows_by_lines() {
    let file = b"one\ntwo\nthree\n";
    let all = window(1, 1, u64::MAX, 1000);
    assert_eq!(
        read(file, all).unwrap(),
        shown("one\ntwo\nthree\n", Stop::Eof)
    );
    assert_eq!(
        read(file, window(2, 1, 1, 1000)).unwrap(),
        shown("two\n", Stop::Limit { next: 3 })
    );
    assert_eq!(
        read(file, window(3, 1, 1, 1000)).unwrap(),
        shown("three\n", Stop::Eof)
    );
    assert_eq!(
        read(file, window(4, 1, 1, 1000)).unwrap(),
        shown("", Stop::PastEnd { lines: 3 })
    );
    assert_eq!(
        read(b"a\nb", window(9, 1, 1, 1000)).unwrap(),
        shown("", Stop::PastEnd { lines: 2 })
    );
    assert_eq!(
        read(b"", all).unwrap(),
        shown("", Stop::PastEnd { lines: 0 })
    );
    assert_eq!(
        read(file, window(2, 3, 1, 1000)).unwrap(),
        shown("o\n", Stop::Limit { next: 3 })
    );
    assert_eq!(
        read(file, window(2, 9, 1, 1000)).unwrap(),
        shown("", Stop::PastLineEnd { line: 2, chars: 3 })
    );
}

#[test]
fn budget_ends_after_whole_lines_or_inside_a_long_first_line() {
    let file = b"aaaa\nbbbb\ncccc\n";
    assert_eq!(
        read(file, window(1, 1, u64::MAX, 12)).unwrap(),
        shown("aaaa\nbbbb\n", Stop::Budget { next: 3 })
    );
    assert_eq!(
        read("ééééé\n".as_bytes(), window(1, 1, u64::MAX, 5)).unwrap(),
        shown("éé", Stop::MidLine { line: 1, column: 3 })
    );
    assert_eq!(
        read("ééééé\n".as_bytes(), window(1, 3, u64::MAX, 5)).unwrap(),
        shown("éé", Stop::MidLine { line: 1, column: 5 })
    );
    assert_eq!(
        read("ééééé\n".as_bytes(), window(1, 5, u64::MAX, 5)).unwrap(),
        shown("é\n", Stop::Eof)
    );
}

/// Following each window's end reads every byte of the file once, with
/// chunk boundaries splitting characters and lines; each window keeps the
/// bytes just before it and those just after it where it is cut.
#[test]
fn following_the_ends_reads_the_whole_file() {
    let file = |lines: usize, long: usize| {
        let mut file = String::new();
        for i in 0..lines {
            file.push_str(&format!("{i} ünïcode 中文 line\n"));
        }
        file.push_str(&"é".repeat(long));
        file.push_str("\nlast line without newline");
        file
    };
    for (budget, context, file) in [
        (7, 5, file(20, 50)),
        (1000, 0, file(3000, 100_000)),
        (1000, 300, file(3000, 100_000)),
        (32 * 1024, 70_000, file(3000, 100_000)),
    ] {
        let mut got = String::new();
        let (mut line, mut column) = (1, 1);
        for _ in 0..10_000 {
            let w = Window {
                context,
                ..window(line, column, u64::MAX, budget)
            };
            let s = read(file.as_bytes(), w).unwrap();
            let (start, end) = (got.len(), got.len() + s.text.len());
            let before = &file.as_bytes()[start.saturating_sub(context)..start];
            assert!(s.before == before, "budget {budget}: before byte {start}");
            let after = match s.stop {
                Stop::Eof => &[][..],
                _ => &file.as_bytes()[end..file.len().min(end + context)],
            };
            assert!(s.after == after, "budget {budget}: after byte {end}");
            got.push_str(&s.text);
            match s.stop {
                Stop::Eof => break,
                Stop::Budget { next } => (line, column) = (next, 1),
                Stop::MidLine { line: l, column: c } => (line, column) = (l, c),
                other => panic!("unexpected end {other:?}"),
            }
        }
        assert!(got == file, "budget {budget}: not the same text");
    }
}

/// The bytes around a window cut by its line limit: those after it go on
/// over lines, and stop where the file stops being text.
#[test]
fn a_window_keeps_the_bytes_around_it() {
    let w = |line, limit| Window {
        context: 4,
        ..window(line, 1, limit, 1000)
    };
    let s = read(b"aaaa\nbb\ncc\ndddd\n", w(2, 1)).unwrap();
    assert_eq!((s.before, s.after), (b"aaa\n".to_vec(), b"cc\nd".to_vec()));
    let s = read(b"a\nbb\nc\xff\n", w(2, 1)).unwrap();
    assert_eq!((s.before, s.after), (b"a\n".to_vec(), b"c".to_vec()));
    let s = read(b"a\nbb\n", w(2, 1)).unwrap();
    assert_eq!((s.before, s.after), (b"a\n".to_vec(), Vec::new()));
}

#[test]
fn refuses_binary_where_it_reads() {
    assert!(matches!(
        read(b"ok\nbad\0\n", window(1, 1, u64::MAX, 100)),
        Err(WindowError::NotText { line: 2 })
    ));
    assert!(matches!(
        read(b"ok\n\xff\n", window(1, 1, u64::MAX, 100)),
        Err(WindowError::NotText { line: 2 })
    ));
    // the lines before the binary part can still be read
    assert_eq!(
        read(b"ok\n\xff\n", window(1, 1, 1, 100)).unwrap(),
        shown("ok\n", Stop::Limit { next: 2 })
    );
    assert!(matches!(
        read(b"ok\n\xc3", window(1, 1, u64::MAX, 100)),
        Err(WindowError::NotText { line: 2 })
    ));
}

/// An endless source costs a bounded read: the window stops at its budget
/// or at its line limit, and a cancelled turn stops a skip that would
/// never end.
#[test]
fn endless_sources_stop() {
    let endless = || std::io::repeat(b'a');
    let s = read_window(
        endless(),
        window(1, 1, u64::MAX, 100),
        &CancellationToken::new(),
    )
    .unwrap();
    assert_eq!(s.text.len(), 100);
    assert_eq!(
        s.stop,
        Stop::MidLine {
            line: 1,
            column: 101
        }
    );
    let lines = || std::io::repeat(b'\n');
    let s = read_window(lines(), window(5, 1, 3, 100), &CancellationToken::new()).unwrap();
    assert_eq!(s, shown("\n\n\n", Stop::Limit { next: 8 }));
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert!(matches!(
        read_window(endless().take(u64::MAX), window(2, 1, 1, 100), &cancel),
        Err(WindowError::Cancelled)
    ));
}

/// The tester's file: a secret across the output limit of 32 KiB.
const SECRET: &str = "SUPERSECRETVALUE_0123456789abcdef";

/// A tool fixture whose bot's results are scrubbed of [`SECRET`], with
/// `text` in `sec1.txt` of the workspace.
fn secret_fixture(text: &str) -> crate::tools::test_support::ToolFixture {
    let mut f = crate::tools::test_support::ToolFixture::new();
    f.secrets = crate::vault::BotSecrets {
        values: Vec::new(),
        redactor: crate::safety::Redactor::new([SECRET]),
    };
    std::fs::write(f.ws().root().join("sec1.txt"), text).unwrap();
    f
}

/// Read through the tool contract.
async fn read_tool(f: &crate::tools::test_support::ToolFixture, args: serde_json::Value) -> String {
    use crate::tools::Tool as _;
    crate::tools::Read
        .call(&f.ctx("c1"), args)
        .await
        .unwrap()
        .content
}

/// Whether `text` shows 4 or more chars of [`SECRET`] in a row.
fn shows_part_of_secret(text: &str) -> Option<String> {
    (0..SECRET.len())
        .flat_map(|start| (start + 4..=SECRET.len()).map(move |end| &SECRET[start..end]))
        .find(|part| text.contains(part))
        .map(str::to_owned)
}

/// Regression (round 14, H2): a window that ends inside a secret showed
/// its start (`…AAAASUPERSEC`), which no scrub for the whole secret
/// finds; the window that Read's note points to next began with the rest
/// (`RETVALUE_0123…`). Neither shows a part of it now, and a window
/// that holds the secret whole shows it redacted.
#[tokio::test]
async fn read_windows_cut_through_a_secret_show_no_part_of_it() {
    let text = format!("{}{SECRET}{}", "A".repeat(32760), "B".repeat(100));
    let f = secret_fixture(&text);
    let first = read_tool(&f, serde_json::json!({"path": "sec1.txt"})).await;
    assert_eq!(shows_part_of_secret(&first), None, "{}", &first[32700..]);
    assert!(
        first.contains("AAAA[redacted]\n[truncated at the output limit of 32768 bytes: line 1 continues at character 32769"),
        "{}",
        &first[32700..]
    );
    let next = read_tool(
        &f,
        serde_json::json!({"path": "sec1.txt", "offset": 1, "column": 32769}),
    )
    .await;
    assert_eq!(shows_part_of_secret(&next), None, "{next}");
    assert_eq!(next, format!("[redacted]{}", "B".repeat(100)));
    // a window from anywhere inside the secret
    for column in 32762..32760 + SECRET.len() as u64 {
        let from = read_tool(
            &f,
            serde_json::json!({"path": "sec1.txt", "offset": 1, "column": column}),
        )
        .await;
        assert_eq!(shows_part_of_secret(&from), None, "column {column}: {from}");
    }
    // a secret inside the window is left to the scrub of every result
    let whole = seen(
        &f,
        serde_json::json!({"path": "sec1.txt", "offset": 1, "column": 200}),
    )
    .await;
    assert!(
        whole.ends_with(&format!("AAAA[redacted]{}", "B".repeat(100))),
        "{}",
        &whole[whole.len() - 200..]
    );
}

/// A secret over several lines (a key file) cut by Read's line limit
/// shows none of its lines, before or after the cut.
#[tokio::test]
async fn read_windows_cut_between_the_lines_of_a_secret_show_none_of_them() {
    let key = "-----BEGIN KEY-----\nMIIEsecretline1\nMIIEsecretline2\n-----END KEY-----";
    let mut f = secret_fixture(&format!("intro\n{key}\noutro\n"));
    f.secrets.redactor = crate::safety::Redactor::new([key]);
    let head = read_tool(&f, serde_json::json!({"path": "sec1.txt", "limit": 3})).await;
    assert_eq!(
        head,
        "intro\n[redacted]\n[the file continues at line 4; Read again with offset 4 to see more]"
    );
    let tail = read_tool(&f, serde_json::json!({"path": "sec1.txt", "offset": 4})).await;
    assert_eq!(tail, "[redacted]\noutro\n");
    // one line from its middle
    let line = read_tool(
        &f,
        serde_json::json!({"path": "sec1.txt", "offset": 3, "limit": 1}),
    )
    .await;
    assert_eq!(
        line,
        "[redacted]\n[the file continues at line 4; Read again with offset 4 to see more]"
    );
}

/// What the model is given of Read's output: the tool's text scrubbed
/// like every tool result (`outcome_batch` in `engine/calls.rs`).
async fn seen(f: &crate::tools::test_support::ToolFixture, args: serde_json::Value) -> String {
    let out = read_tool(f, args).await;
    f.secrets.redactor.scrub(&out).into_owned()
}

/// The text of a window, without Read's note on where the file goes on.
fn window_text(out: &str) -> &str {
    ["\n[truncated at the output limit", "\n[the file continues"]
        .iter()
        .find_map(|note| out.find(note))
        .map_or(out, |at| &out[..at])
}

/// Whether `text` shows nothing but `filler` chars, newlines and
/// redactions: no char of [`SECRET`] (whose chars `filler` is not).
fn only(filler: &str, text: &str) -> bool {
    text.replace(crate::safety::REDACTED, "")
        .chars()
        .all(|c| c == '\n' || filler.contains(c))
}

/// Regression (round 15, F3): a window that ended 1 to 3 chars into a
/// secret showed them (`…xxxSUP`), as a start of a secret was hidden only
/// from 4 chars on; a window that began 1 to 3 chars before a secret's
/// end showed them (`def…`). A window ending, or beginning, at any char
/// of a secret shows no char of it now, and the text around it whole.
#[tokio::test]
async fn read_windows_cut_anywhere_in_a_secret_show_no_char_of_it() {
    const LIMIT: usize = 32 * 1024;
    for into in 0..=SECRET.len() {
        let text = format!("{}{SECRET}{}", "x".repeat(LIMIT - into), "z".repeat(100));
        let f = secret_fixture(&text);
        let first = seen(&f, serde_json::json!({"path": "sec1.txt"})).await;
        let shown = window_text(&first);
        assert!(
            only("x", shown) && shown.starts_with(&"x".repeat(LIMIT - into)),
            "ending {into} chars into the secret: …{}",
            &shown[shown.len().saturating_sub(40)..]
        );
        let column = LIMIT + 1;
        let next = seen(
            &f,
            serde_json::json!({"path": "sec1.txt", "offset": 1, "column": column}),
        )
        .await;
        let rest = "z".repeat(100);
        let expected = if into == SECRET.len() {
            rest
        } else {
            format!("[redacted]{rest}")
        };
        assert_eq!(next, expected, "the window after one {into} chars in");
    }
    // a window from every char of the secret, and the one after it
    let text = format!("{}{SECRET}{}", "x".repeat(100), "z".repeat(100));
    let f = secret_fixture(&text);
    for column in 101..=101 + SECRET.len() as u64 {
        let from = seen(
            &f,
            serde_json::json!({"path": "sec1.txt", "offset": 1, "column": column}),
        )
        .await;
        assert!(
            only("z", &from) && from.ends_with(&"z".repeat(100)),
            "column {column}: {from}"
        );
    }
}

/// A line limit that ends a window 1 to 3 chars into a secret over lines
/// shows none of them; the window on from there neither.
#[tokio::test]
async fn read_windows_ending_at_a_line_a_few_chars_into_a_secret_show_none_of_it() {
    let key = "K1\nMIIEsecretline\nK2";
    let mut f = secret_fixture("xxxK1\nMIIEsecretline\nK2zz\n");
    f.secrets.redactor = crate::safety::Redactor::new([key]);
    let head = seen(&f, serde_json::json!({"path": "sec1.txt", "limit": 1})).await;
    assert_eq!(
        head,
        "xxx[redacted]\n[the file continues at line 2; Read again with offset 2 to see more]"
    );
    let tail = seen(&f, serde_json::json!({"path": "sec1.txt", "offset": 3})).await;
    assert_eq!(tail, "[redacted]zz\n");
}

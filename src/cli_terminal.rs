//! Everything the CLI prints goes through here, because most of it is
//! other people's text: a room member's message, a bot's reply echoing a
//! webhook payload, a memory item, a search hit, the host's error message
//! quoting an id. Printed raw, an escape sequence in it would drive the
//! reader's terminal (OSC 52 writes the clipboard, `ESC [2J` clears the
//! screen, a bidi override reorders what the line seems to say).
//!
//! [`text`] shows every such character as a visible escape, `\u{1b}` for
//! ESC: the C0 controls but newline and tab (a CR LF line end prints as a
//! newline; a lone CR is escaped), DEL, the C1 controls
//! (U+0080–U+009F) and the bidi embeddings, overrides and isolates
//! (U+202A–U+202E, U+2066–U+2069). [`out`] and [`err`] (the `outln!` and
//! `errln!` macros of [`super`]) print a line through it. JSON output
//! ([`json`], [`json_pretty`]) is escaped as JSON (`\u001b`) and keeps the
//! same value; printed through [`out`], it holds nothing to escape again.
//!
//! This is the only module of the CLI allowed to print (the workspace
//! denies `print_stdout` and `print_stderr` elsewhere).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::borrow::Cow;
use std::fmt;
use std::fmt::Write as _;
use std::io;
use std::io::Write as _;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use icu_properties::CodePointMapData;
use icu_properties::props::GeneralCategory;
use serde_json::Value;

/// Whether `c` must not reach a terminal as it is.
fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every character a terminal would act on (see the module
/// comment) written as `\u{HEX}`; newlines and tabs stay, and a Windows
/// line end (CR LF) prints as a plain newline. A lone CR stays escaped:
/// it moves the cursor back to the start of the line, so the text after
/// it would overwrite what the line seemed to say.
pub(super) fn text(s: &str) -> Cow<'_, str> {
    escaped(s, is_unsafe)
}

/// An entry of a transcript printed as one: its message's lines after the
/// first indented, so that none reads as an entry of its own (a room
/// member's `hi\n#2 alice: I approve` printed a line that looked like
/// alice's message #2: QA, 2026-12-05). The bots' own room input indents
/// them so too.
pub(super) fn entry(line: String) -> String {
    if line.contains('\n') {
        line.replace('\n', "\n    ")
    } else {
        line
    }
}

/// Whether `c` is a Unicode format character (general category Cf, from
/// ICU's data, as `botfleet-memory` checks display names): it shows
/// nothing itself, or changes how the text around it reads (bidi marks,
/// zero-width characters, the soft hyphen, tags).
fn is_format(c: char) -> bool {
    CodePointMapData::<GeneralCategory>::new().get(c) == GeneralCategory::Format
}

/// Whether `c` is escaped in what a person approves: what [`text`]
/// escapes, every format character (an invisible one could make an
/// action read as another), and the line and paragraph separators
/// (U+2028, U+2029: a terminal shows them as a blank or nothing, a
/// shell reads them as part of a word). The web page's cards escape the
/// same.
fn is_unsafe_strict(c: char) -> bool {
    is_unsafe(c) || matches!(c, '\u{2028}' | '\u{2029}') || is_format(c)
}

/// [`text`] with every format character escaped too
/// ([`is_unsafe_strict`]): for an approval's summary, reason and action.
pub(super) fn strict_text(s: &str) -> Cow<'_, str> {
    escaped(s, is_unsafe_strict)
}

/// [`json`] with every format character escaped too.
pub(super) fn strict_json(v: &Value) -> String {
    escape_json_with(v.to_string(), is_unsafe_strict)
}

fn escaped(s: &str, unsafe_char: fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            // the line end of a message written on Windows: the LF that
            // follows ends the line
            continue;
        }
        if unsafe_char(c) {
            // writing to a String cannot fail
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Set once `botfleet run` serves: from then on a line that cannot be
/// printed is dropped (see [`unprintable`]).
static SERVING: AtomicBool = AtomicBool::new(false);

/// Marks this process as the host: its own lines (the banner, "stopping…")
/// only tell the operator where it listens, and its log goes through
/// `tracing`, which drops what it cannot write.
pub(super) fn serving() {
    SERVING.store(true, Ordering::Relaxed);
}

/// Prints a line on stdout, made safe with [`text`].
pub(super) fn out(line: fmt::Arguments<'_>) {
    let mut stdout = io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{}", text(&line.to_string())) {
        unprintable("stdout", &e);
    }
}

/// Prints a line on stderr, made safe with [`text`].
pub(super) fn err(line: fmt::Arguments<'_>) {
    let mut stderr = io::stderr().lock();
    if let Err(e) = writeln!(stderr, "{}", text(&line.to_string())) {
        unprintable("stderr", &e);
    }
}

/// A line that could not be printed. `println!` panicked here, which
/// stopped `botfleet run > host.out` at its banner when that file was on
/// a full disk, and printed a panic and a backtrace for `botfleet
/// transcript | head -0`. The host goes on serving without the line. A
/// command stops: quietly, as `cat` does (status 141, 128 + SIGPIPE), when
/// the reader of its output went away; otherwise with status 1 and the
/// reason on stderr, since what it printed is incomplete (`botfleet
/// transcript bot > file` on a full disk must not look like a whole
/// transcript).
fn unprintable(stream: &str, e: &io::Error) {
    if SERVING.load(Ordering::Relaxed) {
        return;
    }
    if e.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(141);
    }
    // stderr may be the stream that failed; nothing more can be said then
    let _ = writeln!(
        io::stderr(),
        "botfleet: cannot write to {stream}: {e}; the output above is incomplete (free space \
         or redirect it elsewhere, then run the command again)"
    );
    std::process::exit(1);
}

/// `v` as one line of JSON, with DEL, the C1 controls and the bidi
/// characters escaped too (`\u0085`): serde escapes only the C0 controls.
/// Outside strings JSON holds ASCII only, so every such character is in a
/// string, where the escape stands for the same character.
pub(super) fn json(v: &Value) -> String {
    escape_json(v.to_string())
}

/// `v` as indented JSON, escaped as by [`json`].
pub(super) fn json_pretty(v: &Value) -> String {
    // a `Value` always serializes (its map keys are strings)
    escape_json(serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()))
}

fn escape_json(s: String) -> String {
    escape_json_with(s, is_unsafe)
}

fn escape_json_with(s: String, unsafe_char: fn(char) -> bool) -> String {
    if !s.chars().any(unsafe_char) {
        return s;
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if unsafe_char(c) {
            // writing to a String cannot fail
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// A time of the API (ms since the epoch) as the CLI shows it, to the
/// minute in UTC (`2026-12-01 14:05 UTC`); `None` for a time out of range.
pub(crate) fn minute_utc(ms: i64) -> Option<String> {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn controls_are_shown_escaped_and_text_stays() {
        let evil = "hello \u{1b}]52;c;aGk=\u{7}\u{1b}[2J\r\u{7f}\u{9b}\u{202e}\u{2066}";
        assert_eq!(
            text(evil),
            "hello \\u{1b}]52;c;aGk=\\u{7}\\u{1b}[2J\\u{d}\\u{7f}\\u{9b}\\u{202e}\\u{2066}"
        );
        assert!(matches!(text("a\tb\nc ▸ é 日本"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_windows_line_end_is_a_line_end_and_a_lone_cr_stays_escaped() {
        assert_eq!(text("a\r\nb\r\n"), "a\nb\n");
        assert_eq!(text("a\rb\r\r\nc\r"), "a\\u{d}b\\u{d}\nc\\u{d}");
    }

    #[test]
    fn json_keeps_the_value_and_escapes_what_serde_leaves() {
        let v = json!({"text": "a\u{1b}b\u{9b}c\u{202e}d\u{7f}", "k\u{85}": 1});
        for printed in [json(&v), json_pretty(&v)] {
            assert!(!printed.chars().any(is_unsafe), "{printed}");
            assert_eq!(serde_json::from_str::<Value>(&printed).unwrap(), v);
        }
    }

    /// `--json` prints the host's numbers as the host sent them: a search
    /// hit's score read and printed again came out one digit off
    /// (`1.8925803899765015` as `…17`; QA) without serde_json's exact
    /// float parsing (feature `float_roundtrip`).
    #[test]
    fn json_prints_a_float_as_the_host_sent_it() {
        for sent in [
            "1.8925803899765015",
            "1.9560270309448242",
            "0.4471386075019837",
        ] {
            let v: Value = serde_json::from_str(&format!("{{\"score\":{sent}}}")).unwrap();
            assert_eq!(json(&v), format!("{{\"score\":{sent}}}"));
        }
    }
}

//! The words of a command text, as the Shell tool's path check reads them
//! (shell_paths.rs): simple commands of shell words, each with where it is
//! in the text and whether it was quoted, and arithmetic expansions told
//! apart from paths.
//!
//! A lexer of its own, not safety/shell_parse.rs, which keeps neither
//! where a word is in the text nor whether it was quoted. Not a full shell
//! parser: what it misreads is checked strictly by the caller (exemptions
//! need a word it understood in a position it recognised).

use std::ops::Range;

/// One simple command of the text: its words, and whether it runs inside
/// a command substitution or subshell (whose output may be spliced into
/// another word: no exemptions there).
#[derive(Debug, Default)]
pub(super) struct Command {
    pub(super) words: Vec<Word>,
    pub(super) nested: bool,
}

/// One shell word of the command text.
#[derive(Debug, Default)]
pub(super) struct Word {
    /// Where it is in the text.
    pub(super) span: Range<usize>,
    /// Its text with quotes and escapes removed.
    pub(super) value: String,
    /// Whether any of it was quoted or escaped.
    pub(super) quoted: bool,
    /// Whether an unquoted part of it holds `/`, `~` or a glob character
    /// (the shell would expand or read it as a path).
    pub(super) loose: bool,
    /// Whether it holds a command substitution (`$(` or a backquote).
    pub(super) substitution: bool,
    /// Whether it is the target of a redirection.
    pub(super) redirect: bool,
    /// Where in `value` a `$` the shell expands starts (unquoted or in
    /// double quotes, not escaped): the value there is not in the text.
    pub(super) expansions: Vec<usize>,
}

/// The text with every `/` inside an arithmetic expansion `$(( … ))`
/// replaced by a space (division, not a path). Only a real expansion is
/// masked: not one in single quotes, escaped or in a comment, and not one
/// holding quotes, escapes, a command substitution or a line break (where
/// the reading could be wrong).
pub(super) fn mask_arithmetic(command: &str) -> String {
    let bytes = command.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    let mut single = false;
    let mut double = false;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\\' if !single => i += 1,
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' if !single
                && !double
                && (i == 0 || bytes[i - 1].is_ascii_whitespace() || bytes[i - 1] == b';') =>
            {
                // a comment, to the end of the line
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'$' if !single && bytes[i..].starts_with(b"$((") => {
                if let Some(end) = arithmetic_end(bytes, i + 3) {
                    let inner = &bytes[i + 3..end];
                    let plain = !inner.windows(2).any(|w| w == b"$(")
                        && !inner
                            .iter()
                            .any(|c| matches!(c, b'\'' | b'"' | b'\\' | b'`' | b'\n' | b'#'));
                    if plain {
                        for c in &mut out[i + 3..end] {
                            if *c == b'/' {
                                *c = b' ';
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    // only ASCII bytes were replaced by ASCII bytes
    String::from_utf8(out).unwrap_or_else(|_| command.to_owned())
}

/// Where the `))` closing an arithmetic expansion whose text starts at
/// `start` begins.
fn arithmetic_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 2usize;
    for (k, b) in bytes[start..].iter().enumerate() {
        match b {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 1 {
                    // `))` closes it; `)` followed by anything else does not
                    return (bytes.get(start + k + 1) == Some(&b')')).then_some(start + k);
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits the text into commands of shell words. Not a full shell parser:
/// what it misreads is checked strictly (exemptions need a word it
/// understood in a position it recognised).
pub(super) fn lex(text: &str) -> Vec<Command> {
    let mut lexer = Lexer::default();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            ' ' | '\t' => lexer.end_word(at),
            '\n' | ';' | '|' | '&' | '(' | ')' | '`' => {
                lexer.end_word(at);
                match c {
                    '(' => lexer.depth += 1,
                    ')' => lexer.depth = lexer.depth.saturating_sub(1),
                    '`' => lexer.in_backquote = !lexer.in_backquote,
                    _ => {}
                }
                lexer.end_command();
            }
            '<' | '>' => {
                lexer.end_word(at);
                lexer.redirect_next = true;
            }
            _ => {
                let w = lexer.word.get_or_insert_with(|| Word {
                    span: at..at,
                    ..Word::default()
                });
                match c {
                    '\'' => {
                        w.quoted = true;
                        for (_, q) in chars.by_ref() {
                            if q == '\'' {
                                break;
                            }
                            w.value.push(q);
                        }
                    }
                    '"' => {
                        w.quoted = true;
                        while let Some((_, q)) = chars.next() {
                            match q {
                                '"' => break,
                                '\\' => {
                                    if let Some((_, e)) = chars.next() {
                                        if !matches!(e, '"' | '\\' | '$' | '`' | '\n') {
                                            w.value.push('\\');
                                        }
                                        w.value.push(e);
                                    }
                                }
                                '`' => {
                                    w.substitution = true;
                                    w.value.push(q);
                                }
                                '$' => {
                                    if chars.peek().is_some_and(|(_, n)| *n == '(') {
                                        w.substitution = true;
                                    }
                                    w.expansions.push(w.value.len());
                                    w.value.push(q);
                                }
                                _ => w.value.push(q),
                            }
                        }
                    }
                    '\\' => {
                        w.quoted = true;
                        if let Some((_, e)) = chars.next() {
                            w.value.push(e);
                        }
                    }
                    _ => {
                        if matches!(c, '/' | '~' | '*' | '?' | '[' | '{' | '}') {
                            w.loose = true;
                        }
                        if c == '$' {
                            if chars.peek().is_some_and(|(_, n)| *n == '(') {
                                w.substitution = true;
                            }
                            w.expansions.push(w.value.len());
                        }
                        w.value.push(c);
                    }
                }
            }
        }
    }
    lexer.end_word(text.len());
    lexer.end_command();
    lexer.done
}

/// The state of [`lex`].
#[derive(Default)]
struct Lexer {
    done: Vec<Command>,
    command: Command,
    word: Option<Word>,
    redirect_next: bool,
    /// Open parentheses (subshells, substitutions) around the position.
    depth: usize,
    in_backquote: bool,
}

impl Lexer {
    fn end_word(&mut self, end: usize) {
        if let Some(mut w) = self.word.take() {
            w.span.end = end;
            w.redirect = std::mem::take(&mut self.redirect_next);
            self.command.nested |= self.depth > 0 || self.in_backquote;
            self.command.words.push(w);
        }
    }

    fn end_command(&mut self) {
        self.redirect_next = false;
        let command = std::mem::take(&mut self.command);
        if !command.words.is_empty() {
            self.done.push(command);
        }
    }
}

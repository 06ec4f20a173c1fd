//! A small POSIX-shell reader for review: enough structure to see which
//! programs a command line runs, with which words, in which pipelines, with
//! which redirections, and what runs inside `$(...)`, backticks, `<(...)`,
//! `( ... )` groups and here-documents.
//!
//! It does not expand variables, globs or aliases, and it does not evaluate
//! anything; where the syntax is unusual it errs towards splitting words
//! (a reviewer that sees more commands is stricter, never laxer). Parsing is
//! linear in the input and allocation-light: a rules decision stays in the
//! microseconds.

/// Deepest nesting of substitutions and groups parsed; deeper text is kept
/// as plain words.
const MAX_DEPTH: u8 = 8;

/// A redirection of a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    /// The operator (`>`, `>>`, `<`, `<<`, `<<<`, `&>`, `>|`, `<>`).
    pub(crate) op: &'static str,
    /// Its target word (for `<<`, the delimiter).
    pub(crate) target: String,
}

impl Redirect {
    /// Whether it writes to its target.
    pub(crate) fn writes(&self) -> bool {
        matches!(self.op, ">" | ">>" | "&>" | "&>>" | ">|" | "<>")
    }
}

/// One simple command: words, redirections, what runs inside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    /// Words with quotes removed (substitutions left as `$()`).
    pub(crate) words: Vec<String>,
    /// Redirections.
    pub(crate) redirects: Vec<Redirect>,
    /// Scripts nested in it: command and process substitutions, and the
    /// body of a `( ... )` group.
    pub(crate) nested: Vec<Script>,
    /// The body of a here-document or here-string fed to it.
    pub(crate) stdin_text: Option<String>,
    /// Which pipeline of its script it belongs to.
    pub(crate) pipeline: usize,
    /// Its position in that pipeline (0 = first).
    pub(crate) stage: usize,
}

/// A parsed command line (or script): its simple commands in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Script {
    /// The simple commands.
    pub(crate) commands: Vec<SimpleCommand>,
}

/// Parses shell text.
pub(crate) fn parse(text: &str) -> Script {
    let mut p = Parser {
        src: text.as_bytes(),
        text,
        at: 0,
    };
    p.list(None, 0)
}

struct Parser<'a> {
    src: &'a [u8],
    text: &'a str,
    at: usize,
}

/// State of the command being read.
#[derive(Default)]
struct Builder {
    script: Script,
    cmd: SimpleCommand,
    word: String,
    in_word: bool,
    redirect: Option<&'static str>,
    /// Here-documents waiting for the next newline: (command index, delimiter, strip tabs).
    heredocs: Vec<(usize, String, bool)>,
    pipeline: usize,
    stage: usize,
}

impl Builder {
    fn end_word(&mut self) {
        if !self.in_word {
            return;
        }
        self.in_word = false;
        let word = std::mem::take(&mut self.word);
        match self.redirect.take() {
            Some(op) => {
                if matches!(op, "<<" | "<<-") {
                    let index = self.script.commands.len();
                    self.heredocs.push((index, word.clone(), op == "<<-"));
                }
                if op == "<<<" {
                    self.cmd.stdin_text = Some(word.clone());
                }
                self.cmd.redirects.push(Redirect {
                    op: if op == "<<-" { "<<" } else { op },
                    target: word,
                });
            }
            None => self.cmd.words.push(word),
        }
    }

    fn end_command(&mut self) {
        self.end_word();
        self.redirect = None;
        let cmd = std::mem::take(&mut self.cmd);
        if !cmd.words.is_empty() || !cmd.redirects.is_empty() || !cmd.nested.is_empty() {
            self.script.commands.push(SimpleCommand {
                pipeline: self.pipeline,
                stage: self.stage,
                ..cmd
            });
        }
    }

    /// `|`: the next command is the next stage of this pipeline.
    fn pipe(&mut self) {
        self.end_command();
        self.stage += 1;
    }

    /// `;`, `&`, `&&`, `||`, newline: a new pipeline starts.
    fn separate(&mut self) {
        self.end_command();
        self.pipeline += 1;
        self.stage = 0;
    }

    fn push(&mut self, c: char) {
        self.in_word = true;
        self.word.push(c);
    }

    fn push_str(&mut self, s: &str) {
        self.in_word = true;
        self.word.push_str(s);
    }
}

impl Parser<'_> {
    fn peek(&self, offset: usize) -> Option<u8> {
        self.src.get(self.at + offset).copied()
    }

    /// The char at the cursor (the cursor is always on a char boundary).
    fn char_here(&self) -> Option<char> {
        self.text.get(self.at..).and_then(|s| s.chars().next())
    }

    /// Reads commands until `close` (`)`) or the end.
    fn list(&mut self, close: Option<u8>, depth: u8) -> Script {
        let mut b = Builder::default();
        while let Some(byte) = self.peek(0) {
            match byte {
                b' ' | b'\t' | b'\r' => {
                    b.end_word();
                    self.at += 1;
                }
                b'\n' => {
                    b.separate();
                    self.at += 1;
                    self.heredoc_bodies(&mut b);
                }
                b'#' if !b.in_word => self.skip_comment(),
                b'\\' => {
                    self.at += 1;
                    match self.char_here() {
                        Some('\n') => self.at += 1,
                        Some(c) => {
                            b.push(c);
                            self.at += c.len_utf8();
                        }
                        None => {}
                    }
                }
                b'\'' => {
                    self.at += 1;
                    let start = self.at;
                    while self.peek(0).is_some_and(|c| c != b'\'') {
                        self.at += 1;
                    }
                    b.push_str(&self.text[start..self.at]);
                    self.at = (self.at + 1).min(self.src.len());
                }
                b'"' => {
                    self.at += 1;
                    self.double_quoted(&mut b, depth);
                }
                b'`' => {
                    self.at += 1;
                    let start = self.at;
                    while self.peek(0).is_some_and(|c| c != b'`') {
                        if self.peek(0) == Some(b'\\') {
                            self.at += 1;
                        }
                        self.at += 1;
                    }
                    let end = self.at.min(self.src.len());
                    self.nest_text(&mut b, start, end, depth);
                    self.at = (self.at + 1).min(self.src.len());
                    b.push_str("$()");
                }
                b'$' => self.dollar(&mut b, depth),
                b'|' => {
                    if self.peek(1) == Some(b'|') {
                        self.at += 2;
                        b.separate();
                    } else {
                        self.at += if self.peek(1) == Some(b'&') { 2 } else { 1 };
                        b.pipe();
                    }
                }
                b'&' => match self.peek(1) {
                    Some(b'&') => {
                        self.at += 2;
                        b.separate();
                    }
                    Some(b'>') => {
                        b.end_word();
                        let append = self.peek(2) == Some(b'>');
                        self.at += if append { 3 } else { 2 };
                        b.redirect = Some(if append { "&>>" } else { "&>" });
                    }
                    _ => {
                        self.at += 1;
                        b.separate();
                    }
                },
                b';' => {
                    self.at += 1;
                    b.separate();
                }
                b'(' if !b.in_word => {
                    self.at += 1;
                    if depth < MAX_DEPTH {
                        let inner = self.list(Some(b')'), depth + 1);
                        b.cmd.nested.push(inner);
                    }
                }
                b')' if close == Some(b')') => {
                    self.at += 1;
                    b.end_command();
                    return b.script;
                }
                b'<' | b'>' if self.peek(1) == Some(b'(') && !b.in_word => {
                    // process substitution: runs a command, reads like a file name
                    self.at += 2;
                    if depth < MAX_DEPTH {
                        let inner = self.list(Some(b')'), depth + 1);
                        b.cmd.nested.push(inner);
                    }
                    b.push_str("/dev/fd/63");
                }
                b'<' | b'>' => self.redirect(&mut b),
                _ => {
                    let c = self.char_here().unwrap_or('\u{fffd}');
                    b.push(c);
                    self.at += c.len_utf8().max(1);
                }
            }
        }
        b.end_command();
        b.script
    }

    fn skip_comment(&mut self) {
        while self.peek(0).is_some_and(|c| c != b'\n') {
            self.at += 1;
        }
    }

    fn redirect(&mut self, b: &mut Builder) {
        // a word of digits right before is a file descriptor, not a word
        if b.in_word && b.word.bytes().all(|c| c.is_ascii_digit()) {
            b.word.clear();
            b.in_word = false;
        }
        b.end_word();
        let rest = &self.src[self.at..];
        let op: &'static str = if rest.starts_with(b"<<<") {
            "<<<"
        } else if rest.starts_with(b"<<-") {
            "<<-"
        } else if rest.starts_with(b"<<") {
            "<<"
        } else if rest.starts_with(b"<>") {
            "<>"
        } else if rest.starts_with(b">>") {
            ">>"
        } else if rest.starts_with(b">|") {
            ">|"
        } else if rest.starts_with(b">&") || rest.starts_with(b"<&") {
            // duplication (2>&1): its target is a descriptor
            self.at += 2;
            while self
                .peek(0)
                .is_some_and(|c| c.is_ascii_digit() || c == b'-')
            {
                self.at += 1;
            }
            return;
        } else if rest.starts_with(b">") {
            ">"
        } else {
            "<"
        };
        self.at += op.len();
        b.redirect = Some(op);
    }

    fn double_quoted(&mut self, b: &mut Builder, depth: u8) {
        b.in_word = true;
        while let Some(byte) = self.peek(0) {
            match byte {
                b'"' => {
                    self.at += 1;
                    return;
                }
                b'\\' => {
                    self.at += 1;
                    if let Some(c) = self.char_here() {
                        if !matches!(c, '"' | '\\' | '$' | '`' | '\n') {
                            b.push('\\');
                        }
                        if c != '\n' {
                            b.push(c);
                        }
                        self.at += c.len_utf8();
                    }
                }
                b'$' => self.dollar(b, depth),
                b'`' => {
                    self.at += 1;
                    let start = self.at;
                    while self.peek(0).is_some_and(|c| c != b'`' && c != b'"') {
                        self.at += 1;
                    }
                    let end = self.at;
                    self.nest_text(b, start, end, depth);
                    if self.peek(0) == Some(b'`') {
                        self.at += 1;
                    }
                    b.push_str("$()");
                }
                _ => {
                    let c = self.char_here().unwrap_or('\u{fffd}');
                    b.push(c);
                    self.at += c.len_utf8().max(1);
                }
            }
        }
    }

    /// `$(...)`, `$((...))`, `${...}`, `$NAME`.
    fn dollar(&mut self, b: &mut Builder, depth: u8) {
        match (self.peek(1), self.peek(2)) {
            (Some(b'('), Some(b'(')) => {
                // arithmetic: kept as text
                let start = self.at;
                self.at += 3;
                let mut open = 2usize;
                while let Some(c) = self.peek(0) {
                    self.at += 1;
                    match c {
                        b'(' => open += 1,
                        b')' => {
                            open -= 1;
                            if open == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                b.push_str(&self.text[start..self.at]);
            }
            (Some(b'('), _) => {
                self.at += 2;
                if depth < MAX_DEPTH {
                    let inner = self.list(Some(b')'), depth + 1);
                    b.cmd.nested.push(inner);
                } else {
                    while self.peek(0).is_some_and(|c| c != b')') {
                        self.at += 1;
                    }
                    self.at = (self.at + 1).min(self.src.len());
                }
                b.push_str("$()");
            }
            (Some(b'{'), _) => {
                let start = self.at;
                while self.peek(0).is_some_and(|c| c != b'}') {
                    self.at += 1;
                }
                self.at = (self.at + 1).min(self.src.len());
                b.push_str(&self.text[start..self.at]);
            }
            _ => {
                b.push('$');
                self.at += 1;
            }
        }
    }

    /// Parses `src[start..end]` as a nested script of the current command.
    fn nest_text(&mut self, b: &mut Builder, start: usize, end: usize, depth: u8) {
        if depth < MAX_DEPTH
            && let Some(inner) = self.text.get(start..end)
        {
            let mut p = Parser {
                src: inner.as_bytes(),
                text: inner,
                at: 0,
            };
            b.cmd.nested.push(p.list(None, depth + 1));
        }
    }

    /// After a newline: the bodies of pending here-documents, line by line
    /// up to their delimiters.
    fn heredoc_bodies(&mut self, b: &mut Builder) {
        for (index, delimiter, strip_tabs) in std::mem::take(&mut b.heredocs) {
            let mut body = String::new();
            while self.at < self.src.len() {
                let end = self.src[self.at..]
                    .iter()
                    .position(|c| *c == b'\n')
                    .map_or(self.src.len(), |p| self.at + p);
                let line = &self.text[self.at..end];
                self.at = (end + 1).min(self.src.len());
                let trimmed = if strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if trimmed == delimiter {
                    break;
                }
                body.push_str(trimmed);
                body.push('\n');
            }
            if let Some(cmd) = b.script.commands.get_mut(index) {
                cmd.stdin_text = Some(body);
            }
        }
    }
}

#[cfg(test)]
#[path = "shell_parse_tests.rs"]
mod tests;

//! Read's window over a file: the lines it asks for, streamed through a
//! fixed buffer, so a file of any size costs the output limit in memory.
//!
//! A window starts at a line (and a character of that line, to continue a
//! line longer than the output limit) and stops at the end of the file,
//! after `limit` lines, or at the byte budget. At the budget it stops after
//! the last whole line, or, when the first line alone is over the budget,
//! inside it; [`Stop`] says where the next window starts, so a file can be
//! read to its last byte, window after window.
//!
//! Text is UTF-8 without NUL bytes; the bytes scanned (skipped lines
//! included) are checked as they stream by.
//!
//! A window also keeps [`Window::context`] bytes of the file from just
//! before it and reads as many past its end ([`Shown::before`],
//! [`Shown::after`]): a secret that a cut goes through is found whole
//! there, so the part of it in the window can be hidden, and nothing else
//! (`Redactor::hide_cut_parts`).

use std::io::ErrorKind;

use tokio_util::sync::CancellationToken;

/// Bytes read from the file at a time.
const CHUNK: usize = 64 * 1024;

/// What Read asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    /// First line, 1-based.
    pub line: u64,
    /// First character of that line, 1-based.
    pub column: u64,
    /// Most lines shown.
    pub limit: u64,
    /// Most bytes of text shown (a line's final newline may go one over).
    pub budget: usize,
    /// Most bytes of the file kept from before the window, and read past
    /// its end where it was cut.
    pub context: usize,
}

/// Where a window stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// At the end of the file.
    Eof,
    /// After `limit` lines; the file goes on at line `next`.
    Limit {
        /// The next line.
        next: u64,
    },
    /// At the byte budget, after whole lines; the file goes on at line `next`.
    Budget {
        /// The next line.
        next: u64,
    },
    /// At the byte budget inside line `line`, which goes on at character
    /// `column`.
    MidLine {
        /// The line that was cut.
        line: u64,
        /// Its first character not shown, 1-based.
        column: u64,
    },
    /// The window starts after the last line; the file has `lines` lines.
    PastEnd {
        /// Lines in the file.
        lines: u64,
    },
    /// The window starts past the end of line `line`, which has `chars`
    /// characters.
    PastLineEnd {
        /// The line.
        line: u64,
        /// Its characters, without the newline.
        chars: u64,
    },
}

/// The text of a window and where it stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shown {
    /// The file's bytes in the window, newlines included.
    pub text: String,
    /// Where it stopped.
    pub stop: Stop,
    /// The file's bytes just before the window, at most
    /// [`Window::context`] of them (fewer where the file starts; the first
    /// may be a part of a character).
    pub before: Vec<u8>,
    /// The file's bytes just after the window where it was cut out of the
    /// file ([`Stop::Limit`], [`Stop::Budget`], [`Stop::MidLine`]), at
    /// most [`Window::context`] of them (fewer where the file ends, or
    /// where bytes that are not UTF-8 cut them short: no secret goes on
    /// through those); none otherwise.
    pub after: Vec<u8>,
}

/// Why a window could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WindowError {
    /// Line `line` has bytes that are not UTF-8, or a NUL byte.
    #[error("line {line} is not text")]
    NotText {
        /// The line.
        line: u64,
    },
    /// The turn was cancelled while reading.
    #[error("cancelled")]
    Cancelled,
    /// Reading failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads `window` from `source`, checking `cancel` between chunks.
pub(crate) fn read_window(
    mut source: impl std::io::Read,
    window: Window,
    cancel: &CancellationToken,
) -> Result<Shown, WindowError> {
    let mut cursor = Cursor::new(window);
    // room for a character split across two chunks
    let mut buf = vec![0u8; CHUNK + 4];
    let mut carry = 0;
    while !matches!(cursor.phase, Phase::Done) {
        if cancel.is_cancelled() {
            return Err(WindowError::Cancelled);
        }
        let n = match source.read(&mut buf[carry..]) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            if carry > 0 {
                // the file ends inside a character
                return cursor.not_text_follows();
            }
            cursor.eof();
            break;
        }
        let total = carry + n;
        let valid = match std::str::from_utf8(&buf[..total]) {
            Ok(text) => {
                cursor.feed(text)?;
                cursor.remember(text);
                total
            }
            Err(e) => {
                let valid = e.valid_up_to();
                let text = std::str::from_utf8(&buf[..valid])
                    .map_err(|_| WindowError::NotText { line: cursor.line })?;
                cursor.feed(text)?;
                cursor.remember(text);
                if e.error_len().is_some() {
                    // no text, so no secret, goes on through these bytes
                    return cursor.not_text_follows();
                }
                valid
            }
        };
        buf.copy_within(valid..total, 0);
        carry = total - valid;
    }
    if cursor.wants_after() {
        // the start of a character split across chunks, then on
        cursor.add_after(&buf[..carry]);
        while cursor.wants_after() {
            if cancel.is_cancelled() {
                return Err(WindowError::Cancelled);
            }
            let n = match source.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                break;
            }
            cursor.add_after(&buf[..n]);
        }
    }
    Ok(cursor.shown())
}

/// `kept` followed by `more`, cut to its last `most` bytes.
fn keep_last(kept: &mut Vec<u8>, more: &[u8], most: usize) {
    if more.len() >= most {
        kept.clear();
        kept.extend_from_slice(&more[more.len() - most..]);
    } else {
        kept.extend_from_slice(more);
        let over = kept.len().saturating_sub(most);
        kept.drain(..over);
    }
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Skipping lines before the window.
    Skip,
    /// Skipping `left` characters of the first line.
    Column { left: u64 },
    /// Collecting text.
    Emit,
    /// `limit` lines shown; any further byte means the file goes on.
    AfterLimit,
    /// Stopped; `end` is set.
    Done,
}

#[derive(Debug)]
struct Cursor {
    window: Window,
    phase: Phase,
    /// The line the next byte belongs to.
    line: u64,
    /// Whether no byte of `line` has been seen yet.
    at_line_start: bool,
    out: String,
    /// Where `line` starts in `out`.
    line_start: usize,
    /// The character of `line` at `line_start`.
    line_column: u64,
    /// Whole lines in `out`.
    shown_lines: u64,
    stop: Stop,
    /// The last bytes fed while the window had not started yet.
    history: Vec<u8>,
    /// The bytes just before the window.
    before: Vec<u8>,
    /// The bytes just after the window, once it is cut.
    after: Vec<u8>,
}

impl Cursor {
    fn new(window: Window) -> Self {
        Self {
            window,
            phase: Phase::Skip,
            line: 1,
            at_line_start: true,
            out: String::new(),
            line_start: 0,
            line_column: window.column.max(1),
            shown_lines: 0,
            stop: Stop::Eof,
            history: Vec::new(),
            before: Vec::new(),
            after: Vec::new(),
        }
    }

    /// Keeps the end of `fed` while the window has not started: the
    /// bytes before it are the last ones fed then.
    fn remember(&mut self, fed: &str) {
        if matches!(self.phase, Phase::Skip | Phase::Column { .. }) {
            keep_last(&mut self.history, fed.as_bytes(), self.window.context);
        }
    }

    /// Whether the window was cut out of the file and fewer than
    /// [`Window::context`] bytes after it are known.
    fn wants_after(&self) -> bool {
        let cut = match self.stop {
            Stop::Limit { .. } | Stop::Budget { .. } | Stop::MidLine { .. } => true,
            Stop::Eof | Stop::PastEnd { .. } | Stop::PastLineEnd { .. } => false,
        };
        cut && matches!(self.phase, Phase::Done) && self.after.len() < self.window.context
    }

    /// Takes bytes that follow the window, as many as are wanted.
    fn add_after(&mut self, bytes: &[u8]) {
        let room = self.window.context.saturating_sub(self.after.len());
        self.after
            .extend_from_slice(&bytes[..room.min(bytes.len())]);
    }

    fn finish(&mut self, stop: Stop) {
        self.stop = stop;
        self.phase = Phase::Done;
    }

    fn not_text(&self, text: &str) -> Result<(), WindowError> {
        if text.contains('\0') {
            Err(WindowError::NotText { line: self.line })
        } else {
            Ok(())
        }
    }

    /// Takes the next piece of the file.
    fn feed(&mut self, chunk: &str) -> Result<(), WindowError> {
        let mut text = chunk;
        while !text.is_empty() {
            match self.phase {
                Phase::Done => return Ok(()),
                Phase::AfterLimit => {
                    self.finish(Stop::Limit { next: self.line });
                    self.add_after(text.as_bytes());
                    return Ok(());
                }
                Phase::Skip if self.line >= self.window.line => {
                    self.phase = Phase::Column {
                        left: self.window.column.max(1) - 1,
                    };
                }
                Phase::Skip => match text.find('\n') {
                    Some(i) => {
                        self.not_text(&text[..i])?;
                        text = &text[i + 1..];
                        self.line += 1;
                        self.at_line_start = true;
                    }
                    None => {
                        self.not_text(text)?;
                        text = "";
                        self.at_line_start = false;
                    }
                },
                Phase::Column { left: 0 } => {
                    // the window starts here: what came before it is the
                    // kept history and this chunk so far
                    let fed = &chunk.as_bytes()[..chunk.len() - text.len()];
                    let mut before = std::mem::take(&mut self.history);
                    keep_last(&mut before, fed, self.window.context);
                    self.before = before;
                    self.phase = Phase::Emit;
                }
                Phase::Column { mut left } => {
                    let mut rest = None;
                    for (i, ch) in text.char_indices() {
                        if ch == '\n' {
                            let chars = self.window.column - 1 - left;
                            self.finish(Stop::PastLineEnd {
                                line: self.line,
                                chars,
                            });
                            return Ok(());
                        }
                        if ch == '\0' {
                            return Err(WindowError::NotText { line: self.line });
                        }
                        left -= 1;
                        if left == 0 {
                            rest = Some(&text[i + ch.len_utf8()..]);
                            break;
                        }
                    }
                    self.at_line_start = false;
                    self.phase = Phase::Column { left };
                    text = rest.unwrap_or("");
                }
                Phase::Emit => text = self.emit(text)?,
            }
        }
        Ok(())
    }

    /// Collects from `text` up to the end of the current line; returns the
    /// rest.
    fn emit<'a>(&mut self, text: &'a str) -> Result<&'a str, WindowError> {
        let (piece, rest, ends_line) = match text.find('\n') {
            Some(i) => (&text[..=i], &text[i + 1..], true),
            None => (text, "", false),
        };
        self.not_text(piece)?;
        let content = piece.len() - usize::from(ends_line);
        if self.out.len() + content > self.window.budget {
            if self.shown_lines > 0 {
                // end after the last whole line
                let cut_off = self.out.split_off(self.line_start);
                self.finish(Stop::Budget { next: self.line });
                for bytes in [cut_off.as_str(), piece, rest] {
                    self.add_after(bytes.as_bytes());
                }
            } else {
                // the first line alone is over the budget: cut it
                let room = self.window.budget.saturating_sub(self.out.len());
                let mut cut = room.min(content);
                while !piece.is_char_boundary(cut) {
                    cut -= 1;
                }
                if cut == 0 && self.out.len() == self.line_start {
                    // a budget under one character still shows one
                    cut = piece.chars().next().map_or(0, char::len_utf8);
                }
                self.out.push_str(&piece[..cut]);
                let chars = self.out[self.line_start..].chars().count() as u64;
                self.finish(Stop::MidLine {
                    line: self.line,
                    column: self.line_column + chars,
                });
                for bytes in [&piece[cut..], rest] {
                    self.add_after(bytes.as_bytes());
                }
            }
            return Ok("");
        }
        self.out.push_str(piece);
        self.at_line_start = false;
        if ends_line {
            self.line += 1;
            self.at_line_start = true;
            self.shown_lines += 1;
            self.line_start = self.out.len();
            self.line_column = 1;
            if self.shown_lines >= self.window.limit {
                self.phase = Phase::AfterLimit;
            }
        }
        Ok(rest)
    }

    /// Bytes that are not text follow what was fed: an error if the
    /// window still needs them; after `limit` lines they only mean that
    /// the file goes on.
    fn not_text_follows(mut self) -> Result<Shown, WindowError> {
        match self.phase {
            Phase::AfterLimit => {
                self.finish(Stop::Limit { next: self.line });
                Ok(self.shown())
            }
            Phase::Done => Ok(self.shown()),
            Phase::Skip | Phase::Column { .. } | Phase::Emit => {
                Err(WindowError::NotText { line: self.line })
            }
        }
    }

    /// The file ended.
    fn eof(&mut self) {
        match self.phase {
            Phase::Skip => {
                let lines = if self.at_line_start {
                    self.line - 1
                } else {
                    self.line
                };
                self.finish(Stop::PastEnd { lines });
            }
            Phase::Column { left } if left > 0 => {
                let chars = self.window.column - 1 - left;
                self.finish(Stop::PastLineEnd {
                    line: self.line,
                    chars,
                });
            }
            Phase::Column { .. } | Phase::Emit | Phase::AfterLimit => self.finish(Stop::Eof),
            Phase::Done => {}
        }
    }

    fn shown(self) -> Shown {
        Shown {
            text: self.out,
            stop: self.stop,
            before: self.before,
            after: self.after,
        }
    }
}

#[cfg(test)]
#[path = "read_window_tests.rs"]
mod tests;

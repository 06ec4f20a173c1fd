//! Values that must not leak: wrappers that refuse to print, and a scrubber
//! for text that may contain them.
//!
//! - [`Sensitive<T>`] wraps any sensitive value: `Debug` and `Display` print
//!   `[redacted]`, there is no `Serialize` impl (so a struct holding one cannot
//!   derive it by accident), and [`Sensitive::expose`] is the one way in.
//! - [`Secret`] is a string credential: the same, plus a best-effort wipe of
//!   its buffer on drop.
//! - [`Redactor`] replaces every occurrence of known secret values in
//!   arbitrary text (tool output, log lines) with `[redacted]`; its
//!   [`ScrubStream`] does the same on streamed chunks, holding back just
//!   enough text that a secret split across chunks is still caught. A secret
//!   handed to a Shell command through its environment is scrubbed from the
//!   command's output before the model or a log sees it.
//! - A redactor may also scrub a set of values shared with others and
//!   changed while they live ([`Redactor::shared_set`]): every person's
//!   secrets, which a command of one person's bot may find in the
//!   argument list of another's (`/proc/<pid>/cmdline`).
//!
//! ```compile_fail
//! // No `Serialize` impl: this does not compile.
//! let token = botfleet_actors::safety::Sensitive::new("hunter2".to_owned());
//! let _ = serde_json::to_string(&token);
//! ```

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// What the wrappers print and what [`Redactor`] writes instead of a secret.
pub const REDACTED: &str = "[redacted]";

/// The fewest chars of a secret hidden where a cut went through it
/// ([`Redactor::start_at_end`]).
pub(crate) const PARTIAL_MIN_CHARS: usize = 4;

/// Which ends of a piece of a longer text were cut out of it, through
/// whatever was there ([`Redactor::scrub_piece`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cuts {
    /// The longer text goes on before the piece.
    pub start: bool,
    /// The longer text goes on after the piece.
    pub end: bool,
}

/// Replaces known secret values in text with [`REDACTED`].
///
/// Each secret is searched for as is, JSON-escaped and percent-encoded (the
/// forms it takes when a tool echoes it inside JSON or a URL). Occurrences
/// may overlap; the union of all of them is replaced, so no fragment of a
/// secret survives next to a redaction. Empty secrets are ignored; very short
/// ones redact a lot of innocent text, which is the safe side to err on.
/// Secrets transformed in other ways (base64, reversed) are not found.
///
/// Besides its own secrets it may scrub those of a shared set, as that set
/// stands at each scrub ([`Redactor::shared_set`]).
#[derive(Clone, Default)]
pub struct Redactor {
    patterns: Vec<Secret>,
    max_len: usize,
    /// Values shared with other redactors, changed while they live.
    shared: Option<Arc<shared::SharedSecrets>>,
    /// Only this person's values of `shared` are scrubbed
    /// ([`Redactor::also_scrubbing_of`]); `None`: every person's.
    shared_owner: Option<Arc<str>>,
    /// Values hidden only from a model server's error texts, not scrubbed
    /// from tool output ([`Redactor::also_hiding_from_model_errors`]).
    model_only: Vec<Secret>,
}

impl Redactor {
    /// A redactor for `secrets`.
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut patterns: Vec<Secret> = Vec::new();
        for secret in secrets {
            let raw = secret.as_ref();
            if raw.is_empty() {
                continue;
            }
            for form in forms(raw) {
                if !patterns.iter().any(|p| p.expose() == form) {
                    patterns.push(Secret::new(form));
                }
            }
        }
        let max_len = patterns.iter().map(|p| p.expose().len()).max().unwrap_or(0);
        Self {
            patterns,
            max_len,
            shared: None,
            shared_owner: None,
            model_only: Vec::new(),
        }
    }

    /// A redactor with no secret of its own and a new, empty shared set
    /// of values, which [`Redactor::set_shared`] changes and which every
    /// redactor given it ([`Redactor::also_scrubbing`]) scrubs too, as the
    /// set stands when it scrubs: the vault's set of every person's
    /// secrets (`vault.rs`).
    pub fn shared_set() -> Self {
        Self {
            shared: Some(Arc::default()),
            ..Self::default()
        }
    }

    /// This redactor, scrubbing the values of `other`'s shared set too
    /// ([`Redactor::shared_set`]); unchanged when `other` has none.
    #[must_use]
    pub fn also_scrubbing(mut self, other: &Redactor) -> Self {
        if let Some(shared) = &other.shared {
            self.shared = Some(Arc::clone(shared));
        }
        self
    }

    /// Makes `values` the values of `owner` in its shared set (none:
    /// `owner` has none now), for every redactor sharing it from its next
    /// scrub on; true when that changed the set. False, and nothing
    /// changes, without a shared set.
    pub fn set_shared<'v>(&self, owner: &str, values: impl IntoIterator<Item = &'v str>) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|shared| shared.set_owner(owner, values))
    }

    /// True when there is nothing to redact (nor a shared set that may
    /// come to hold something).
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty() && self.shared.is_none() && self.model_only.is_empty()
    }

    /// The shared set's search as the set stands, if it has one that is
    /// not empty.
    fn shared_now(&self) -> Option<Arc<shared::Matcher>> {
        self.shared
            .as_ref()
            .map(|shared| match &self.shared_owner {
                Some(owner) => shared.current_of(owner),
                None => shared.current(),
            })
            .filter(|now| !now.is_empty())
    }

    /// The texts it hides from a model server's errors: each of its own
    /// secrets as is, JSON-escaped and percent-encoded, and those it hides
    /// only there ([`Redactor::also_hiding_from_model_errors`]); not those
    /// of a shared set, which change while it lives. For a scrubber that
    /// must search for them itself: a model provider cleans an error text
    /// of them before it cuts the text, as a cut through a secret leaves a
    /// start of it that [`Redactor::scrub`] no longer finds. Every call
    /// site is a place where they may leak.
    pub fn expose_patterns(&self) -> impl Iterator<Item = &str> {
        self.patterns
            .iter()
            .chain(&self.model_only)
            .map(Secret::expose)
    }

    /// `text` with every secret replaced; borrowed when nothing matched.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let ranges = self.find(text);
        if ranges.is_empty() {
            return Cow::Borrowed(text);
        }
        Cow::Owned(replaced(text, &ranges))
    }

    /// A scrubber for text that arrives in chunks.
    pub fn stream(&self) -> ScrubStream<'_> {
        ScrubStream {
            redactor: self,
            pending: String::new(),
        }
    }

    /// Bytes of the longest text it replaces (0 without secrets), its
    /// shared set's as it stands included: a text read this far past where
    /// it is cut holds every secret that starts before the cut whole
    /// ([`Redactor::scrub_cut`]).
    pub fn longest(&self) -> usize {
        let shared = self.shared_now().map_or(0, |now| now.longest());
        self.max_len.max(shared)
    }

    /// `text`, a piece of a longer text, scrubbed: every secret in it is
    /// replaced, and so is, at an end where it was cut out of the longer
    /// text (`cuts`), a part of a secret that the cut went through (the
    /// end of one at its start, the start of one at its end, the whole
    /// piece when cut at both ends out of one; see
    /// [`Redactor::start_at_end`]), as no search for the whole secret
    /// finds such a part. For a piece whose text around it is not known;
    /// where it is, [`Redactor::hide_cut_parts`] need not guess.
    pub fn scrub_piece<'a>(&self, text: &'a str, cuts: Cuts) -> Cow<'a, str> {
        let shared = self.shared_now();
        // not the values hidden only from model errors: a cut through one
        // hidden here would tell its start
        let patterns = || {
            self.patterns
                .iter()
                .map(Secret::expose)
                .chain(shared.iter().flat_map(|now| now.patterns()))
        };
        if cuts.start
            && cuts.end
            && text.chars().count() >= PARTIAL_MIN_CHARS
            && patterns().any(|p| p.contains(text))
        {
            // cut out of the middle of a secret (a line of a key file)
            return Cow::Owned(REDACTED.to_owned());
        }
        let mut ranges = self.find(text);
        let head = if cuts.start {
            Self::end_at_start(text, patterns())
        } else {
            0
        };
        let tail = if cuts.end {
            Self::start_at_end(text, patterns())
        } else {
            0
        };
        if head == 0 && tail == 0 {
            return self.scrub(text);
        }
        if head > 0 {
            ranges.insert(0, 0..head);
        }
        if tail > 0 {
            ranges.push(text.len() - tail..text.len());
        }
        Cow::Owned(replaced(text, &merged(ranges)))
    }

    /// `text` scrubbed and cut to at most `max_bytes` of its bytes (on a
    /// char boundary), and how many of its bytes that shows. The secrets
    /// are found before the cut: one that the cut would go through is
    /// left out whole (the cut moves to its start). A secret that goes on
    /// past the end of `text` cannot be found whole; a start of one that
    /// the cut leaves at the end is replaced too ([`Redactor::scrub_piece`]).
    /// A caller that read [`Redactor::longest`] bytes past `max_bytes`
    /// has every secret that starts before the cut whole.
    pub fn scrub_cut(&self, text: &str, max_bytes: usize) -> (String, usize) {
        if text.len() <= max_bytes {
            return (self.scrub(text).into_owned(), text.len());
        }
        let mut end = max_bytes;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if let Some(through) = self
            .find(text)
            .into_iter()
            .find(|r| r.start < end && end < r.end)
        {
            end = through.start;
        }
        let shown = self.scrub_piece(
            &text[..end],
            Cuts {
                start: false,
                end: true,
            },
        );
        (shown.into_owned(), end)
    }

    /// Bytes at the end of `text` that are the start of one of `secrets`
    /// (a proper prefix of [`PARTIAL_MIN_CHARS`] chars or more), the
    /// longest such; 0 for none. A text cut there was cut inside that
    /// secret. Shorter parts are let through: hiding every cut text that
    /// ends in the first letter of a secret would garble much and hide
    /// little.
    pub(crate) fn start_at_end<'s>(
        text: &str,
        secrets: impl IntoIterator<Item = &'s str>,
    ) -> usize {
        secrets
            .into_iter()
            .filter_map(|secret| {
                // the text's last chars, fewer bytes than the secret
                let mut from = text.len().saturating_sub(secret.len().saturating_sub(1));
                while !text.is_char_boundary(from) {
                    from += 1;
                }
                let tail = &text[from..];
                let chars = tail.chars().count();
                // the first (longest) part that fits is the one
                tail.char_indices()
                    .take(chars.saturating_sub(PARTIAL_MIN_CHARS - 1))
                    .map(|(at, _)| &tail[at..])
                    .find(|part| secret.starts_with(part))
                    .map(str::len)
            })
            .max()
            .unwrap_or(0)
    }

    /// Bytes at the start of `text` that are the end of one of `secrets`
    /// (a proper suffix of [`PARTIAL_MIN_CHARS`] chars or more), the
    /// longest such; 0 for none: the mirror of [`Redactor::start_at_end`],
    /// for a text cut out after the start of a secret.
    pub(crate) fn end_at_start<'s>(
        text: &str,
        secrets: impl IntoIterator<Item = &'s str>,
    ) -> usize {
        secrets
            .into_iter()
            .filter_map(|secret| {
                // the text's first chars, fewer bytes than the secret
                let mut to = text.len().min(secret.len().saturating_sub(1));
                while !text.is_char_boundary(to) {
                    to -= 1;
                }
                let head = &text[..to];
                let chars = head.chars().count();
                head.char_indices()
                    .rev()
                    .take(chars.saturating_sub(PARTIAL_MIN_CHARS - 1))
                    .map(|(at, c)| &head[..at + c.len_utf8()])
                    .find(|part| secret.ends_with(part))
                    .map(str::len)
            })
            .max()
            .unwrap_or(0)
    }

    /// Sorted, merged byte ranges of every (possibly overlapping)
    /// occurrence, of its own secrets and of its shared set's.
    fn find(&self, text: &str) -> Vec<Range<usize>> {
        let mut found: Vec<Range<usize>> = match self.shared_now() {
            Some(now) => now.occurrences(text.as_bytes()),
            None => Vec::new(),
        };
        for pattern in &self.patterns {
            let pattern = pattern.expose();
            let step = pattern.chars().next().map_or(1, char::len_utf8);
            let mut from = 0;
            while let Some(offset) = text.get(from..).and_then(|rest| rest.find(pattern)) {
                let start = from + offset;
                found.push(start..start + pattern.len());
                from = start + step;
            }
        }
        // a marker an earlier scrub wrote stays whole: a value found only
        // inside one (`e` of `[redacted]`) turned a second scrub's output
        // into `[r[redacted]dact[redacted]d]` (QA, 2026-12-06)
        if !found.is_empty() && text.contains(REDACTED) {
            let markers: Vec<Range<usize>> = text
                .match_indices(REDACTED)
                .map(|(at, m)| at..at + m.len())
                .collect();
            found.retain(|r| !markers.iter().any(|m| m.start <= r.start && r.end <= m.end));
        }
        merged(found)
    }
}

/// `ranges` sorted, overlapping and adjacent ones merged.
fn merged(mut ranges: Vec<Range<usize>>) -> Vec<Range<usize>> {
    ranges.sort_unstable_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            Some(_) | None => merged.push(range),
        }
    }
    merged
}

/// `text` with each of `ranges` (sorted, disjoint) replaced by [`REDACTED`].
fn replaced(text: &str, ranges: &[Range<usize>]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for range in ranges {
        out.push_str(&text[at..range.start]);
        out.push_str(REDACTED);
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("patterns", &self.patterns.len())
            .finish()
    }
}

/// Scrubs a stream of chunks; see [`Redactor::stream`].
///
/// Output lags input by less than the longest secret: text that could still
/// be the start of a secret is held until the next chunk or
/// [`finish`](Self::finish).
#[derive(Debug)]
pub struct ScrubStream<'r> {
    redactor: &'r Redactor,
    pending: String,
}

impl ScrubStream<'_> {
    /// Takes the next chunk and returns the text that is now safe to pass on.
    pub fn push(&mut self, chunk: &str) -> String {
        self.pending.push_str(chunk);
        let hold = self.redactor.longest().saturating_sub(1);
        let mut boundary = self.pending.len().saturating_sub(hold);
        while !self.pending.is_char_boundary(boundary) {
            boundary -= 1;
        }
        // Everything before `boundary` is final: an occurrence starting there
        // ends inside `pending`. A redaction reaching it is held whole, since
        // an overlapping or adjacent secret may still be arriving.
        let mut out = String::with_capacity(boundary + REDACTED.len());
        let mut at = 0;
        let mut emit_to = boundary;
        for range in self.redactor.find(&self.pending) {
            if range.start >= boundary {
                break;
            }
            if range.end >= boundary {
                emit_to = range.start;
                break;
            }
            out.push_str(&self.pending[at..range.start]);
            out.push_str(REDACTED);
            at = range.end;
        }
        out.push_str(&self.pending[at..emit_to]);
        self.pending.drain(..emit_to);
        out
    }

    /// Returns the rest of the text once the stream has ended.
    pub fn finish(self) -> String {
        self.redactor.scrub(&self.pending).into_owned()
    }
}

/// The texts a secret is searched for as: `raw` as is, JSON-escaped and
/// percent-encoded, in the forms common encoders write (each once).
///
/// JSON: as serde writes it, and with every character past ASCII (and `<`,
/// `>`, `&`) as `\u` escapes, as Python's `json.dumps` and Go's encoder
/// do; each also with `/` as `\/`, as PHP's `json_encode` does. Percent: every byte but the unreserved ones encoded, and `/` kept
/// too (Python's `quote` by default), with `+` for a space (forms), each
/// with upper- and lowercase hex. (QA: an AWS-style key, holding `/` and
/// `+`, printed with Python's `quote` reached the model and the
/// transcript.)
pub(crate) fn forms(raw: &str) -> impl Iterator<Item = String> {
    // a value with whitespace at an end (a PEM key's final newline, a
    // pasted one) is scrubbed without it too: a command prints it so
    // (`$(printenv X)` drops a trailing newline), and the value as stored
    // was missed (QA: the token reached the transcript)
    let trimmed = raw.trim();
    let mut out: Vec<String> = if trimmed.is_empty() || trimmed == raw {
        forms_of(raw)
    } else {
        let mut both = forms_of(raw);
        both.extend(forms_of(trimmed));
        both
    };
    let mut seen = std::collections::HashSet::new();
    out.retain(|form| seen.insert(form.clone()));
    out.into_iter()
}

/// [`forms`] of `raw` as it is.
fn forms_of(raw: &str) -> Vec<String> {
    let mut out = vec![raw.to_owned()];
    out.extend(json_escaped(raw));
    out.extend(json_ascii_escaped(raw, false));
    out.extend(json_ascii_escaped(raw, true));
    // each JSON form with `/` as `\/` too, as PHP's `json_encode` and some
    // Java encoders write it (QA: a key holding `/`, echoed so in a model
    // server's error body, reached the turn's notice and the log)
    if raw.contains('/') {
        let json: Vec<String> = std::iter::once(raw.to_owned())
            .chain(json_escaped(raw))
            .chain(json_ascii_escaped(raw, false))
            .chain(json_ascii_escaped(raw, true))
            .collect();
        out.extend(json.iter().map(|form| form.replace('/', "\\/")));
    }
    for keep_slash in [false, true] {
        for space_plus in [false, true] {
            for lower in [false, true] {
                out.extend(percent_encoded(raw, keep_slash, space_plus, lower));
            }
        }
    }
    out
}

/// `raw` as it appears inside a JSON string, when that differs from `raw`.
fn json_escaped(raw: &str) -> Option<String> {
    let quoted = serde_json::to_string(raw).ok()?;
    let inner = quoted.get(1..quoted.len().saturating_sub(1))?;
    (inner != raw).then(|| inner.to_owned())
}

/// `raw` inside a JSON string with every character past ASCII as `\u`
/// escapes (UTF-16, lowercase hex) and, with `html`, `<`, `>` and `&` too;
/// `None` when that is the serde form.
fn json_ascii_escaped(raw: &str, html: bool) -> Option<String> {
    let serde = json_escaped(raw).unwrap_or_else(|| raw.to_owned());
    let mut out = String::with_capacity(serde.len());
    for c in serde.chars() {
        if !c.is_ascii() || (html && matches!(c, '<' | '>' | '&')) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    (out != serde).then_some(out)
}

/// `raw` percent-encoded (RFC 3986 unreserved characters kept, and `/`
/// with `keep_slash`; a space as `+` with `space_plus`; lowercase hex with
/// `lower`), when that differs from `raw`.
fn percent_encoded(raw: &str, keep_slash: bool, space_plus: bool, lower: bool) -> Option<String> {
    let mut out = String::with_capacity(raw.len() * 3);
    for &b in raw.as_bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(char::from(b));
        } else if space_plus && b == b' ' {
            out.push('+');
        } else if lower {
            out.push_str(&format!("%{b:02x}"));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    (out != raw).then_some(out)
}

/// The wrappers that refuse to print.
#[path = "secrets_wrappers.rs"]
mod wrappers;
pub use wrappers::Secret;
pub use wrappers::Sensitive;

/// Parts of secrets at the cut ends of a piece whose surroundings are
/// known ([`Redactor::hide_cut_parts`]).
#[path = "secrets_cut.rs"]
mod cut;

/// A set of values shared by redactors and changed while they live
/// ([`Redactor::shared_set`]).
#[path = "secrets_scope.rs"]
mod scope;
#[path = "secrets_shared.rs"]
mod shared;

#[cfg(test)]
#[path = "secrets_tests.rs"]
mod tests;

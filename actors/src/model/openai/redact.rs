//! Keeping the provider's credentials out of what it says.
//!
//! A base URL may carry userinfo (`http://user:pass@host/v1`), which
//! reqwest takes out of the URL and sends as basic auth; the API key and
//! the extra header values go out as headers. What the provider says ends
//! up in turn errors, which reach the transcript, the log and the API and
//! may be shown to people: a 404 names the URL it tried, a connection error
//! may quote it, and a server's error body may echo what it was sent.
//! [`Redactor`] shows every URL's userinfo as `***` and replaces each
//! secret sent with `***` in such texts. A text quoted cut to length is
//! redacted before it is cut, and loses a start of a secret the cut left
//! at its end ([`Redactor::cut`]). The same secrets are given to the host
//! ([`super::OpenAiOptions::credentials`]) to scrub from tool results; and
//! a turn's call takes the host's credentials in ([`Redactor::and`]: a
//! user's token, a webhook's secret, a `[[secrets]]` value), so its error
//! texts are cleaned of every credential the host knows, before any cut.

use reqwest::Url;

use super::OpenAiOptions;
use super::retry::Failure;

/// What stands in for a removed credential.
const HIDDEN: &str = "***";

/// Secrets shorter than this are not searched for in texts: replacing
/// every `ab` would garble the message and hide little.
const MIN_SECRET_CHARS: usize = 4;

/// Removes the credentials of one provider from texts.
#[derive(Clone, Default)]
pub(super) struct Redactor {
    /// Every credential the provider sends, longest first (a key may
    /// contain a shorter one).
    secrets: Vec<String>,
}

impl Redactor {
    /// The credentials of `options`, whose requests go to `url`.
    pub(super) fn new(options: &OpenAiOptions, url: &Url) -> Self {
        // each also as encoders write it: a server's JSON error body may
        // echo a key holding `/` as `\/` (QA, 2026-12-05: PHP's
        // `json_encode`), or one past ASCII as `\u` escapes
        let mut secrets: Vec<String> = secrets_of(options, Some(url))
            .iter()
            .flat_map(|s| crate::safety::secret_forms(s))
            .collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Redactor { secrets }
    }

    /// This redactor with the secrets of `hidden` too (the host's
    /// credentials, which a call's texts must not show either).
    pub(super) fn and(&self, hidden: &crate::safety::Redactor) -> Self {
        let mut secrets = self.secrets.clone();
        secrets.extend(
            hidden
                .expose_patterns()
                .filter(|s| s.chars().count() >= MIN_SECRET_CHARS)
                .map(str::to_owned),
        );
        // longest first (one may contain a shorter one), each once
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Redactor { secrets }
    }

    /// Bytes of the longest credential (0 without any).
    pub(super) fn longest(&self) -> usize {
        self.secrets.first().map_or(0, String::len)
    }

    /// `text` without userinfo in its URLs and without any secret, whole
    /// or echoed in part ([`hide_parts`]).
    pub(super) fn text(&self, text: &str) -> String {
        let mut text = without_userinfo(text);
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), HIDDEN);
            }
        }
        for secret in &self.secrets {
            text = hide_parts(&text, secret);
        }
        text
    }

    /// `text` redacted, then cut to at most `max_bytes` bytes (on a char
    /// boundary). Redacting first finds every whole secret; a cut through
    /// one would leave a start of it that no search for the whole secret
    /// finds (`Bearer sk-SUPERSECRETKE`), so a cut text also loses its end
    /// when that end is the start of a secret ([`MIN_SECRET_CHARS`] or
    /// more chars of it, as shorter secrets are not searched for either).
    pub(super) fn cut(&self, text: &str, max_bytes: usize) -> String {
        let mut text = self.text(text);
        if text.len() <= max_bytes {
            return text;
        }
        let mut end = max_bytes;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        self.hide_cut_secret(&mut text);
        text
    }

    /// [`Redactor::cut`] of `text` trimmed, its control characters shown
    /// escaped ([`escape_controls`]): a quote of what a server sent.
    pub(super) fn quote(&self, text: &str, max_bytes: usize) -> String {
        escape_controls(self.cut(text.trim(), max_bytes).trim())
    }

    /// Replaces the end of `text` with [`HIDDEN`] when it is the start
    /// (a proper prefix of [`MIN_SECRET_CHARS`] chars or more) of a secret:
    /// the text was cut inside that secret. The search is the one the host
    /// uses on cut tool results ([`crate::safety::Redactor::start_at_end`]).
    fn hide_cut_secret(&self, text: &mut String) {
        let len =
            crate::safety::Redactor::start_at_end(text, self.secrets.iter().map(String::as_str));
        if len > 0 {
            text.truncate(text.len() - len);
            text.push_str(HIDDEN);
        }
    }

    /// `failure` with its texts redacted. A [`Failure::Final`] error is
    /// kept: its texts are redacted where they are made.
    pub(super) fn failure(&self, failure: Failure) -> Failure {
        match failure {
            Failure::Unreachable(detail) => Failure::Unreachable(self.text(&detail)),
            Failure::Status {
                status,
                body,
                retry_after,
            } => Failure::Status {
                status,
                body: self.text(&body),
                retry_after,
            },
            Failure::Broken { detail } => Failure::Broken {
                detail: self.text(&detail),
            },
            Failure::Final(error) => Failure::Final(error),
        }
    }
}

/// `text` with each control character escaped as Rust writes it in a
/// string literal (`\n`, `\t`, `\u{1b}`), everything else as it is. A
/// server's text quoted in an error goes into the host's log and the
/// transcript: a line break in it forged a log line of its own, an escape
/// sequence coloured the terminal, and a NUL made the log a binary file
/// to `grep` (QA, 2026-12-05).
pub(super) fn escape_controls(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Every credential `options` send to `url` (the userinfo only when a
/// `url` is given), [`MIN_SECRET_CHARS`] chars or longer, longest first.
pub(super) fn secrets_of(options: &OpenAiOptions, url: Option<&Url>) -> Vec<String> {
    let mut secrets: Vec<String> = Vec::new();
    if let Some(key) = &options.api_key {
        // as sent (endpoint.rs trims it)
        secrets.push(key.trim().to_owned());
    }
    secrets.extend(options.extra_headers.iter().map(|(_, value)| value.clone()));
    if let Some(url) = url {
        secrets.extend(super::endpoint::secret_query_values(url));
        if let Some(password) = url.password() {
            secrets.push(password.to_owned());
            if let Some(decoded) = percent_decoded(password) {
                secrets.push(decoded);
            }
        }
        if !url.username().is_empty() || url.password().is_some() {
            // the `Authorization: Basic` value reqwest makes of them, as a
            // server echoing its request headers would show it
            let user = percent_decoded(url.username()).unwrap_or_else(|| url.username().into());
            let password = url
                .password()
                .map(|p| percent_decoded(p).unwrap_or_else(|| p.to_owned()))
                .unwrap_or_default();
            secrets.push(base64(format!("{user}:{password}").as_bytes()));
        }
    }
    secrets.retain(|s| s.chars().count() >= MIN_SECRET_CHARS);
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

/// `base_url` as it may be shown: with `***` for its userinfo. Used on the
/// configured URL, also when it does not parse, so everything between the
/// scheme and the last `@` goes (a password may hold an unescaped `/`).
pub(crate) fn shown_base_url(base_url: &str) -> String {
    if let Ok(mut url) = Url::parse(base_url) {
        if url.username().is_empty() && url.password().is_none() {
            // no userinfo; an `@` is in the path or query
            return base_url.to_owned();
        }
        // parsed, the userinfo is what the parser says it is: an `@` in
        // the path or query is none of it (QA: `?mail=a@b.c` hid the host
        // and the path)
        if url.set_username("").is_ok() && url.set_password(None).is_ok() {
            let shown = url.to_string();
            if let Some(start) = shown.find("://").map(|i| i + 3) {
                return format!("{}{HIDDEN}@{}", &shown[..start], &shown[start..]);
            }
        }
    }
    let Some(start) = base_url.find("://").map(|i| i + 3) else {
        return base_url.to_owned();
    };
    // not parsed: the userinfo ends at the last `@` before a query or a
    // fragment (a password may hold a `/`)
    let before_query = base_url[start..]
        .find(['?', '#'])
        .map_or(base_url.len(), |i| start + i);
    match base_url[start..before_query].rfind('@') {
        Some(at) => format!("{}{HIDDEN}{}", &base_url[..start], &base_url[start + at..]),
        None => base_url.to_owned(),
    }
}

/// `text` with the userinfo of every URL in it (`scheme://user:pass@`)
/// shown as `***`. A URL's authority ends at the first `/`, `?`, `#`,
/// whitespace, quote or angle bracket; its userinfo is what comes before
/// the last `@` in it.
fn without_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find("://") {
        let start = found + 3;
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>' | '`' | '\\')
                    || c.is_whitespace()
            })
            .unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            out.push_str(HIDDEN);
            rest = &rest[at..];
        }
    }
    out.push_str(rest);
    out
}

/// `s` with its `%XX` escapes decoded, when that changes it and gives
/// UTF-8.
fn percent_decoded(s: &str) -> Option<String> {
    if !s.contains('%') {
        return None;
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Standard base64 with padding, as in an `Authorization: Basic` header.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;

/// The fewest chars of a secret that [`hide_parts`] hides where a text
/// holds them in a run: a third of the secret, and at least this many
/// (the 8-char prefixes keys share, `sk-proj-`, and the last four chars
/// servers print of a key, `…wxyz`, stay).
const MIN_PART_CHARS: usize = 12;

/// `text` with every run of at least [`MIN_PART_CHARS`] chars (and a
/// third of the secret) of `secret`, wherever in the secret it starts,
/// replaced by [`HIDDEN`]: a server that echoes a key cut short
/// ("Incorrect API key provided: sk-qa-SUPERSECRET-01") or without its
/// first and last chars shows no whole secret, and the part it shows is
/// as good as most of the key (QA: the first half reached the transcript,
/// the log and the JSONL mirror; later 30 of a key's 32 chars).
fn hide_parts(text: &str, secret: &str) -> String {
    let chars = secret.chars().count();
    let min = MIN_PART_CHARS.max(chars.div_ceil(3));
    if chars <= min {
        return text.to_owned();
    }
    // where each of the secret's chars starts, and its end
    let bounds: Vec<usize> = secret
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(secret.len()))
        .collect();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    // each run of `min` chars of the secret, as far as the text goes on
    // with the secret on either side of it
    for k in 0..=chars - min {
        let (from, to) = (bounds[k], bounds[k + min]);
        let piece = &secret[from..to];
        for (at, _) in text.match_indices(piece) {
            let mut start = at - common_suffix(&text[..at], &secret[..from]);
            let mut stop =
                at + piece.len() + common_prefix(&text[at + piece.len()..], &secret[to..]);
            while !text.is_char_boundary(start) {
                start += 1;
            }
            while !text.is_char_boundary(stop) {
                stop -= 1;
            }
            spans.push((start, stop));
        }
    }
    if spans.is_empty() {
        return text.to_owned();
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    for (from, to) in spans {
        if to <= done {
            continue;
        }
        let from = from.max(done);
        out.push_str(&text[done..from]);
        if !out.ends_with(HIDDEN) {
            out.push_str(HIDDEN);
        }
        done = to;
    }
    out.push_str(&text[done..]);
    out
}

/// Bytes `a` and `b` start with in common.
fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// Bytes `a` and `b` end with in common.
fn common_suffix(a: &str, b: &str) -> usize {
    a.bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

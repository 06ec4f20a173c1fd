//! Reading an answer's body: the next chunk within the deadline, text
//! deltas forwarded to the sink, the finished response, and the errors
//! these end in.

use std::error::Error as StdError;

use bytes::Bytes;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;
use tracing::warn;

use super::Assembler;
use super::Failure;
use super::OpenAiOptions;
use crate::model::ModelError;
use crate::model::ModelResponse;
use crate::model::SinkControl;
use crate::model::StreamSink;

/// The response `assembler` holds. One without any choice (`choices: []`
/// or none) is no answer, nor one whose finish reason says the server
/// stopped it (`error`, `abort`): broken and retried, streamed or not.
/// Odd token counts in its usage are logged once, naming the provider
/// (`options`).
pub(super) fn finished(
    assembler: Assembler,
    options: &OpenAiOptions,
) -> Result<ModelResponse, Failure> {
    if let Some(odd) = assembler.odd_usage() {
        warn!(
            provider = options.provider.as_deref().unwrap_or(""),
            model = %options.model,
            odd,
            "the model's answer reported token counts that are not whole numbers of 0 or more; \
             a fraction was rounded, and usage with a negative or non-number count is counted \
             by botfleet instead"
        );
    }
    if !assembler.has_choice() {
        return Err(Failure::Broken {
            detail: "the answer held no choices (no text, no tool calls, no finish reason)"
                .to_owned(),
        });
    }
    // a choice the server stopped (`error`, `abort`): a cut answer, retried
    if let Some(reason) = assembler.failed_finish() {
        return Err(Failure::Broken {
            detail: super::advice::failed_finish(reason),
        });
    }
    assembler.into_response().map_err(Failure::Final)
}

/// Forwards a text delta; an abort from the sink ends the call.
pub(super) fn forward(
    sink: &mut dyn StreamSink,
    delta: &str,
    assembler: &Assembler,
) -> Result<(), Failure> {
    match sink.on_text(delta) {
        SinkControl::Continue => Ok(()),
        SinkControl::Abort { reason } => {
            debug!(%reason, "model stream aborted by the sink");
            Err(Failure::Final(ModelError::Aborted {
                reason,
                partial: assembler.text().to_owned(),
            }))
        }
    }
}

/// Bytes of a whole answer's text given to the sink at a time (cut at a
/// character boundary), so a sink that aborts says where.
const WHOLE_PIECE: usize = 64;

/// Gives the text of a whole (non-streamed) answer to the sink, piece by
/// piece. An abort (the loop detector seeing a run of 256 zeros, a base64
/// blob) does not end the call, as it does while streaming: the answer
/// is complete and its tokens spent, so nothing is saved by dropping it,
/// and its tool calls must run. Returns where the text is to be cut: the
/// end of the piece the sink aborted on (logged at WARN, naming the
/// provider and the model); `None` when it took the whole text.
pub(super) fn forward_whole(
    sink: &mut dyn StreamSink,
    text: &str,
    options: &OpenAiOptions,
) -> Option<usize> {
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + WHOLE_PIECE).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        match sink.on_text(&text[start..end]) {
            SinkControl::Continue => start = end,
            SinkControl::Abort { reason } => {
                warn!(
                    provider = options.provider.as_deref().unwrap_or(""),
                    model = %options.model,
                    %reason,
                    kept = end,
                    dropped = text.len() - end,
                    "the model's whole (non-streamed) answer was stopped by the stream watcher; \
                     its text is cut there and the answer used, its tool calls included"
                );
                return Some(end);
            }
        }
    }
    None
}

/// The next piece of the body, `None` at its end; watches `cancel` and
/// gives up at `deadline`.
pub(super) async fn next_chunk(
    response: &mut reqwest::Response,
    cancel: &CancellationToken,
    deadline: Instant,
) -> Result<Option<Bytes>, Failure> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(Failure::Final(ModelError::Cancelled)),
        read = tokio::time::timeout_at(deadline, response.chunk()) => match read {
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(e)) => Err(Failure::Broken { detail: error_chain(&e) }),
            Err(_elapsed) => Err(Failure::Broken {
                detail: super::advice::STALLED.to_owned(),
            }),
        },
    }
}

/// Whether `response`'s body ends by the server's word: HTTP/2 (the
/// stream's end), a `Content-Length`, or HTTP/1.1 chunks (the last, empty
/// one). Otherwise only the connection's close ends it (RFC 9112 §6.3),
/// and a cut connection ends it the same way.
pub(super) fn framed_body(response: &reqwest::Response) -> bool {
    use reqwest::header::CONTENT_LENGTH;
    use reqwest::header::TRANSFER_ENCODING;
    let headers = response.headers();
    response.version() >= reqwest::Version::HTTP_2
        || headers.contains_key(CONTENT_LENGTH)
        || headers
            .get_all(TRANSFER_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.to_ascii_lowercase().contains("chunked"))
}

/// The answer passed `max_response_bytes`; not retried.
pub(super) fn too_large(limit: usize) -> Failure {
    Failure::Final(ModelError::TooLarge { limit })
}

/// An error and its sources, `: `-separated (reqwest's own message alone
/// rarely says what went wrong).
pub(super) fn error_chain(error: &dyn StdError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The start of an answer's body: its pieces up to the first byte that
/// is not whitespace (or its end), so that [`looks_like_sse`] can tell
/// what it is, without a byte order mark before it (which an event stream
/// must ignore, and JSON may: a BOM failed the first event, or the whole
/// answer). Past `limit` bytes of whitespace it is too large; silent for
/// `timeout` (between two pieces, as a stream is: blank lines may keep it
/// alive) it stalled.
pub(super) async fn body_start(
    response: &mut reqwest::Response,
    cancel: &CancellationToken,
    timeout: std::time::Duration,
    limit: usize,
) -> Result<Vec<u8>, Failure> {
    let mut start = Vec::new();
    // a first piece may end inside the mark: its bytes then read as no
    // field and no JSON (audit: a stream's first event, with the tool
    // call's name, was dropped, and a whole answer failed at once)
    while undecided(without_bom(&start)) || part_of_bom(&start) {
        match next_chunk(response, cancel, Instant::now() + timeout).await? {
            Some(bytes) => start.extend_from_slice(&bytes),
            None => break,
        }
        if start.len() > limit {
            return Err(too_large(limit));
        }
    }
    Ok(without_bom(&start).to_vec())
}

/// Whether a body's start is too short to tell an event stream from a
/// JSON answer: only whitespace, or the first letters of a field
/// (`d`, `da`… of `data:`; a server's first write may end there, and a
/// stream labelled `application/json` was then read as a completion and
/// failed: audit, 2026-12-07). No JSON answer starts with a letter.
fn undecided(start: &[u8]) -> bool {
    let start = start.trim_ascii_start();
    start.is_empty()
        || (!start.contains(&b'\n')
            && SSE_FIELDS
                .iter()
                .any(|field| field.len() > start.len() && field.starts_with(start)))
}

/// What an SSE body starts with ([`looks_like_sse`]).
const SSE_FIELDS: [&[u8]; 5] = [b":", b"data:", b"event:", b"id:", b"retry:"];

/// A UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// `bytes` without a UTF-8 byte order mark at their start.
fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM).unwrap_or(bytes)
}

/// Whether `bytes` are the first one or two bytes of a byte order mark.
fn part_of_bom(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.len() < BOM.len() && BOM.starts_with(bytes)
}

/// Whether a body that starts with `start` is an SSE stream: its first
/// line is a field (`data:`, `event:`, `id:`, `retry:`) or a comment
/// (`:`), which no JSON completion and no web page starts with. Servers
/// that stream label it `application/json` (Microsoft's Foundry Local),
/// `application/x-ndjson` (LitServe's OpenAI spec), `text/plain` (some
/// proxies) or not at all.
pub(super) fn looks_like_sse(start: &[u8]) -> bool {
    let start = start.trim_ascii_start();
    SSE_FIELDS.iter().any(|field| start.starts_with(field))
}

/// A whole completion's body without an SSE `data: [DONE]` line after
/// its JSON, which servers that label a whole completion an event stream
/// add (9router).
pub(super) fn without_done(body: &[u8]) -> &[u8] {
    let trimmed = body.trim_ascii_end();
    match trimmed.strip_suffix(b"[DONE]") {
        Some(rest) => {
            let rest = rest.trim_ascii_end();
            match rest.strip_suffix(b"data:") {
                Some(json) => json,
                None => body,
            }
        }
        None => body,
    }
}

/// Whether `body` is one whole JSON value ending in `}` (a completion,
/// or an error object), without or with an SSE `data: [DONE]` after it.
/// Parsed only when it ends so, which a body in pieces rarely does
/// before its end.
pub(super) fn whole_json(body: &[u8]) -> bool {
    let json = without_done(body).trim_ascii_end();
    json.ends_with(b"}") && serde_json::from_slice::<serde::de::IgnoredAny>(json).is_ok()
}

#[cfg(test)]
mod tests {
    use super::looks_like_sse;
    use super::undecided;

    /// A stream's first write may end inside its first field's name (`d`
    /// of `data:`): the start is read on until it can be told, where a
    /// stream labelled `application/json` was read as a completion and
    /// failed (audit, 2026-12-07). A JSON answer is told at its `{`.
    #[test]
    fn a_start_inside_a_field_name_is_read_on() {
        for start in [
            &b""[..],
            b"  \n",
            b"d",
            b"da",
            b" dat",
            b"e",
            b"ev",
            b"i",
            b"re",
        ] {
            assert!(undecided(start), "{:?}", String::from_utf8_lossy(start));
        }
        for start in [
            &b"{"[..],
            b"data:",
            b"data: {",
            b": ok",
            b"x",
            b"d\n",
            b"<html>",
        ] {
            assert!(!undecided(start), "{:?}", String::from_utf8_lossy(start));
        }
        assert!(looks_like_sse(b"data: {}"));
        assert!(!looks_like_sse(b"{\"id\":1}"));
    }
}

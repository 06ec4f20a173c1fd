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
/// or none) is no answer: broken and retried, streamed or not. Odd token
/// counts in its usage are logged once, naming the provider (`options`).
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

//! The headers of a webhook delivery (`hooks.rs`): the delivery id, the
//! signature's timestamp, and the `Content-Encoding` a payload may not
//! have.

use axum::http::HeaderMap;

use super::ApiError;
use super::MAX_DELIVERY_LEN;
use super::single_header;

/// The Unix seconds of an `X-Botfleet-Timestamp`.
pub(super) fn parse_timestamp(text: &str) -> Result<i64, ApiError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::BadRequest(
            "the X-Botfleet-Timestamp header must be the Unix time in seconds, digits \
             only (e.g. 1764700000)"
                .into(),
        ));
    }
    // 10^11 s is the year 5138: milliseconds, most likely; digits past
    // what an i64 holds are no time at all (they were called "not digits")
    match text.parse::<i64>() {
        Ok(seconds) if seconds < 100_000_000_000 => Ok(seconds),
        Ok(_) => Err(ApiError::BadRequest(
            "the X-Botfleet-Timestamp header must be the Unix time in seconds, not \
             milliseconds (e.g. 1764700000)"
                .into(),
        )),
        Err(_) => Err(ApiError::BadRequest(format!(
            "the X-Botfleet-Timestamp header has {} digits, far past any Unix time: send the \
             Unix time in seconds (10 digits, e.g. 1764700000)",
            text.len()
        ))),
    }
}

pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ApiError> {
    single_header(headers, name)?
        .map(|v| {
            v.to_str()
                .map_err(|_| ApiError::BadRequest(format!("the {name} header is not ASCII text")))
        })
        .transpose()
}

/// Refuses a payload sent compressed: a `Content-Encoding` other than
/// `identity`. Webhook senders (GitHub, Stripe, …) send the body as is and
/// sign it so; one that a proxy compressed on the way would be checked
/// against a signature of other bytes (`401`) or read as text that is not
/// UTF-8 (`400`), neither naming the cause. `415`, saying what to send,
/// from the headers: the body is not read.
pub(super) fn refuse_encoded(headers: &HeaderMap) -> Result<(), ApiError> {
    match crate::api::extract::content_coding(headers) {
        Some(coding) => Err(ApiError::UnsupportedEncoding(format!(
            "the payload is sent with Content-Encoding: {}; a webhook takes the body \
             uncompressed, as it was signed: send it without Content-Encoding (turn off \
             compression in the sender or the proxy before this host)",
            botfleet_memory::quote_short(&coding)
        ))),
        None => Ok(()),
    }
}

/// Why `id` is not a delivery id, if it is not one. The id is the
/// idempotency key and is compared byte for byte, so it is taken as sent:
/// trimming it would make `" w1 "` a duplicate of `w1`, and a tab (the one
/// control character an HTTP header value may hold) is refused likewise.
/// (HTTP/1 parsing already drops spaces and tabs around a header value, as
/// RFC 9110 says; the check keeps this handler from trimming on its own.)
pub(super) fn delivery_problem(id: &str) -> Option<String> {
    if id.is_empty() || id.len() > MAX_DELIVERY_LEN {
        return Some(format!(
            "the X-Botfleet-Delivery header must be 1-{MAX_DELIVERY_LEN} characters"
        ));
    }
    if id.starts_with(char::is_whitespace) || id.ends_with(char::is_whitespace) {
        return Some(
            "the X-Botfleet-Delivery header must not start or end with whitespace: send the \
             delivery id exactly as generated, without padding"
                .into(),
        );
    }
    if id.contains(char::is_control) {
        return Some(
            "the X-Botfleet-Delivery header must not contain control characters (a tab \
             included): use visible ASCII, e.g. a UUID"
                .into(),
        );
    }
    None
}

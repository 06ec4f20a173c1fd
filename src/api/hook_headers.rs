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
        // at most 11 digits, as docs/openapi.yaml gives it (`^[0-9]{1,11}$`):
        // a time in seconds with leading zeros was taken, past the schema
        Ok(seconds) if seconds < 100_000_000_000 && text.len() <= 11 => Ok(seconds),
        Ok(seconds) if seconds < 100_000_000_000 => Err(ApiError::BadRequest(format!(
            "the X-Botfleet-Timestamp header has {} digits, with leading zeros: send the Unix \
             time in seconds without them, at most 11 digits (e.g. 1764700000)",
            text.len()
        ))),
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

/// The value of header `name` (one of the three a delivery carries), as
/// text; `400` when it holds bytes past visible ASCII, naming the header
/// as the docs spell it and what to send in it (it said only "the
/// x-botfleet-delivery header is not ASCII text": QA).
pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ApiError> {
    // looked up as the docs spell it (a header map's names are not case
    // sensitive), so a refusal of it sent twice names it so too (QA:
    // `x-botfleet-delivery`)
    single_header(headers, &spelled(name))?
        .map(|v| {
            v.to_str().map_err(|_| {
                ApiError::BadRequest(format!(
                    "the {} header is not ASCII text: {}",
                    spelled(name),
                    what_to_send(name)
                ))
            })
        })
        .transpose()
}

/// `x-botfleet-delivery` as the docs write it: `X-Botfleet-Delivery`.
fn spelled(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// What a delivery's header `name` holds, as advice.
fn what_to_send(name: &str) -> &'static str {
    match name {
        super::DELIVERY_HEADER => "send the delivery id as visible ASCII, e.g. a UUID",
        super::SIGNATURE_HEADER => {
            "send sha256= and the hex HMAC-SHA256 of the signed bytes under the hook's secret"
        }
        super::TIMESTAMP_HEADER => "send the Unix time in seconds, digits only (e.g. 1764700000)",
        _ => "send visible ASCII",
    }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use axum::http::HeaderMap;
    use axum::http::HeaderValue;

    use super::*;

    /// Regression (QA): a delivery id with bytes past ASCII was refused
    /// as "the x-botfleet-delivery header is not ASCII text", the name in
    /// lower case and nothing said of what to send instead.
    #[test]
    fn a_header_past_ascii_is_named_as_documented_with_what_to_send() {
        let mut headers = HeaderMap::new();
        headers.insert(
            super::super::DELIVERY_HEADER,
            HeaderValue::from_bytes("été".as_bytes()).unwrap(),
        );
        let e = header(&headers, super::super::DELIVERY_HEADER)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "the X-Botfleet-Delivery header is not ASCII text: send the delivery id \
                 as visible ASCII, e.g. a UUID"
            ),
            "{e}"
        );
    }

    /// Regression (QA): a timestamp of 12 digits with leading zeros was
    /// taken, where docs/openapi.yaml allows at most 11 digits.
    #[test]
    fn a_timestamp_has_at_most_eleven_digits() {
        assert_eq!(parse_timestamp("01796515738").unwrap(), 1_796_515_738);
        let e = parse_timestamp("001796515738").unwrap_err().to_string();
        assert!(
            e.contains("has 12 digits, with leading zeros") && e.contains("at most 11 digits"),
            "{e}"
        );
    }
}

//! Query strings whose percent-escapes do not decode to UTF-8: axum's
//! query parser would turn them silently into U+FFFD, and a route would
//! act on text the client never sent. Every route with a free-text query
//! parameter (`/v1/search`, `/v1/bots/{bot}/memory?input=`) refuses them.

use super::error::ApiError;

/// Refuses a query string with a percent-escape that does not decode to
/// UTF-8: the query parser would silently turn it into U+FFFD and search
/// for something the client never sent.
pub(crate) fn check_utf8(raw: Option<&str>) -> Result<(), ApiError> {
    for pair in raw.unwrap_or_default().split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        for part in [name, value] {
            if std::str::from_utf8(&percent_decode(part)).is_err() {
                return Err(ApiError::BadRequest(format!(
                    "the query parameter {} is not UTF-8 text once its percent-escapes are \
                     decoded; encode the text as UTF-8 (e.g. encodeURIComponent)",
                    botfleet_memory::quote_short(&String::from_utf8_lossy(&percent_decode(name)))
                )));
            }
        }
    }
    Ok(())
}

/// The bytes of a form-encoded query component: `%XX` decoded, `+` a space;
/// a `%` not followed by two hex digits stays as it is (as the query parser
/// keeps it).
fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (other, _) => {
                out.push(other);
                i += 1;
            }
        }
    }
    out
}

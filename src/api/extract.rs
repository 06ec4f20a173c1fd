//! A request's input — path parameters, the query string, headers, the
//! body — read so that every failure is answered in the API's one error
//! shape ([`ApiError`]), never as axum's plain-text rejections.

use axum::body::Body;
use axum::body::Bytes;
use axum::extract::FromRequestParts;
use axum::extract::Query;
use axum::extract::Request;
use axum::extract::rejection::BytesRejection;
use axum::extract::rejection::PathRejection;
use axum::http::HeaderMap;
use axum::http::HeaderValue;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde::de::IgnoredAny;

use super::error::ApiError;

/// Path parameters, as `axum::extract::Path`, refused as [`ApiError`]: a
/// percent-escape that is not UTF-8 (`/v1/bots/%FF`) is a JSON `400`.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub(crate) struct Path<T>(pub T);

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        if r.status().is_server_error() {
            ApiError::Internal(format!("path parameters: {}", r.body_text()))
        } else {
            ApiError::BadRequest(format!(
                "{}; a path segment must be text (percent-escapes that decode to UTF-8)",
                r.body_text()
            ))
        }
    }
}

/// The parameters of a route's query string, or a `400` saying what is
/// wrong with them in words, then `hint` (how to write them).
pub(crate) fn query<T>(
    query: Result<axum::extract::Query<T>, axum::extract::rejection::QueryRejection>,
    hint: &str,
) -> Result<T, ApiError> {
    query
        .map(|axum::extract::Query(q)| q)
        .map_err(|e| ApiError::BadRequest(format!("{}; {hint}", query_text(&e.body_text()))))
}

/// serde's words for a query string it could not read, as a person would
/// say them (QA: "Failed to deserialize query string: invalid digit found
/// in string"), naming the parameter when serde does (`after: …`).
fn query_text(said: &str) -> String {
    let said = said
        .strip_prefix("Failed to deserialize query string: ")
        .unwrap_or(said);
    // a parameter with no name (`?=5`): serde names it as nothing
    let said = said.strip_prefix(": ").unwrap_or(said);
    let (field, said) = match said.split_once(": ") {
        Some((f, rest))
            if !f.is_empty() && f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            (Some(f), rest)
        }
        _ => (None, said),
    };
    let param = field.map_or_else(|| "a parameter".to_owned(), |f| format!("`{f}`"));
    // (after a name serde gives that is not a parameter's: `�: unknown…`)
    let named = |prefix: &str| {
        said.find(prefix)
            .map(|at| &said[at + prefix.len()..])
            .and_then(|r| r.split_once('`'))
            .map(|(f, rest)| (f.to_owned(), rest.to_owned()))
    };
    if let Some((name, _)) = named("unknown field `") {
        // (QA: "unknown field ``" and "unknown field `�`", serde's words)
        if name.is_empty() {
            return "a parameter has no name (`=` with nothing before it): give NAME=VALUE"
                .to_owned();
        }
        if name.contains('\u{fffd}') {
            return "a parameter's name is not UTF-8 text once its percent-escapes are decoded; \
                    encode it as UTF-8"
                .to_owned();
        }
        return format!("`{name}` is not a parameter of this route");
    }
    if let Some((name, _)) = named("duplicate field `") {
        return format!("`{name}` is given twice: give it once");
    }
    if let Some((value, rest)) = named("unknown variant `") {
        let choices = rest
            .split_once("expected one of ")
            .or_else(|| rest.split_once("expected "))
            .map_or("", |(_, c)| c);
        return format!("{param} does not take {value:?} (it takes {choices})");
    }
    match said {
        "invalid digit found in string" => format!("{param} takes a whole number"),
        "cannot parse integer from empty string" => {
            format!("{param} is empty, and it takes a whole number")
        }
        // (QA: `?after=99999999999999999999` was "`after` is out of range",
        // with no range: the hint after it now gives each route's)
        "number too large to fit in target type" => {
            format!("{param} is out of range: it is larger than any value it takes")
        }
        "number too small to fit in target type" => {
            format!("{param} is out of range: it is smaller than any value it takes")
        }
        "provided string was not `true` or `false`" => format!("{param} takes true or false"),
        other => format!("the query string could not be read: {param}: {other}"),
    }
}

/// The query of a route that takes no query parameters: any parameter is
/// refused (`400`), as the routes that take some refuse unknown ones, so
/// that a client never mistakes an ignored `?limit=5` for one that worked.
#[derive(Debug)]
pub(crate) struct NoQuery;

/// The empty parameter set [`NoQuery`] reads the query string into.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

impl<S: Send + Sync> FromRequestParts<S> for NoQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        Query::<NoParams>::try_from_uri(&parts.uri)
            .map(|_| NoQuery)
            .map_err(|e| {
                ApiError::BadRequest(format!(
                    "{}; {} takes no query parameters (docs/api.md)",
                    query_text(&e.body_text()),
                    parts.uri.path()
                ))
            })
    }
}

/// Most of a body [`no_body`] reads: more is refused unread.
const NO_BODY_PEEK: usize = 1024;

/// Middleware of the routes that take no body (`POST …/cancel`, `DELETE
/// …`, every `GET`): a body is refused (`400`), as an unknown query
/// parameter is, so that a client never mistakes an ignored body for one
/// that was read. Nothing, whitespace, or an empty JSON object (`{}`, what
/// many clients send by default) passes.
pub(crate) async fn no_body(req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, NO_BODY_PEEK).await.ok();
    let empty = bytes.as_ref().is_some_and(|b| {
        b.iter().all(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
            || serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(b)
                .is_ok_and(|m| m.is_empty())
    });
    let Some(bytes) = bytes.filter(|_| empty) else {
        return ApiError::BadRequest(format!(
            "{} {} takes no body; send none (or {{}}) (docs/api.md)",
            parts.method,
            parts.uri.path()
        ))
        .into_response();
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Middleware of every route: a body sent with a `Transfer-Encoding`
/// other than `chunked` is refused `501` before it is read, and the
/// connection closed after the answer. HTTP/1.1 knows only `chunked` (RFC
/// 9112 §6.1: another coding is answered 501); hyper reads the chunks and
/// ignores the rest, so `gzip, chunked` was stored as if the label were
/// not there: a message first, then a webhook's payload, whose route did
/// not check it (QA: the API audit).
pub(crate) async fn known_transfer_coding(req: Request, next: Next) -> Response {
    let Some(coding) = transfer_coding(req.headers()) else {
        return next.run(req).await;
    };
    let mut refused = ApiError::UnsupportedTransferCoding(format!(
        "the body is sent with Transfer-Encoding: {}; this host takes only `chunked`: \
         send the body uncompressed, whole with a Content-Length or in chunks",
        botfleet_memory::quote_short(&coding)
    ))
    .into_response();
    super::mark_answer(&mut refused);
    // as the documents say: the body, in a coding the host does not read,
    // is not read to its end for the next request on the connection
    refused.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    refused
}

/// Middleware of the routes that take a JSON body: one sent with a
/// `Content-Encoding` other than `identity` is refused (`415`, saying what
/// to send) before it is read. The host decompresses nothing: a gzipped
/// message was answered "not valid JSON … at line 1 column 1", naming no
/// cause, and one labelled `br` but sent plain was stored as if the label
/// were not there (QA).
pub(crate) async fn uncompressed(req: Request, next: Next) -> Response {
    if let Some(coding) = content_coding(req.headers()) {
        return ApiError::UnsupportedEncoding(format!(
            "the body is sent with Content-Encoding: {}; this host takes request bodies \
             uncompressed: send the JSON as it is, without Content-Encoding",
            botfleet_memory::quote_short(&coding)
        ))
        .into_response();
    }
    next.run(req).await
}

/// The first `Content-Encoding` of a request other than `identity` (the
/// body is compressed, or says it is), if it has one.
pub(crate) fn content_coding(headers: &HeaderMap) -> Option<String> {
    first_coding_but(headers, axum::http::header::CONTENT_ENCODING, "identity")
}

/// The first `Transfer-Encoding` coding of a request other than `chunked`
/// (`gzip` in `gzip, chunked`), if it has one.
fn transfer_coding(headers: &HeaderMap) -> Option<String> {
    first_coding_but(headers, axum::http::header::TRANSFER_ENCODING, "chunked")
}

/// The first coding listed in the `header` values (comma-separated, any
/// number of them) other than `plain`, ignoring case.
fn first_coding_but(
    headers: &HeaderMap,
    header: axum::http::HeaderName,
    plain: &str,
) -> Option<String> {
    headers.get_all(header).iter().find_map(|value| {
        String::from_utf8_lossy(value.as_bytes())
            .split(',')
            .map(str::trim)
            .find(|c| !c.is_empty() && !c.eq_ignore_ascii_case(plain))
            .map(str::to_owned)
    })
}

/// Longest `Idempotency-Key` accepted.
pub(crate) const MAX_KEY_LEN: usize = 200;

/// The value of header `name` (as people spell it: `Authorization`), or
/// `None` when the request does not send it. Sent more than once it is
/// ambiguous: `400` naming it, where using the first would silently drop
/// what the client meant by the others.
pub(crate) fn single_header<'a>(
    headers: &'a HeaderMap,
    name: &str,
) -> Result<Option<&'a HeaderValue>, ApiError> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        let times = headers.get_all(name).iter().count();
        return Err(ApiError::BadRequest(format!(
            "the {name} header is sent {times} times, so the request is ambiguous; send it once"
        )));
    }
    Ok(first)
}

/// What an `Idempotency-Key` may be, as refusals say it (docs/api.md,
/// docs/openapi.yaml and `botfleet send --nonce` say the same).
pub(crate) const KEY_RULE: &str = "1-200 printable ASCII characters (letters, digits, \
     punctuation and spaces; a UUID is a good key)";

// [`KEY_RULE`] spells the limit out: it must change with it
const _: () = assert!(MAX_KEY_LEN == 200);

/// The `Idempotency-Key` header, trimmed, or `None` without one; `400`
/// when it is not printable ASCII (a tab inside it included; a header
/// carries other bytes, but `é` would arrive as whatever encoding the
/// client chose), empty, longer than [`MAX_KEY_LEN`] or sent twice.
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(v) = single_header(headers, "Idempotency-Key")? else {
        return Ok(None);
    };
    let k = v
        .to_str()
        .map_err(|_| {
            ApiError::BadRequest(format!(
                "the Idempotency-Key holds a character that is not printable ASCII; it must \
                 be {KEY_RULE}"
            ))
        })?
        .trim();
    // `to_str` admits a tab (HTTP allows one inside a header value), but
    // the key is printable ASCII only, as docs/openapi.yaml's pattern says
    if k.contains('\t') {
        return Err(ApiError::BadRequest(format!(
            "the Idempotency-Key must not contain control characters (a tab included); it \
             must be {KEY_RULE}"
        )));
    }
    if k.is_empty() || k.len() > MAX_KEY_LEN {
        return Err(ApiError::BadRequest(format!(
            "the Idempotency-Key has {} characters; it must be {KEY_RULE}",
            k.len()
        )));
    }
    Ok(Some(k.to_owned()))
}

/// A request body as read, or the error to answer: `413 too_large` past
/// `limit` bytes (the route's limit), `400` when it could not be read.
pub(crate) fn read_body(
    body: Result<Bytes, BytesRejection>,
    limit: usize,
) -> Result<Bytes, ApiError> {
    body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge { limit }
        } else {
            // hyper's own words name no cause (QA: a chunk size of `zz`
            // read "error reading a body from connection")
            ApiError::BadRequest(format!(
                "could not read the body ({r}): its chunked framing is broken, or the \
                 connection ended before the body did; send the body whole with a \
                 Content-Length (or as well-formed chunks)"
            ))
        }
    })
}

/// A JSON object body parsed into `T`; `what` names it in errors ("a
/// message") and `example` shows what to send. Anything but an object is
/// refused: serde would read an array as a struct's fields in order, so
/// `["deny"]` would pass for `{"decision": "deny"}`. A body that is not
/// JSON at all (`hello`, a form's `text=hi`) is told so, with where the
/// parser stopped, not taken for a JSON value of the wrong kind.
pub(crate) fn json_object<T: DeserializeOwned>(
    body: &[u8],
    what: &str,
    example: &str,
) -> Result<T, ApiError> {
    let not_json = |e: serde_json::Error| {
        let hint = if e.to_string().contains("escape") && has_surrogate_escape(body) {
            "; a lone UTF-16 surrogate? \\uD800-\\uDFFF escapes must come in pairs"
        } else {
            ""
        };
        ApiError::BadRequest(format!(
            "the body is not valid JSON for {what} ({e}{hint}); send {example}"
        ))
    };
    // a BOM is no JSON whitespace (RFC 8259 §8.1): an editor or a
    // PowerShell pipe adds it unseen, so the parser's "expected value at
    // column 1" alone does not tell what to do
    if body.starts_with(b"\xEF\xBB\xBF") {
        return Err(ApiError::BadRequest(format!(
            "the body starts with a byte order mark (BOM, bytes EF BB BF), which JSON does not \
             allow; remove it and send {example}"
        )));
    }
    // JSON is UTF-8 (RFC 8259 §8.1); serde_json checks it only where it
    // reads a string, so bytes that are not UTF-8 inside one were told "not
    // a value this field takes" (QA): say what they are, and where
    if let Err(e) = std::str::from_utf8(body) {
        let at = e.valid_up_to();
        let line = body[..at].iter().filter(|b| **b == b'\n').count() + 1;
        let column = at
            - body[..at]
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |p| p + 1)
            + 1;
        return Err(ApiError::BadRequest(format!(
            "the body is not valid JSON for {what}: the bytes at line {line} column {column} \
             are not UTF-8, and JSON text is UTF-8; send it as UTF-8, e.g. {example}"
        )));
    }
    // JSON's whitespace is these four bytes (RFC 8259 §2)
    let first = body
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    match first {
        Some(b'{') => {}
        // no body at all: nothing to point a parser position at
        None => return Err(not_an_object(what, example)),
        Some(_) => {
            return Err(match serde_json::from_slice::<IgnoredAny>(body) {
                Ok(_) => not_an_object(what, example),
                Err(e) => not_json(e),
            });
        }
    }
    // JSON, but not this body: the field, and what it must be (QA,
    // 2026-12-04: `"prompt": null` was answered "not valid JSON … at
    // line 1 column 55", naming no field)
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let field = if path.is_empty() || path == "." {
            String::new()
        } else {
            format!("`{path}`: ")
        };
        if inner.classify() != serde_json::error::Category::Data {
            // serde_json calls a field's value of the wrong kind for a
            // choice of words (`"catch_up": null`) a syntax error,
            // "expected value at line 1 column 62": the body is JSON all
            // the same, and the field is what to name (QA)
            // (a lone surrogate is a syntax error that skipping the
            // value does not see: it stays the parser's)
            if serde_json::from_slice::<IgnoredAny>(body).is_ok()
                && !inner.to_string().contains("escape")
            {
                return ApiError::BadRequest(format!(
                    "the body is JSON, but not {what}: {field}not a value this field takes; \
                     send {example}"
                ));
            }
            return not_json(inner);
        }
        ApiError::BadRequest(format!(
            "the body is JSON, but not {what}: {field}{inner}; send {example}"
        ))
    })?;
    de.end().map_err(not_json)?;
    Ok(parsed)
}

/// Whether `body` has a `\\uD800`-`\\uDFFF` escape (either case): the
/// likely cause of an escape error, cheap to look for only then.
fn has_surrogate_escape(body: &[u8]) -> bool {
    body.windows(4).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && w[2].eq_ignore_ascii_case(&b'd')
            && matches!(w[3].to_ascii_lowercase(), b'8'..=b'9' | b'a'..=b'f')
    })
}

/// The error for a body that is no JSON object: valid JSON of another
/// kind, or nothing.
fn not_an_object(what: &str, example: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "the body must be a JSON object for {what} (not an array, a string, a number or \
         nothing); send {example}"
    ))
}

/// A list's `limit`, `default` when not given, refused outside 1 to `max`
/// naming the value, the range and the default (QA: "`limit` must be
/// 1-100" named neither the value sent nor the default).
pub(crate) fn list_limit(
    limit: Option<i64>,
    default: i64,
    max: i64,
    what: &str,
) -> Result<i64, ApiError> {
    let limit = limit.unwrap_or(default);
    if (1..=max).contains(&limit) {
        return Ok(limit);
    }
    Err(ApiError::BadRequest(format!(
        "`limit` {limit} is out of range: give 1 to {max} {what} (default {default})"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Body {
        text: String,
    }

    fn parse(body: &str) -> Result<Body, String> {
        json_object::<Body>(body.as_bytes(), "a message", r#"{"text": "..."}"#)
            .map_err(|e| e.to_string())
    }

    /// Bytes that are not UTF-8 inside a string are named, with where
    /// (QA: "not a value this field takes").
    #[test]
    fn a_body_that_is_not_utf8_says_so() {
        let e = json_object::<Body>(b"{\"text\":\"\xff\xfe\"}", "a message", "{}")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.starts_with(
                "the body is not valid JSON for a message: the bytes at line 1 column 10 are not \
                 UTF-8"
            ),
            "{e}"
        );
    }

    #[test]
    fn only_an_object_is_a_body() {
        assert_eq!(
            parse(" \n{\"text\": \"hi\"}"),
            Ok(Body { text: "hi".into() })
        );
        for refused in [r#"["hi"]"#, r#" ["hi"]"#, r#""hi""#, "1", "null", "", "  "] {
            let e = parse(refused).err().unwrap_or_default();
            assert!(
                e.starts_with("the body must be a JSON object"),
                "{refused:?}: {e}"
            );
        }
        for not_json in ["{not json", "hello", "text=hi", "[1,", "\"open"] {
            let e = parse(not_json).err().unwrap_or_default();
            assert!(
                e.starts_with("the body is not valid JSON for a message (") && e.contains("column"),
                "{not_json:?}: {e}"
            );
        }
        let e = parse("{not json").err().unwrap_or_default();
        assert!(
            e.starts_with("the body is not valid JSON for a message"),
            "{e}"
        );
        // a BOM is named, and a lone surrogate suspected
        let e = parse("\u{feff}{\"text\": \"hi\"}")
            .err()
            .unwrap_or_default();
        assert!(
            e.starts_with("the body starts with a byte order mark (BOM") && e.contains("remove it"),
            "{e}"
        );
        for lone in [r#"{"text": "\ud800"}"#, r#"{"text": "a\uDC00b"}"#] {
            let e = parse(lone).err().unwrap_or_default();
            assert!(e.contains("a lone UTF-16 surrogate?"), "{lone}: {e}");
        }
        assert_eq!(
            parse(r#"{"text": "\ud83d\udc4d"}"#),
            Ok(Body {
                text: "👍".into()
            })
        );
        let e = parse(r#"{"txt": "x"}"#).err().unwrap_or_default();
        assert!(e.contains("unknown field `txt`"), "{e}");
        // a key given twice is refused, not the last taken
        let e = parse(r#"{"text": "a", "text": "b"}"#)
            .err()
            .unwrap_or_default();
        assert!(e.contains("duplicate field `text`"), "{e}");
        // valid JSON of the wrong shape names the field
        let e = parse(r#"{"text": null}"#).err().unwrap_or_default();
        assert!(
            e.starts_with("the body is JSON, but not a message: `text`: invalid type: null"),
            "{e}"
        );
    }
}

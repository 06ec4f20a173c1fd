//! The web page: `ui.html` at `/` and its script modules and stylesheet at
//! `/ui/{asset}`, all compiled in with `include_str!`. No build step, no
//! CDN: the page works offline and talks only to the `/v1` API of the host
//! that served it.
//!
//! Every answer carries `Cache-Control: no-cache` (a new binary serves new
//! files; the browser revalidates) and `X-Content-Type-Options: nosniff`;
//! the page carries a Content-Security-Policy that allows only this
//! origin's scripts, styles and connections, so text that reaches the page
//! cannot run as script even if a rendering bug let it become markup.

use axum::http::HeaderValue;
use axum::http::header;
use axum::response::IntoResponse;
use axum::response::Response;

use super::error::ApiError;
use super::extract::Path;

/// The page's Content-Security-Policy.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The files under `/ui/`: name, content type, body.
pub const ASSETS: &[(&str, &str, &str)] = &[
    ("app.js", JS, include_str!("app.js")),
    ("api.js", JS, include_str!("api.js")),
    ("cards.js", JS, include_str!("cards.js")),
    ("compose.js", JS, include_str!("compose.js")),
    ("dom.js", JS, include_str!("dom.js")),
    ("notices.js", JS, include_str!("notices.js")),
    ("origins.js", JS, include_str!("origins.js")),
    ("outbox.js", JS, include_str!("outbox.js")),
    ("pages.js", JS, include_str!("pages.js")),
    ("rooms.js", JS, include_str!("rooms.js")),
    ("state.js", JS, include_str!("state.js")),
    ("steps.js", JS, include_str!("steps.js")),
    ("tabs.js", JS, include_str!("tabs.js")),
    ("timeline.js", JS, include_str!("timeline.js")),
    ("ui.css", CSS, include_str!("ui.css")),
];

const PAGE: &str = include_str!("ui.html");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut resp = body.into_response();
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// `GET /`: the page.
pub(crate) async fn page() -> Response {
    let mut resp = asset(HTML, PAGE);
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

/// `GET /ui/{asset}`: a script module or the stylesheet.
pub(crate) async fn file(Path(name): Path<String>) -> Result<Response, ApiError> {
    ASSETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, content_type, body)| asset(content_type, body))
        .ok_or_else(|| ApiError::NotFound(format!("no file {name:?} in the web page's assets")))
}

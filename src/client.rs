//! A small client of the HTTP API, used by the CLI.

use std::time::Duration;

use anyhow::Context;
use anyhow::anyhow;
use anyhow::bail;
use futures::Stream;
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::Value;
use serde_json::json;

#[path = "client_sse.rs"]
mod sse;

/// How long the host may take to answer a request (the change stream has
/// no limit: see [`Client::events`]).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Entries [`Client::entries_after`] asks for per page: the API's most
/// (`GET /v1/sessions/{session}/entries`, docs/api.md).
const ENTRIES_PAGE: i64 = 1000;

/// The host answered a request with an error status (the CLI tells a
/// refusal it would get again, a 4xx, from a host that is failing).
#[derive(Debug)]
pub struct HostAnswered {
    /// The status.
    pub status: StatusCode,
    /// The error's code (`error.code`: `too_many_streams`,
    /// `rate_limited`, …), empty when the answer had none.
    pub code: String,
    /// The error's message, or "no details".
    pub message: String,
}

impl std::fmt::Display for HostAnswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the host answered {}: {}", self.status, self.message)
    }
}

impl std::error::Error for HostAnswered {}

/// The `error.code` of an error answer's body, empty when it has none.
pub(crate) fn error_code(body: &Value) -> String {
    body.pointer("/error/code")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The host gave no answer to a request: it could not be reached, the
/// connection broke before the whole answer came, or the answer took
/// longer than the request timeout. Unlike [`HostAnswered`], the request
/// may or may not have taken effect (the CLI sends a message again only
/// with its idempotency key, which the host admits once).
#[derive(Debug)]
pub struct NoAnswer {
    message: String,
}

impl std::fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for NoAnswer {}

/// An API client bound to one host and token.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

/// A server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerEvent {
    /// Event name (`ready`, `change`, `resync`).
    pub event: String,
    /// JSON data.
    pub data: Value,
}

/// `value` as one segment of a request path: every byte but the
/// unreserved ones (letters, digits, `-`, `.`, `_`, `~`) percent-encoded,
/// so that an id with `/`, `?`, `#` or `%` reaches the API as that id.
pub fn segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The base URL of the host at `address`: `http://HOST:PORT` (or
/// `https://`) as given, or a bare `HOST:PORT` with `http://` put in front.
pub(crate) fn base_url(address: &str) -> anyhow::Result<String> {
    let address = address.trim();
    // looked for before the trailing slashes go: `http://` is a scheme
    // with no host, not a host named "http" (QA: "cannot reach the host
    // at http://http:")
    let has_scheme = address.contains("://");
    let address = address.trim_end_matches('/');
    let base = if has_scheme {
        address.to_owned()
    } else {
        format!("http://{address}")
    };
    let hint =
        "expected http://HOST:PORT such as http://127.0.0.1:7878 (set --host or BOTFLEET_HOST)";
    let url = reqwest::Url::parse(&base)
        .map_err(|e| anyhow!("the host address {address:?} is not a URL ({e}); {hint}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        bail!("the host address {address:?} is not an http(s) address; {hint}");
    }
    // the CLI puts `/v1/…` after the address as text: a query or a
    // fragment would swallow it, and credentials in it would be sent
    // with every request besides the token (and show in errors)
    if !url.username().is_empty() || url.password().is_some() {
        bail!(
            "the host address holds a user name or password (user:password@); the API takes \
             only the token (--token or BOTFLEET_TOKEN): drop them; {hint}"
        );
    }
    if url.query().is_some() {
        bail!("the host address {address:?} has a query (?…); drop it; {hint}");
    }
    if url.fragment().is_some() {
        bail!("the host address {address:?} has a fragment (#…); drop it; {hint}");
    }
    Ok(base)
}

impl Client {
    /// A client for the host at `base`: `http://127.0.0.1:7878`, or
    /// `127.0.0.1:7878` (`http://` is assumed).
    pub fn new(base: &str, token: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .context("cannot build the HTTP client")?;
        Ok(Self {
            http,
            base: base_url(base)?,
            token: token.to_owned(),
        })
    }

    /// The URL of `path` (its ids encoded with [`segment`]). A URL drops
    /// `.` and `..` segments, so an id that is one of them cannot be sent:
    /// refused here rather than sent to another path.
    fn url(&self, path: &str) -> anyhow::Result<reqwest::Url> {
        let url = reqwest::Url::parse(&format!("{}{path}", self.base))
            .with_context(|| format!("the host address {} is not a URL", self.base))?;
        let asked = path.split(['?', '#']).next().unwrap_or(path);
        if !url.path().ends_with(asked) {
            bail!("{path:?} cannot be sent: `.` and `..` are not ids");
        }
        Ok(url)
    }

    async fn check(&self, resp: reqwest::Response) -> anyhow::Result<(StatusCode, Value)> {
        let status = resp.status();
        let kind = content_type(&resp);
        // a body cut off (the host went away while answering) is no
        // answer, which the caller may wait out
        let bytes = resp.bytes().await.map_err(|e| self.cut_off(e))?;
        let Ok(body) = serde_json::from_slice::<Value>(&bytes) else {
            // the API answers everything in JSON: an answer that is not is
            // another server's (a wrong --host, a web server, a proxy in
            // front of a host that is down). A success from it is no
            // success: read as one, a page that answers every path looked
            // like a fleet with no bots, approvals or memory.
            let what = self.not_the_api(status, &kind, "JSON");
            if status.is_success() {
                bail!("{what}");
            }
            return Ok((status, json!({ "error": { "message": what } })));
        };
        Ok((status, body))
    }

    /// What to say of an answer `status` with a body of `kind` that is
    /// not the API's (`expected`: its JSON, its event stream).
    fn not_the_api(&self, status: StatusCode, kind: &str, expected: &str) -> String {
        let address = "set --host (or BOTFLEET_HOST) to the address `botfleet run` prints \
                       (`botfleet listening on …`)";
        if status.is_success() {
            format!(
                "the server at {} answered {status} with {kind}, not the API's {expected}: it is not a \
                 botfleet host; {address}",
                self.base
            )
        } else {
            format!(
                "no details: the answer was {kind}, not the API's {expected}, so another server gave \
                 it (a server that is not a botfleet host, or a proxy in front of one that is \
                 down); check that the host runs, and {address}"
            )
        }
    }

    fn describe_error(status: StatusCode, body: &Value) -> anyhow::Error {
        let mut message = body
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("no details")
            .to_owned();
        // the token is the CLI's --token (or BOTFLEET_TOKEN): where to fix it
        if status == StatusCode::UNAUTHORIZED {
            message.push_str("; check --token / BOTFLEET_TOKEN");
        }
        let code = error_code(body);
        anyhow::Error::new(HostAnswered {
            status,
            code,
            message,
        })
    }

    fn connect_error(&self, e: reqwest::Error) -> anyhow::Error {
        let message = if e.is_timeout() && !e.is_connect() {
            self.too_slow(&e)
        } else {
            let causes = with_causes(&e);
            // TLS spoken to a plain-HTTP host fails after the connection
            // was made: the host runs, the address's scheme is wrong
            let tls = self
                .base
                .get(.."https://".len())
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
            let plain = self.base.get("https://".len()..).filter(|_| {
                tls && !causes.contains("tcp connect error") && !causes.contains("dns error")
            });
            match plain {
                Some(rest) => format!(
                    "cannot reach the host at {} over TLS ({causes}); `botfleet run` serves plain \
                     HTTP: without a TLS proxy in front of it, use http://{rest} (set --host or \
                     BOTFLEET_HOST)",
                    self.base
                ),
                None => format!(
                    "cannot reach the host at {} ({}){}; is `botfleet run` running? (set \
                     --host or BOTFLEET_HOST)",
                    self.base,
                    root_cause(&e),
                    self.default_port_note()
                ),
            }
        };
        anyhow::Error::new(NoAnswer { message })
    }

    /// When the host's address gives no port: which one was tried, and
    /// the one the host listens on by default (`--host localhost` tried
    /// port 80, and said only that nothing answered).
    fn default_port_note(&self) -> String {
        match reqwest::Url::parse(&self.base) {
            // (a URL holds no port equal to its scheme's: `:80` given is
            // not "no port", QA)
            Ok(url) if url.port().is_none() && !gives_port(&self.base) => format!(
                "; the address gives no port, so port {} was tried (`botfleet run` listens on \
                 7878 unless --listen says otherwise: --host {}:7878)",
                url.port_or_known_default().unwrap_or(80),
                url.host_str().unwrap_or("HOST")
            ),
            Ok(_) | Err(_) => String::new(),
        }
    }

    /// The body of an answer could not be read to its end.
    fn cut_off(&self, e: reqwest::Error) -> anyhow::Error {
        let message = if e.is_timeout() {
            self.too_slow(&e)
        } else {
            format!(
                "the connection to the host at {} broke before its answer was complete ({e}); \
                 is it restarting?",
                self.base
            )
        };
        anyhow::Error::new(NoAnswer { message })
    }

    fn too_slow(&self, e: &reqwest::Error) -> String {
        format!(
            "the host at {} did not answer within {} s ({e}); is it stopped or overloaded?",
            self.base,
            REQUEST_TIMEOUT.as_secs()
        )
    }

    /// A request to `url` with the token and the request timeout.
    fn request(&self, method: reqwest::Method, url: reqwest::Url) -> reqwest::RequestBuilder {
        self.http
            .request(method, url)
            .bearer_auth(&self.token)
            .timeout(REQUEST_TIMEOUT)
    }

    /// Sends `req`; returns the status and body whatever the status.
    async fn answer(&self, req: reqwest::RequestBuilder) -> anyhow::Result<(StatusCode, Value)> {
        let resp = req.send().await.map_err(|e| self.connect_error(e))?;
        self.check(resp).await
    }

    /// The body of a 2xx answer; other answers are errors.
    fn success((status, body): (StatusCode, Value)) -> anyhow::Result<Value> {
        if !status.is_success() {
            return Err(Self::describe_error(status, &body));
        }
        Ok(body)
    }

    /// `answer` if it has the field `key`, which the API's answer has: a
    /// JSON answer without it is another server's (a wrong --host, a proxy
    /// answering every path, another API), and is an error. (QA: `{"weird":
    /// true}` read as no bots, no approvals, nothing found, exit 0.)
    pub fn expect(&self, answer: Value, key: &str) -> anyhow::Result<Value> {
        if answer.get(key).is_some() {
            return Ok(answer);
        }
        bail!(
            "the server at {} answered JSON without `{key}`, which the botfleet API's answer \
             has: it is not a botfleet host (or not one of this version); set --host (or \
             BOTFLEET_HOST) to the address `botfleet run` prints (`botfleet listening on …`)",
            self.base
        )
    }

    /// GET a JSON document; non-2xx answers are errors.
    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let req = self.request(reqwest::Method::GET, self.url(path)?);
        Self::success(self.answer(req).await?)
    }

    /// DELETE; non-2xx answers are errors.
    pub async fn delete(&self, path: &str) -> anyhow::Result<Value> {
        let req = self.request(reqwest::Method::DELETE, self.url(path)?);
        Self::success(self.answer(req).await?)
    }

    /// GET a JSON document with query parameters (URL-encoded here);
    /// non-2xx answers are errors.
    pub async fn get_query(&self, path: &str, params: &[(&str, &str)]) -> anyhow::Result<Value> {
        let mut url = self.url(path)?;
        if !params.is_empty() {
            url.query_pairs_mut().extend_pairs(params);
        }
        Self::success(self.answer(self.request(reqwest::Method::GET, url)).await?)
    }

    /// POST JSON; returns the status and body whatever the status.
    pub async fn post(
        &self,
        path: &str,
        body: &Value,
        idempotency_key: Option<&str>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let mut req = self
            .request(reqwest::Method::POST, self.url(path)?)
            .json(body);
        if let Some(k) = idempotency_key {
            req = req.header("Idempotency-Key", k);
        }
        self.answer(req).await
    }

    /// POST JSON; non-2xx answers are errors.
    pub async fn post_ok(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        Self::success(self.post(path, body, None).await?)
    }

    /// PUT JSON; non-2xx answers are errors.
    pub async fn put_ok(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        Ok(self.put(path, body).await?.1)
    }

    /// PUT JSON; returns the status of a 2xx answer (`201` created, `200`
    /// replaced) and its body; other answers are errors.
    pub async fn put(&self, path: &str, body: &Value) -> anyhow::Result<(StatusCode, Value)> {
        let req = self
            .request(reqwest::Method::PUT, self.url(path)?)
            .json(body);
        let (status, body) = self.answer(req).await?;
        Ok((status, Self::success((status, body))?))
    }

    /// Sends a user message; returns the status and the admission record.
    pub async fn send_message(
        &self,
        bot: &str,
        text: &str,
        key: &str,
    ) -> anyhow::Result<(StatusCode, Value)> {
        self.post(
            &format!("/v1/bots/{}/messages", segment(bot)),
            &json!({ "text": text }),
            Some(key),
        )
        .await
    }

    /// Entries of a session after `after`, all pages. Pages are read until
    /// one reaches the session's `last_seq` (or is empty), so a host that
    /// answers fewer than [`ENTRIES_PAGE`] per page is read to the end too.
    /// An answer without an `entries` list (a proxy's page, another
    /// server) is an error, never "no entries".
    pub async fn entries_after(&self, session: &str, after: i64) -> anyhow::Result<Vec<Value>> {
        self.entries_between(session, after, None).await
    }

    /// Entries of a session after `after`, up to `until` (inclusive) when
    /// given, else to the end: as [`Client::entries_after`], reading no
    /// page past `until` (`botfleet transcript --last N` reads a long
    /// conversation's end this way, a window at a time).
    pub async fn entries_between(
        &self,
        session: &str,
        after: i64,
        until: Option<i64>,
    ) -> anyhow::Result<Vec<Value>> {
        let of = format!("/v1/sessions/{}", segment(session));
        self.entries_between_of(&of, after, until).await
    }

    /// [`Client::entries_between`] of the entries under `of`: a session
    /// (`/v1/sessions/{id}`) or a room's timeline (`/v1/groups/{room}`).
    pub async fn entries_between_of(
        &self,
        of: &str,
        after: i64,
        until: Option<i64>,
    ) -> anyhow::Result<Vec<Value>> {
        let mut out = Vec::new();
        let mut cursor = after;
        loop {
            let limit = until.map_or(ENTRIES_PAGE, |u| (u - cursor).clamp(1, ENTRIES_PAGE));
            let path = format!("{of}/entries?after={cursor}&limit={limit}");
            let page = self.get(&path).await?;
            let Some(entries) = page.get("entries").and_then(Value::as_array) else {
                bail!(
                    "the host at {} answered GET {path} without an `entries` list, so the \
                     entries cannot be shown; is it a botfleet host (check --host or \
                     BOTFLEET_HOST, and any proxy in front of it)?",
                    self.base
                );
            };
            let last = entries.last().and_then(|e| e["seq"].as_i64());
            let within =
                |e: &&Value| until.is_none_or(|u| e["seq"].as_i64().is_some_and(|s| s <= u));
            out.extend(entries.iter().filter(within).cloned());
            let more = match (last, page["last_seq"].as_i64()) {
                (None, _) => false,
                (Some(last), _) if until.is_some_and(|u| last >= u) => false,
                (Some(last), Some(last_seq)) => last < last_seq,
                // no `last_seq`: a full page may have more after it
                (Some(_), None) => entries.len() >= usize::try_from(limit).unwrap_or(0),
            };
            match last {
                Some(last) if more && last > cursor => cursor = last,
                Some(_) | None => return Ok(out),
            }
        }
    }

    /// The change signals of the user's sessions. No timeout here (one
    /// would cut the stream): the caller bounds the wait for the answer.
    /// The stream ends where [`Client::checked_events`] has an error.
    pub async fn events(&self) -> anyhow::Result<impl Stream<Item = ServerEvent> + Unpin + use<>> {
        let events = self.checked_events().await?;
        Ok(events.scan((), |(), ev| futures::future::ready(ev.ok())))
    }

    /// [`Client::events`], where an event longer than the reader keeps
    /// (a server that is not botfleet's, streaming without line breaks)
    /// is an error item, the last.
    pub async fn checked_events(
        &self,
    ) -> anyhow::Result<impl Stream<Item = anyhow::Result<ServerEvent>> + Unpin + use<>> {
        let resp = self
            .http
            .get(self.url("/v1/events")?)
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| self.connect_error(e))?;
        if !resp.status().is_success() {
            let (status, body) = self.check(resp).await?;
            return Err(Self::describe_error(status, &body));
        }
        let kind = content_type(&resp);
        if kind != "text/event-stream" {
            bail!("{}", self.not_the_api(resp.status(), &kind, "event stream"));
        }
        let bytes = resp.bytes_stream();
        let base = self.base.clone();
        let stream = futures::stream::unfold(
            (bytes, sse::EventReader::default(), Some(base)),
            |(mut bytes, mut reader, mut base)| async move {
                loop {
                    if let Some(ev) = reader.next_event() {
                        return Some((Ok(ev), (bytes, reader, base)));
                    }
                    if reader.too_long() {
                        let base = base.take()?;
                        let e = anyhow!(
                            "the event stream of {base} sent an event of over {} MiB, which a \
                             botfleet host never sends; check that --host names a botfleet host \
                             (not a proxy or another server)",
                            sse::MAX_EVENT_BYTES >> 20
                        );
                        return Some((Err(e), (bytes, reader, None)));
                    }
                    match bytes.next().await {
                        Some(Ok(chunk)) => reader.feed(&chunk),
                        _ => return None,
                    }
                }
            },
        );
        Ok(Box::pin(stream))
    }
}

/// The content type of `resp`, for a message: `text/html`, or "an empty
/// body" / "no content type".
fn content_type(resp: &reqwest::Response) -> String {
    match resp.headers().get(reqwest::header::CONTENT_TYPE) {
        Some(v) => v
            .to_str()
            .unwrap_or("?")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_owned(),
        None if resp.content_length() == Some(0) => "an empty body".to_owned(),
        None => "no content type".to_owned(),
    }
}

/// An error and the causes under it (`error sending request for url
/// (…): client error (Connect): tcp connect error: Connection refused`),
/// each once: reqwest's own message names none of them.
/// The innermost cause of a failed request (`Connection refused (os
/// error 111)`, a name that does not resolve), without reqwest's wrapping
/// around it: the URL of the request (an API route the user never typed)
/// and "client error (Connect)" (QA: the whole chain was noise around the
/// one part that says what happened).
fn root_cause(e: &reqwest::Error) -> String {
    let mut last = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        last = c.to_string();
        cause = c.source();
    }
    last
}

fn with_causes(e: &reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// Whether the address `base` (`scheme://authority/…`) names a port.
fn gives_port(base: &str) -> bool {
    let rest = base.split_once("://").map_or(base, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // past an IPv6 literal's brackets
    let after_host = host_port.rsplit_once(']').map_or(host_port, |(_, p)| p);
    after_host.contains(':')
}

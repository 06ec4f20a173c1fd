//! Where and how requests go: the `/chat/completions` URL made of the
//! base URL, the headers every request carries (the key and the extra
//! header values marked sensitive, `User-Agent: botfleet/VERSION`), and
//! what a 404 or a web page in place of an answer tells the operator.

use reqwest::Url;
use reqwest::header::ACCEPT;
use reqwest::header::ACCEPT_ENCODING;
use reqwest::header::AUTHORIZATION;
use reqwest::header::CONTENT_TYPE;
use reqwest::header::HeaderMap;
use reqwest::header::HeaderName;
use reqwest::header::HeaderValue;
use reqwest::header::USER_AGENT;

use super::super::ModelError;
use super::OpenAiOptions;
use super::redact::shown_base_url;

/// A 404's body with the URL tried (`url`, without its userinfo) and the
/// likely fix: a `base_url` without its `/v1` (the usual one), else a
/// model the server lacks.
pub(super) fn not_found(body: &str, url: &str, options: &OpenAiOptions) -> String {
    let hint = if ends_in_v1(&options.base_url) {
        format!("check that the server has model {:?}", options.model)
    } else {
        format!(
            "base_url {:?} usually ends in /v1 (e.g. http://127.0.0.1:8000/v1)",
            shown_base_url(&options.base_url)
        )
    };
    let said = if body.is_empty() {
        String::new()
    } else {
        format!(" ({body})")
    };
    format!("POST {url} was not found{said}; {hint}")
}

/// A redirect's body: where the server sends the request (`to`, resolved
/// and redacted; `None` without a usable `Location`) and the fix. Model
/// calls follow no redirect: a 301, 302 or 303 turns the POST into a GET,
/// which the server refused (405, or a 404 given the `/v1` advice), and
/// one to another host took the provider's `headers` there, credentials
/// among them (reqwest drops only `Authorization`; QA, 2026-12-05).
pub(super) fn redirected(to: Option<&str>, url: &str) -> String {
    const WHY: &str = "model calls follow no redirect (a POST would arrive as a GET, and the \
                       provider's headers, its credentials among them, would go where it points)";
    let Some(to) = to else {
        return format!(
            "POST {url} was redirected without a usable Location; {WHY}: set base_url to the \
             address the server answers at"
        );
    };
    let shown = shown_url(to);
    let base = Url::parse(to).ok().and_then(|mut u| {
        let path = u
            .path()
            .trim_end_matches('/')
            .strip_suffix("/chat/completions")?
            .to_owned();
        u.set_path(&path);
        // the query stays, a credential in it shown as `***`: an Azure
        // base_url needs its `api-version` (QA)
        u.set_fragment(None);
        Some(shown_url(&shown_base_url(u.as_str())))
    });
    match base {
        Some(base) => {
            format!("POST {url} is redirected to {shown}; {WHY}: set base_url to {base:?}")
        }
        None => format!(
            "POST {url} is redirected to {shown}; {WHY}: set base_url to the API root the \
             server answers at"
        ),
    }
}

/// What a 200 answer that is an HTML page, not a completion, tells the
/// operator: `base_url` points at a web page (a web UI, a proxy's login
/// page) rather than the API, whose root usually ends in `/v1`.
pub(super) fn html_page(url: &str, options: &OpenAiOptions) -> String {
    let shown = shown_base_url(&options.base_url);
    let hint = if ends_in_v1(&options.base_url) {
        format!(
            "check that base_url {shown:?} is the API root of an OpenAI-compatible server, not a \
             web UI in front of it"
        )
    } else {
        format!(
            "base_url {shown:?} should be the API root, which usually ends in /v1 \
             (e.g. http://127.0.0.1:8000/v1), not a web UI"
        )
    };
    format!("POST {url} answered with an HTML page, not a chat completion; {hint}")
}

/// Bytes of an HTML error page's text an error quotes.
const PAGE_TEXT_LIMIT: usize = 200;

/// An error status's body that is an HTML page (a CDN's or a proxy's 502,
/// 503 or 504 page in front of the model server, a web server's error
/// page) as an error quotes it: its title, else its text without the
/// markup (nor its styles and scripts), cut to [`PAGE_TEXT_LIMIT`] bytes;
/// `None` for any other body. Quoted whole, its first 4 KB were markup
/// and inline CSS that never reached the words saying what went wrong.
pub(super) fn html_error_page(body: &str) -> Option<String> {
    let trimmed = body.trim_start();
    let lower = trimmed.to_ascii_lowercase();
    let is_page = lower.starts_with('<')
        && ["<html", "<!doctype html", "<head", "<body", "<title"]
            .iter()
            .any(|tag| lower.contains(tag));
    if !is_page {
        return None;
    }
    // lowercasing ASCII keeps every byte where it was
    let title = lower.find("<title").and_then(|at| {
        let open = at + lower[at..].find('>')? + 1;
        let close = open + lower[open..].find("</title")?;
        Some(page_text(&trimmed[open..close]))
    });
    if let Some(title) = title.filter(|t| !t.is_empty()) {
        return Some(format!("an HTML page titled {:?}", cut(&title)));
    }
    let text = page_text(&without_elements(trimmed, &lower, &["style", "script"]));
    if text.is_empty() {
        return Some("an HTML page without text".to_owned());
    }
    Some(format!("an HTML page saying {:?}", cut(&text)))
}

/// `html` without its tags, its common entities decoded and its runs of
/// whitespace made one space.
fn page_text(html: &str) -> String {
    let mut text = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            // a tag stands between two words
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = [
        ("&lt;", "<"),
        ("&gt;", ">"),
        ("&quot;", "\""),
        ("&#39;", "'"),
        ("&nbsp;", " "),
        ("&amp;", "&"),
    ]
    .iter()
    .fold(text, |text, (entity, plain)| text.replace(entity, plain));
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `html` (`lower` is it in ASCII lowercase) without the elements named
/// `names`, their content included.
fn without_elements(html: &str, lower: &str, names: &[&str]) -> String {
    let mut kept = String::with_capacity(html.len());
    let mut at = 0;
    while at < html.len() {
        let next = names
            .iter()
            .filter_map(|name| {
                let open = at + lower[at..].find(&format!("<{name}"))?;
                let close = format!("</{name}>");
                let end = lower[open..]
                    .find(&close)
                    .map_or(html.len(), |i| open + i + close.len());
                Some((open, end))
            })
            .min();
        let Some((open, end)) = next else {
            kept.push_str(&html[at..]);
            break;
        };
        kept.push_str(&html[at..open]);
        kept.push(' ');
        at = end;
    }
    kept
}

/// `text` cut to [`PAGE_TEXT_LIMIT`] bytes (on a char boundary), with `…`
/// where it was cut.
fn cut(text: &str) -> String {
    if text.len() <= PAGE_TEXT_LIMIT {
        return text.to_owned();
    }
    let mut end = PAGE_TEXT_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The `User-Agent` of every request, so a provider's logs tell botfleet's
/// traffic apart; an extra header may replace it.
const BOTFLEET_AGENT: &str = concat!("botfleet/", env!("CARGO_PKG_VERSION"));

/// `{base_url}/chat/completions`: the segments are added to the base
/// URL's path, so a query it carries (Azure OpenAI's
/// `?api-version=2024-10-21`) stays the query and reaches the server. A
/// base URL that is not http(s), or that has a fragment (`#…`, never
/// sent), is a configuration error naming it without its userinfo.
pub(super) fn chat_completions_url(base_url: &str) -> Result<Url, ModelError> {
    let shown = shown_base_url(base_url);
    let mut url = Url::parse(base_url.trim())
        .map_err(|e| ModelError::Config(format!("model base URL {shown:?}: {e}")))?;
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(ModelError::Config(format!(
                "model base URL {shown:?}: scheme {other:?} is not http or https"
            )));
        }
    }
    // `http:///v1`: the parser takes `v1` for the host (every call then
    // asked DNS for it: QA). It skips any number of `/` and `\\` after
    // the scheme (`http://\\v1`, `http:/v1` and `http:v1` all have the
    // host `v1`: QA, 2026-12-05), so exactly `//` and then a host it is
    let after = base_url.trim().split_once(':').map_or("", |(_, rest)| rest);
    let separators = after
        .chars()
        .take_while(|c| matches!(c, '/' | '\\'))
        .count();
    if separators != 2 || !after.starts_with("//") || after.len() == 2 {
        let problem = if separators > 2 || after.len() == separators {
            "has no host after `//`"
        } else {
            "does not have `//` and the host after its scheme"
        };
        return Err(ModelError::Config(format!(
            "model base URL {shown:?} {problem}; write it as \
             http://HOST:PORT/v1 (e.g. \"http://127.0.0.1:8000/v1\")"
        )));
    }
    // the parser reads `\` as `/` (WHATWG): `http://127.0.0.1:9\@api.openai.com/v1`
    // calls 127.0.0.1:9 with the path `/@api.openai.com/v1`, while the
    // banner and check-config read as api.openai.com (QA, 2026-12-05)
    if base_url.contains('\\') {
        return Err(ModelError::Config(format!(
            "model base URL {shown:?} holds a backslash, which a URL reads as `/`; write it \
             with `/` only, as http://HOST:PORT/v1 (e.g. \"http://127.0.0.1:8000/v1\")"
        )));
    }
    if url.fragment().is_some() {
        return Err(ModelError::Config(format!(
            "model base URL {shown:?}: the part from `#` on is never sent to a server; remove it \
             (a query such as ?api-version=… is kept)"
        )));
    }
    // `/v1/` as `/v1`; the query and its place are the URL's own
    let path = format!("{}/chat/completions", url.path().trim_end_matches('/'));
    url.set_path(&path);
    Ok(url)
}

/// Words in the name of a query parameter whose value is a credential
/// (some gateways take the key as `?key=…` or `?token=…`, a signed URL a
/// `sig`), lowercase.
const SECRET_QUERY_WORDS: [&str; 6] = ["key", "token", "secret", "sig", "pass", "auth"];

/// Whether a query parameter named `name` holds a credential.
fn secret_query_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_QUERY_WORDS.iter().any(|w| name.contains(w))
}

/// The values of `url`'s query parameters that hold a credential, each as
/// the URL writes it (percent-encoded) and decoded: what a redactor must
/// hide, since a connection error or a server's answer quotes the URL
/// whole (QA: `?api_key=…` masked where the host shows the URL, and in
/// clear in reqwest's "error sending request for url (…)").
pub(super) fn secret_query_values(url: &Url) -> Vec<String> {
    // decoded as the parser reads them (`%2B`, `+` for a space)
    let mut values: Vec<String> = url
        .query_pairs()
        .filter(|(name, value)| !value.is_empty() && secret_query_name(name))
        .map(|(_, value)| value.into_owned())
        .collect();
    // and as written: a name written encoded is rare enough that its
    // value's decoded form above covers it
    for pair in url.query().unwrap_or_default().split('&') {
        if let Some((name, raw)) = pair.split_once('=')
            && !raw.is_empty()
            && secret_query_name(name)
            && !values.iter().any(|v| v == raw)
        {
            values.push(raw.to_owned());
        }
    }
    values
}

/// `url` (already without its userinfo) as texts show it: the value of
/// each query parameter that looks like a credential as `***`. A query
/// such as `api-version=2024-10-21` is shown as it is.
pub(super) fn shown_url(url: &str) -> String {
    let Ok(mut parsed) = Url::parse(url) else {
        return url.to_owned();
    };
    let pairs: Vec<(String, String)> = parsed
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if !pairs.iter().any(|(k, _)| secret_query_name(k)) {
        return url.to_owned();
    }
    parsed
        .query_pairs_mut()
        .clear()
        .extend_pairs(pairs.iter().map(|(k, v)| {
            (
                k.as_str(),
                if secret_query_name(k) {
                    "***"
                } else {
                    v.as_str()
                },
            )
        }));
    parsed.to_string()
}

/// Whether the path of `base_url` ends in `/v1` (a query after it aside),
/// as the API root of an OpenAI-compatible server usually does.
fn ends_in_v1(base_url: &str) -> bool {
    match Url::parse(base_url.trim()) {
        Ok(url) => url.path().trim_end_matches('/').ends_with("/v1"),
        Err(_) => base_url.trim_end_matches('/').ends_with("/v1"),
    }
}

/// The headers of every request: JSON in, SSE or JSON out, uncompressed
/// (botfleet decompresses nothing: [`compressed`]), botfleet as the user
/// agent, the key as a bearer token (without the whitespace
/// around it, which a key pasted into a variable often brings), the extra
/// headers; credentials marked sensitive.
pub(super) fn request_headers(options: &OpenAiOptions) -> Result<HeaderMap, ModelError> {
    let mut headers = HeaderMap::new();
    headers.insert(USER_AGENT, HeaderValue::from_static(BOTFLEET_AGENT));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static(if options.stream {
            "text/event-stream"
        } else {
            "application/json"
        }),
    );
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    if let Some(key) = options
        .api_key
        .as_deref()
        .map(str::trim)
        .filter(|key| !key.is_empty())
    {
        if key.chars().any(char::is_whitespace) {
            return Err(ModelError::Config(
                "the API key has whitespace inside it; set it to the key alone".into(),
            ));
        }
        let mut value = HeaderValue::try_from(format!("Bearer {key}")).map_err(|_| {
            ModelError::Config("the API key contains characters not allowed in a header".into())
        })?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    for (name, value) in &options.extra_headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ModelError::Config(format!("invalid header name {name:?}")))?;
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| ModelError::Config(format!("invalid value for header {name:?}")))?;
        value.set_sensitive(true);
        headers.insert(header, value);
    }
    Ok(headers)
}

/// The `Content-Encoding` of an answer sent compressed (anything but
/// `identity`), which botfleet does not decompress: its first 40
/// characters, to be named in the error. The request asks for none, but
/// a server or a proxy in front of it may compress anyway; its body was
/// quoted as the compressed bytes it is (QA).
/// Every `Content-Encoding` header is read, each of its comma-separated
/// codings: a proxy may add `gzip` after an upstream's `identity` (QA:
/// only the first header was read, and the bytes were quoted again).
pub(super) fn compressed(headers: &HeaderMap) -> Option<String> {
    let codings: Vec<String> = headers
        .get_all(reqwest::header::CONTENT_ENCODING)
        .iter()
        .flat_map(|value| {
            String::from_utf8_lossy(value.as_bytes())
                .split(',')
                .map(|c| c.trim().to_owned())
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case("identity"))
        .collect();
    if codings.is_empty() {
        return None;
    }
    Some(codings.join(", ").chars().take(40).collect())
}

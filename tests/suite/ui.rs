//! The web page and the API's schema: the page and its files are served
//! with the right types and headers, every `/v1` path the page's script
//! calls is a route of the router (a wrong token answers 401, not 404),
//! and docs/openapi.yaml documents exactly the router's routes.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use botfleet::api::UI_ASSETS;
use botfleet::api::routes;
use botfleet_memory::ApprovalId;
use botfleet_memory::ApprovalStatus;
use botfleet_memory::EntryKind;
use botfleet_memory::TurnStatus;
use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

/// Routes that serve the page rather than the API (not in the schema).
const PAGE_ROUTES: &[&str] = &["/", "/ui/{asset}"];

async fn host() -> TestHost {
    TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await
}

fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// What follows each `prefix` in `text`, up to the next `"`.
fn quoted_after<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let tail = &rest[i + prefix.len()..];
        let end = tail.find('"').unwrap_or(tail.len());
        out.push(&tail[..end]);
        rest = &tail[end..];
    }
    out
}

#[tokio::test]
async fn page_and_its_files_are_served() {
    let host = host().await;
    let resp = host
        .http
        .get(format!("{}/", host.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-type"), "text/html; charset=utf-8");
    assert_eq!(header(&resp, "x-content-type-options"), "nosniff");
    let csp = header(&resp, "content-security-policy");
    for rule in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
    ] {
        assert!(csp.contains(rule), "CSP {csp:?} lacks {rule:?}");
    }
    let html = resp.text().await.unwrap();

    let names: BTreeSet<&str> = UI_ASSETS.iter().map(|(n, _, _)| *n).collect();
    // every file the page or a module refers to is served
    let mut refs: Vec<String> = quoted_after(&html, "\"/ui/")
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert!(refs.contains(&"app.js".to_owned()), "{html}");
    for (name, content_type, body) in UI_ASSETS {
        let resp = host
            .http
            .get(format!("{}/ui/{name}", host.url))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{name}");
        let expected = if name.ends_with(".js") {
            "text/javascript; charset=utf-8"
        } else {
            "text/css; charset=utf-8"
        };
        assert_eq!(*content_type, expected, "{name}");
        assert_eq!(header(&resp, "content-type"), expected, "{name}");
        assert_eq!(header(&resp, "cache-control"), "no-cache", "{name}");
        assert_eq!(resp.text().await.unwrap(), *body, "{name}");
        refs.extend(
            quoted_after(body, "from \"./")
                .into_iter()
                .map(str::to_owned),
        );
    }
    for r in &refs {
        assert!(
            names.contains(r.as_str()),
            "{r} is referenced but not served"
        );
    }
    // and nothing is loaded from elsewhere: the page works offline
    for attr in ["src=\"", "href=\""] {
        for value in quoted_after(&html, attr) {
            assert!(
                value.starts_with('/') || value.starts_with('#') || value.starts_with("data:"),
                "the page loads {value:?} from elsewhere"
            );
        }
    }
    for (name, _, body) in UI_ASSETS {
        for value in quoted_after(body, "from \"") {
            assert!(
                value.starts_with("./"),
                "{name} imports {value:?} from elsewhere"
            );
        }
        assert!(
            !body.contains("@import") && !body.contains("url("),
            "{name} loads a resource from elsewhere"
        );
    }

    let (status, body) = host.get("/ui/missing.js", "").await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "not_found", "{body}");
    host.shutdown().await;
}

/// The `API` table of api.js: name → (method, path template). Every
/// `"/v1/…"` literal of the page's script must be in that table.
fn page_api_calls() -> BTreeMap<String, (String, String)> {
    let mut table = BTreeMap::new();
    for (name, _, body) in UI_ASSETS {
        for quote in ['`', '\''] {
            assert!(
                !body.contains(&format!("{quote}/v1/")),
                "{name} builds a /v1 path outside the API table of api.js"
            );
        }
        for line in body.lines().filter(|l| l.contains("\"/v1/")) {
            // `  bots: ["GET", "/v1/bots"],`
            let parsed = line
                .trim()
                .trim_end_matches(',')
                .split_once(": [")
                .and_then(|(key, rest)| {
                    let rest = rest.strip_suffix(']')?;
                    let (method, path) = rest.split_once(", ")?;
                    Some((
                        key.to_owned(),
                        method.trim_matches('"').to_owned(),
                        path.trim_matches('"').to_owned(),
                    ))
                });
            let Some((key, method, path)) = parsed else {
                panic!("{name}: a /v1 path outside the API table of api.js: {line:?}");
            };
            assert_eq!(*name, "api.js", "the API table lives in api.js: {line:?}");
            table.insert(key, (method, path));
        }
    }
    table
}

#[tokio::test]
async fn every_path_the_page_calls_is_a_route() {
    let calls = page_api_calls();
    assert!(calls.len() >= 15, "{calls:?}");
    let served: BTreeSet<(String, String)> = routes()
        .into_iter()
        .map(|(m, p)| (m.to_owned(), p.to_owned()))
        .collect();
    for (key, call) in &calls {
        assert!(
            served.contains(call),
            "API.{key} = {call:?} is not a route of the router"
        );
    }

    // and the running host answers each of them with 401 for a wrong
    // token: the route exists and is authenticated
    let host = host().await;
    for (key, (method, template)) in &calls {
        let mut path = template.clone();
        for (param, value) in [
            ("{bot}", "r"),
            ("{group}", "standup"),
            ("{name}", "GITHUB_TOKEN"),
            ("{session}", "0192f0c4-8f7a-7cc3-9a55-6f1b3c2d4e5f"),
            ("{turn}", "0192f0c4-8f7a-7cc3-9a55-6f1b3c2d4e5f"),
            ("{id}", "0192f0c4-8f7a-7cc3-9a55-6f1b3c2d4e5f"),
        ] {
            path = path.replace(param, value);
        }
        assert!(
            !path.contains('{'),
            "API.{key}: unknown placeholder in {template}"
        );
        let method: reqwest::Method = method.parse().unwrap();
        let resp = host
            .http
            .request(method.clone(), format!("{}{path}", host.url))
            .bearer_auth("not-a-token")
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        assert_eq!(
            status, 401,
            "API.{key}: {method} {path} answered {status} {body}"
        );
        assert_eq!(body["error"]["code"], "unauthorized", "API.{key}: {body}");
    }
    host.shutdown().await;
}

fn openapi() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::from_str(&text)
        .unwrap_or_else(|e| panic!("docs/openapi.yaml is not valid YAML: {e}"))
}

const METHODS: &[&str] = &["get", "post", "put", "delete", "patch", "head", "options"];

/// `$ref`s in `v` that do not resolve in `doc`.
fn broken_refs(doc: &Value, v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if k == "$ref" {
                    let target = child.as_str().unwrap_or_default();
                    let resolves = target
                        .strip_prefix('#')
                        .and_then(|p| doc.pointer(p))
                        .is_some();
                    if !resolves {
                        out.push(format!("{at}: {target}"));
                    }
                } else {
                    broken_refs(doc, child, &format!("{at}/{k}"), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                broken_refs(doc, child, &format!("{at}/{i}"), out);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// A parameter object, following a `$ref`.
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v["$ref"].as_str().and_then(|r| r.strip_prefix('#')) {
        Some(p) => doc.pointer(p).unwrap_or(&Value::Null),
        None => v,
    }
}

#[test]
fn openapi_documents_exactly_the_routes() {
    let doc = openapi();
    let version = doc["openapi"].as_str().unwrap_or_default();
    assert!(version.starts_with("3.1"), "openapi: {version:?}");

    let paths = doc["paths"].as_object().expect("paths");
    let mut documented = BTreeSet::new();
    let mut operation_ids = BTreeSet::new();
    let mut problems = Vec::new();
    for (path, item) in paths {
        let placeholders: BTreeSet<String> = path
            .split('{')
            .skip(1)
            .filter_map(|s| s.split_once('}').map(|(p, _)| p.to_owned()))
            .collect();
        let path_params: Vec<&Value> = item["parameters"]
            .as_array()
            .map(|a| a.iter().map(|p| resolve(&doc, p)).collect())
            .unwrap_or_default();
        for (method, op) in item.as_object().unwrap() {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            let at = format!("{} {path}", method.to_uppercase());
            documented.insert((method.to_uppercase(), path.clone()));
            match op["operationId"].as_str() {
                Some(id) if operation_ids.insert(id.to_owned()) => {}
                other => problems.push(format!("{at}: operationId {other:?} missing or repeated")),
            }
            let declared: BTreeSet<String> = path_params
                .iter()
                .copied()
                .chain(
                    op["parameters"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|p| resolve(&doc, p)),
                )
                .filter(|p| p["in"] == "path")
                .filter_map(|p| p["name"].as_str().map(str::to_owned))
                .collect();
            if declared != placeholders {
                problems.push(format!(
                    "{at}: path parameters declared {declared:?}, in the path {placeholders:?}"
                ));
            }
            let responses = op["responses"].as_object();
            if responses.is_none_or(|r| r.is_empty()) {
                problems.push(format!("{at}: no responses"));
            }
            let open = op["security"].as_array().is_some_and(|s| s.is_empty());
            let lists_401 = responses.is_some_and(|r| r.contains_key("401"));
            if !open && !lists_401 {
                problems.push(format!("{at}: needs a token but does not list 401"));
            }
        }
    }
    broken_refs(&doc, &doc, "#", &mut problems);
    assert!(problems.is_empty(), "docs/openapi.yaml: {problems:#?}");

    let served: BTreeSet<(String, String)> = routes()
        .into_iter()
        .filter(|(_, p)| !PAGE_ROUTES.contains(p))
        .map(|(m, p)| (m.to_owned(), p.to_owned()))
        .collect();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unrouted: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty() && unrouted.is_empty(),
        "routes missing from docs/openapi.yaml: {undocumented:?}; \
         documented there but not routes: {unrouted:?}"
    );
    assert!(served.iter().any(|(_, p)| p == "/v1/bots/{bot}/messages"));

    // the error shape and every entry kind are in the schema
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["ErrorBody"]["required"],
        serde_json::json!(["code", "message"])
    );
    let kinds: BTreeSet<&str> = schemas["EntryBase"]["properties"]["kind"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mapped: BTreeSet<&str> = schemas["Entry"]["allOf"][1]["discriminator"]["mapping"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(kinds, mapped);
    let ours: BTreeSet<&str> = every_entry_kind().iter().map(EntryKind::name).collect();
    assert_eq!(kinds, ours, "docs/openapi.yaml: the entry kinds");
}

/// One entry of every kind. The match below is exhaustive: a new kind
/// stops this test from compiling until it is added here and to
/// docs/openapi.yaml (`EntryBase.kind` and the `Entry` mapping).
fn every_entry_kind() -> Vec<EntryKind> {
    let text = String::new;
    let kinds = vec![
        EntryKind::UserMessage { text: text() },
        EntryKind::AgentMessage {
            from: "r".parse().unwrap(),
            text: text(),
            hop: 0,
            reply_session: None,
            chain: None,
            answers: false,
        },
        EntryKind::Event {
            origin: text(),
            text: text(),
            trusted: false,
            hop: None,
            chain: None,
            asked: None,
        },
        EntryKind::Assistant {
            reasoning: None,
            text: text(),
            tool_calls: Vec::new(),
        },
        EntryKind::ToolResult {
            call_id: text(),
            name: text(),
            content: text(),
            is_error: false,
        },
        EntryKind::Delivery {
            text: text(),
            card: None,
            call_id: text(),
        },
        EntryKind::Reaction {
            target_seq: 1,
            emoji: text(),
            call_id: text(),
        },
        EntryKind::Reminder { text: text() },
        EntryKind::Notice {
            code: text(),
            text: text(),
            retry_turn: None,
        },
        EntryKind::Approval {
            approval: ApprovalId::new_v7(),
            status: ApprovalStatus::Pending,
            tool: text(),
            summary: text(),
            reason: text(),
            expires_at: 0,
            expired_by: None,
        },
        EntryKind::TurnEnd {
            status: TurnStatus::Completed,
            inputs: Vec::new(),
            deliveries: 0,
            usage: None,
        },
        EntryKind::Summary {
            text: text(),
            covers_to_seq: 0,
            epoch: 0,
        },
    ];
    for k in &kinds {
        match k {
            EntryKind::UserMessage { .. }
            | EntryKind::AgentMessage { .. }
            | EntryKind::Event { .. }
            | EntryKind::Assistant { .. }
            | EntryKind::ToolResult { .. }
            | EntryKind::Delivery { .. }
            | EntryKind::Reaction { .. }
            | EntryKind::Reminder { .. }
            | EntryKind::Notice { .. }
            | EntryKind::Approval { .. }
            | EntryKind::TurnEnd { .. }
            | EntryKind::Summary { .. } => {}
        }
    }
    kinds
}

#[test]
fn api_md_links_the_schema() {
    let md = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md")).unwrap();
    assert!(
        md.contains("(openapi.yaml)"),
        "docs/api.md should link openapi.yaml"
    );
}

//! docs/openapi.yaml against what the host answers: live responses of the
//! read routes are checked against their documented schema (types,
//! required fields, and no undocumented field), and the document has no
//! stray keys (a comma in an unquoted flow-mapping description cuts it
//! short and makes its tail a key).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

pub(super) fn openapi() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::from_str(&text)
        .unwrap_or_else(|e| panic!("docs/openapi.yaml is not valid YAML: {e}"))
}

/// No mapping of the spec holds a key twice: a lenient reader keeps the
/// last, and the first is lost without a word (QA, schemathesis: the 401's
/// header and body were written under the next response, which then had
/// two `headers:`).
#[test]
fn the_spec_has_no_key_twice() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    if let Err(e) = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&text) {
        panic!("docs/openapi.yaml: {e}");
    }
}

/// The schema of `GET path`'s `200` answer.
fn answer_schema<'a>(doc: &'a Value, path: &str) -> &'a Value {
    let schema =
        &doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"];
    assert!(schema.is_object(), "no 200 schema for GET {path}");
    schema
}

/// Whether `value` is of the JSON Schema type `name`.
fn has_type(value: &Value, name: &str) -> bool {
    match value {
        Value::Null => name == "null",
        Value::Bool(_) => name == "boolean",
        Value::Number(n) => name == "number" || (name == "integer" && !n.is_f64()),
        Value::String(_) => name == "string",
        Value::Array(_) => name == "array",
        Value::Object(_) => name == "object",
    }
}

/// What in `value` does not follow `schema`, one line each, pushed to
/// `out`. The JSON Schema subset the document uses: `$ref`, `type`,
/// `const`, `enum`, `minimum`, `oneOf`, `anyOf`, `allOf`, `required`,
/// `properties`, `additionalProperties`, `items`. An object whose schema
/// lists `properties` (outside an `allOf`, which spreads them over parts)
/// may have no other field: an undocumented field is a gap in the docs.
fn check(doc: &Value, schema: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    check_in(doc, schema, value, at, false, out);
}

fn check_in(
    doc: &Value,
    schema: &Value,
    value: &Value,
    at: &str,
    in_all_of: bool,
    out: &mut Vec<String>,
) {
    if let Some(target) = schema["$ref"].as_str() {
        match target.strip_prefix('#').and_then(|p| doc.pointer(p)) {
            Some(s) => check_in(doc, s, value, at, in_all_of, out),
            None => out.push(format!("{at}: $ref {target} does not resolve")),
        }
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|t| has_type(value, t)) {
        out.push(format!("{at}: {value} is not of type {types:?}"));
        return;
    }
    if let Some(c) = schema.get("const")
        && c != value
    {
        out.push(format!("{at}: {value} is not {c}"));
    }
    if let Some(options) = schema["enum"].as_array()
        && !options.contains(value)
    {
        out.push(format!("{at}: {value} is not one of {options:?}"));
    }
    if let (Some(min), Some(n)) = (schema["minimum"].as_f64(), value.as_f64())
        && n < min
    {
        out.push(format!("{at}: {n} is under the minimum {min}"));
    }
    let fits = |s: &Value, all_of: bool| {
        let mut sub = Vec::new();
        check_in(doc, s, value, at, all_of, &mut sub);
        sub
    };
    if let Some(parts) = schema["allOf"].as_array() {
        for part in parts {
            out.extend(fits(part, true));
        }
    }
    for (key, exactly_one) in [("oneOf", true), ("anyOf", false)] {
        if let Some(options) = schema[key].as_array() {
            let matching = options
                .iter()
                .filter(|o| fits(o, in_all_of).is_empty())
                .count();
            if matching == 0 || (exactly_one && matching > 1) {
                out.push(format!(
                    "{at}: {value} matches {matching} of the {key} options"
                ));
            }
        }
    }
    if let Value::Object(fields) = value {
        for name in schema["required"].as_array().into_iter().flatten() {
            let name = name.as_str().unwrap_or_default();
            if !fields.contains_key(name) {
                out.push(format!("{at}: the required field `{name}` is missing"));
            }
        }
        let properties = schema["properties"].as_object();
        for (name, field) in fields {
            let at = format!("{at}.{name}");
            match properties.and_then(|p| p.get(name)) {
                Some(s) => check_in(doc, s, field, &at, false, out),
                None => match &schema["additionalProperties"] {
                    Value::Bool(false) => out.push(format!("{at}: not allowed")),
                    s @ Value::Object(_) => check_in(doc, s, field, &at, false, out),
                    _ => {}
                },
            }
        }
        // the parts of an `allOf` document the fields together: checked
        // once, where the `allOf` is (a `$ref` alone is checked where it
        // points)
        let own = schema.get("properties").is_some() || schema.get("allOf").is_some();
        if !in_all_of
            && own
            && let Some(known) = documented(doc, schema, value)
        {
            for name in fields.keys().filter(|n| !known.contains(n.as_str())) {
                out.push(format!("{at}.{name}: not documented"));
            }
        }
    }
    if let (Value::Array(items), Some(s)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check_in(doc, s, item, &format!("{at}[{i}]"), false, out);
        }
    }
}

/// The fields `schema` documents for the object `value`: its
/// `properties`, with those of its `$ref`, of its `allOf` parts and of the
/// `oneOf`/`anyOf` options `value` fits. `None` when it documents none or
/// takes any field (`additionalProperties`).
fn documented(doc: &Value, schema: &Value, value: &Value) -> Option<BTreeSet<String>> {
    if !matches!(
        schema["additionalProperties"],
        Value::Null | Value::Bool(false)
    ) {
        return None;
    }
    let mut known: Option<BTreeSet<String>> = schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect());
    let mut parts: Vec<&Value> = Vec::new();
    if let Some(target) = schema["$ref"].as_str()
        && let Some(s) = target.strip_prefix('#').and_then(|p| doc.pointer(p))
    {
        parts.push(s);
    }
    parts.extend(schema["allOf"].as_array().into_iter().flatten());
    for key in ["oneOf", "anyOf"] {
        parts.extend(schema[key].as_array().into_iter().flatten().filter(|o| {
            let mut sub = Vec::new();
            check_in(doc, o, value, "", true, &mut sub);
            sub.is_empty()
        }));
    }
    for part in parts {
        if let Some(more) = documented(doc, part, value) {
            known.get_or_insert_default().extend(more);
        }
    }
    known
}

#[tokio::test]
async fn read_answers_follow_the_documented_schema() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot_lines("[[bots.hooks]]\nname = \"gh\"\nsecret = \"a-hook-secret-of-some-length\"\n")
        .start()
        .await;
    // a turn, so that the counts and the usage have something in them
    let (status, sent) = host.send("r", "hello", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;

    let doc = openapi();
    let mut problems = Vec::new();
    let (_, turns) = host.get("/v1/bots/r/turns", TOKEN).await;
    let turn = turns["turns"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for (template, path) in [
        ("/v1/bots", "/v1/bots".to_owned()),
        ("/v1/bots/{bot}", "/v1/bots/r".to_owned()),
        ("/v1/bots/{bot}/session", "/v1/bots/r/session".to_owned()),
        ("/v1/bots/{bot}/turns", "/v1/bots/r/turns".to_owned()),
        ("/v1/turns/{turn}", format!("/v1/turns/{turn}")),
        ("/v1/bots/{bot}/memory", "/v1/bots/r/memory".to_owned()),
        ("/v1/bots/{bot}/reviews", "/v1/bots/r/reviews".to_owned()),
        ("/v1/bots/{bot}/routines", "/v1/bots/r/routines".to_owned()),
        ("/v1/bots/{bot}/hooks", "/v1/bots/r/hooks".to_owned()),
        (
            "/v1/sessions/{session}/entries",
            format!("/v1/sessions/{session}/entries"),
        ),
        ("/v1/approvals", "/v1/approvals".to_owned()),
        ("/v1/groups", "/v1/groups".to_owned()),
        ("/v1/search", "/v1/search?q=hello".to_owned()),
        ("/v1/secrets", "/v1/secrets".to_owned()),
    ] {
        let (status, body) = host.get(&path, TOKEN).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        check(
            &doc,
            answer_schema(&doc, template),
            &body,
            &format!("GET {path}"),
            &mut problems,
        );
    }
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let usage = &bots["bots"][0]["usage"];
    assert!(usage["total"]["calls"].as_u64() > Some(0), "{usage}");
    assert!(problems.is_empty(), "docs/openapi.yaml: {problems:#?}");
    host.shutdown().await;
}

/// Keys of a schema's `properties` that hold no schema: the tail of a
/// description cut at a comma (`{ description: a (b, c). }` reads as
/// keys `description` and `c).`).
fn stray_keys(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                if child.is_null() {
                    out.push(format!("{at}/{k}"));
                }
                stray_keys(child, &format!("{at}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                stray_keys(child, &format!("{at}/{i}"), out);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

#[test]
fn the_schema_has_no_keys_without_a_value() {
    let mut stray = Vec::new();
    stray_keys(&openapi(), "#", &mut stray);
    assert!(
        stray.is_empty(),
        "docs/openapi.yaml: keys without a value (quote descriptions with commas): {stray:#?}"
    );
}

#[test]
fn the_checker_catches_what_it_should() {
    let doc = serde_json::json!({"components": {"schemas": {
        "Tokens": {"type": "object", "required": ["calls"], "properties": {"calls": {"type": "integer"}}},
        "Usage": {"type": "object", "required": ["total"], "properties": {"total": {"$ref": "#/components/schemas/Tokens"}}},
    }}});
    let schema = &doc["components"]["schemas"]["Usage"];
    let mut out = Vec::new();
    check(
        &doc,
        schema,
        &serde_json::json!({"total": {"calls": 2}}),
        "u",
        &mut out,
    );
    assert_eq!(out, Vec::<String>::new());
    check(
        &doc,
        schema,
        &serde_json::json!({"total": 12}),
        "u",
        &mut out,
    );
    check(
        &doc,
        schema,
        &serde_json::json!({"total": {"calls": 1}, "today": 3}),
        "u",
        &mut out,
    );
    check(&doc, schema, &serde_json::json!({}), "u", &mut out);
    assert_eq!(
        out,
        vec![
            "u.total: 12 is not of type [\"object\"]",
            "u.today: not documented",
            "u: the required field `total` is missing",
        ]
    );
}

/// The schema of `POST path`'s `409` answer.
fn conflict_schema<'a>(doc: &'a Value, path: &str) -> &'a Value {
    let schema =
        &doc["paths"][path]["post"]["responses"]["409"]["content"]["application/json"]["schema"];
    assert!(schema.is_object(), "no 409 schema for POST {path}");
    schema
}

/// Regression: the `409` of a message to a bot no longer in the config
/// and to a closed room is the plain error shape (no `status`), which the
/// documented `AdmitRefused` (`status` required) did not admit; every
/// real `409` of the two message routes follows the document.
#[tokio::test]
async fn message_conflicts_follow_the_documented_schema() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .start()
        .await;
    let doc = openapi();
    let mut problems = Vec::new();
    let mut answers = Vec::new();
    // a key reused with other text: AdmitRefused, to a bot and to a room
    let (status, v) = host.send("r", "hello", Some("k-1")).await;
    assert_eq!(status, 202, "{v}");
    let (status, v) = host.send("r", "other", Some("k-1")).await;
    assert_eq!(status, 409, "{v}");
    answers.push(("/v1/bots/{bot}/messages", v));
    let (status, v) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            r#"{"name": "pair", "members": ["r", "b"]}"#,
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = host
        .post_raw(
            "/v1/groups/pair/messages",
            Some(TOKEN),
            Some("k-1"),
            r#"{"text": "yet another"}"#,
        )
        .await;
    assert_eq!(status, 409, "{v}");
    answers.push(("/v1/groups/{group}/messages", v));
    // a closed room: the plain error shape
    let closed = host
        .http
        .delete(format!("{}/v1/groups/pair", host.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 200);
    let (status, v) = host
        .post_raw(
            "/v1/groups/pair/messages",
            Some(TOKEN),
            None,
            r#"{"text": "anyone?"}"#,
        )
        .await;
    assert_eq!(status, 409, "{v}");
    assert!(v.get("status").is_none(), "{v}");
    answers.push(("/v1/groups/{group}/messages", v));
    // a bot the config no longer lists: the plain error shape
    let fleet = host.shutdown().await.without_bot("b");
    fleet.write();
    let host = crate::support::fleet::restart(fleet).await;
    let (status, v) = host.send("b", "still there?", None).await;
    assert_eq!(status, 409, "{v}");
    assert!(v.get("status").is_none(), "{v}");
    answers.push(("/v1/bots/{bot}/messages", v));
    for (template, body) in &answers {
        check(
            &doc,
            conflict_schema(&doc, template),
            body,
            &format!("409 of POST {template}"),
            &mut problems,
        );
    }
    assert!(problems.is_empty(), "docs/openapi.yaml: {problems:#?}");
    host.shutdown().await;
}

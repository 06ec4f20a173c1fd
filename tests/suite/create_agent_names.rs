//! The names CreateAgent and UpdateAgent refuse, through a real host: a
//! name or id another bot the person can address answers to (in another
//! case or width, an id or a name), a shareable bot of another person's,
//! a removed bot's; and what they let through (another person's private
//! bot's name). The check reads only the bots answering to the new words
//! (`Store::bots_answering_to`), no longer every bot of the fleet; the
//! rules are the same.
//!
//! A new agent given the id of a removed agent of its owner's was told
//! only "already taken; choose another name", with no agent by that id in
//! sight: the refusal says now that a removed agent holds it, and that a
//! removed agent keeps its id.

use serde_json::Value;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

/// One rule of `maker` per message: `<word>` runs the call, then says
/// `<word>: <its result>`.
fn rule(word: &str, tool: &str, args: &str) -> String {
    format!(
        "[[rule]]\nbot = \"maker\"\nmatch = \"^{word}$\"\nsteps = [\n  {{ tool = \"{tool}\", \
         args = {args} }},\n  {{ tool = \"SendMessage\", args = {{ text = \"{word}: {{{{tool_result}}}}\" }} }},\n]\n"
    )
}

fn script() -> String {
    let mut s = String::new();
    for (word, tool, args) in [
        // alice's new agent
        (
            "make-helper",
            "CreateAgent",
            r#"{ id = "helper", name = "Helper", role = "Helps." }"#,
        ),
        // its id in other case; its name in full width
        (
            "case-id",
            "CreateAgent",
            r#"{ id = "HELPER", name = "Assistant", role = "Helps." }"#,
        ),
        (
            "wide-name",
            "CreateAgent",
            r#"{ id = "assist", name = "Ｈｅｌ ｐｅｒ", role = "Helps." }"#,
        ),
        // bob's private bot: its name is free for alice, its id is not
        (
            "bobs-name",
            "CreateAgent",
            r#"{ id = "finder", name = "Scout-Name", role = "Finds." }"#,
        ),
        (
            "bobs-id",
            "CreateAgent",
            r#"{ id = "Scout", name = "Seeker", role = "Seeks." }"#,
        ),
        // bob's shareable bot meets alice's in rooms
        (
            "shared-name",
            "CreateAgent",
            r#"{ id = "watcher", name = "Lookout-Name", role = "Watches." }"#,
        ),
        (
            "rename-shared",
            "UpdateAgent",
            r#"{ agent = "finder", name = "LOOKOUT" }"#,
        ),
        // the id of bob's room, in another case
        (
            "room-id",
            "CreateAgent",
            r#"{ id = "Standup", name = "Standup Bot", role = "Stands up." }"#,
        ),
        // after helper is removed: its id, its name
        (
            "removed-id",
            "CreateAgent",
            r#"{ id = "helper", name = "Helper Two", role = "Helps." }"#,
        ),
        (
            "removed-case-id",
            "CreateAgent",
            r#"{ id = "Helper", name = "Helper Three", role = "Helps." }"#,
        ),
        (
            "removed-name",
            "UpdateAgent",
            r#"{ agent = "finder", name = "helper" }"#,
        ),
    ] {
        s.push_str(&rule(word, tool, args));
    }
    s.push_str(
        "[[rule]]\nsteps = [ { tool = \"SendMessage\", args = { text = \"{{bot}} here\" } } ]\n",
    );
    s
}

/// What `maker` said the call of `word` answered.
async fn said(host: &TestHost, word: &str) -> String {
    let session = host.complete_turn("maker", word).await;
    let lead = format!("{word}: ");
    deliveries(&host.entries(&session).await)
        .into_iter()
        .rev()
        .find_map(|t| t.strip_prefix(&lead).map(str::to_owned))
        .unwrap_or_else(|| panic!("no answer to {word}"))
}

/// The ids of the bots alice sees.
async fn alices_bots(host: &TestHost) -> Vec<String> {
    let (status, list) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 200, "{list}");
    list["bots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn create_and_update_agent_refuse_what_another_bot_answers_to() {
    let host = TestFleet::new()
        .script("s", &script())
        .bot("maker", "s", &["SendMessage", "CreateAgent", "UpdateAgent"])
        .bot_of("scout", "s", &["SendMessage"], "bob")
        .bot_of("lookout", "s", &["SendMessage"], "bob")
        .bot_lines("shareable = true")
        .start()
        .await;

    let made = said(&host, "make-helper").await;
    assert!(made.starts_with("created agent helper (Helper)"), "{made}");

    // alice's helper answers to `helper` in any case and width
    assert_eq!(
        said(&host, "case-id").await,
        "error: the agent helper (\"Helper\") already answers to \"helper\" (a bot's id or \
         name, ignoring case): @helper in a room would wake both, and a message to \"helper\" \
         could not tell them apart. Next step: choose another `id`"
    );
    assert_eq!(
        said(&host, "wide-name").await,
        "error: the agent helper (\"Helper\") already answers to \"helper\" (a bot's id or \
         name, ignoring case): @helper in a room would wake both, and a message to \"helper\" \
         could not tell them apart. Next step: choose another name"
    );

    // bob's private scout: its name is alice's to take; its id, in any
    // case, is nobody's, and the refusal does not say whose it is
    let made = said(&host, "bobs-name").await;
    assert!(
        made.starts_with("created agent finder (Scout-Name)"),
        "{made}"
    );
    assert_eq!(
        said(&host, "bobs-id").await,
        "error: the agent id \"Scout\" is already taken. Next step: choose another name for \
         the new agent (or pass another `id`)"
    );

    // bob's shareable lookout meets alice's bots in rooms
    for word in ["shared-name", "rename-shared"] {
        let refused = said(&host, word).await;
        assert!(
            refused.starts_with(
                "error: the agent lookout (\"lookout-name\") already answers to \"lookout"
            ),
            "{word}: {refused}"
        );
    }

    // alice removes helper: its id stays taken, and the refusal says why
    let (status, removed) = host
        .call(reqwest::Method::DELETE, "/v1/bots/helper", TOKEN, None)
        .await;
    assert_eq!(status, 200, "{removed}");
    let removed_id = "error: the agent id \"helper\" is already taken: by your owner's agent \
         helper (\"Helper\"), which was removed; a removed agent keeps its id (its \
         conversations stay readable under it), and it does not come back; no agent was \
         created. Next step: call CreateAgent again with another `id` (e.g. one with a \
         suffix, or from another name)";
    assert_eq!(said(&host, "removed-id").await, removed_id);
    // in another case the check finds it before the store does, saying
    // the id stays the removed bot's (it said "@helper would wake both",
    // of a bot that wakes nothing: QA)
    let refused = said(&host, "removed-case-id").await;
    assert!(
        refused.starts_with("error: \"helper\" reads as the id of helper, a bot its owner removed"),
        "{refused}"
    );
    // and a name that reads as its id is refused alike (its display name
    // alone is free again: `agents_removed_tests`)
    let refused = said(&host, "removed-name").await;
    assert!(
        refused.starts_with("error: \"helper\" reads as the id of helper, a bot its owner removed"),
        "{refused}"
    );

    let mut bots = alices_bots(&host).await;
    bots.sort();
    assert_eq!(bots, ["finder", "helper", "maker"]);
    let (_, finder) = host.get("/v1/bots/finder", TOKEN).await;
    assert_eq!(finder["name"], Value::from("Scout-Name"), "{finder}");
    host.shutdown().await;
}

const SEND_SCRIPT: &str = r#"
[[rule]]
bot = "maker"
match = "^make$"
steps = [
  { tool = "CreateAgent", args = { id = "gamma", name = "Gamma", role = "Helps.", tools = ["SendMessage"] } },
  { tool = "SendMessage", args = { text = "make: {{tool_result}}" } },
]

[[rule]]
bot = "maker"
match = "^rename$"
steps = [
  { tool = "UpdateAgent", args = { agent = "beta", name = "Beta Two" } },
  { tool = "SendMessage", args = { text = "rename: {{tool_result}}" } },
]

[[rule]]
bot = "maker"
match = "^send$"
steps = [
  { tool = "SendToAgent", args = { agent = "BETA two", text = "hello" } },
  { tool = "SendMessage", args = { text = "send: {{tool_result}}" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

/// Writes, behind the host's back, a record of `owner`'s bot `id` that
/// cannot be read (its tools are no list).
fn write_unreadable_bot(host: &TestHost, id: &str, owner: &str) {
    let db = host.fleet.path().join("data/fleet.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    conn.execute(
        "INSERT INTO bots (id, name, owner, role, provider, tools, settings, origin,
                           created_at, updated_at, name_key)
         VALUES (?1, ?1, ?2, '', 's', 'not a list', '{}', 'agent:maker', 0, 0, ?1)",
        [id, owner],
    )
    .unwrap();
}

/// What `maker` said the call of `word` answered ([`SEND_SCRIPT`]).
async fn answered(host: &TestHost, word: &str) -> String {
    let session = host.complete_turn("maker", word).await;
    let lead = format!("{word}: ");
    deliveries(&host.entries(&session).await)
        .into_iter()
        .rev()
        .find_map(|t| t.strip_prefix(&lead).map(str::to_owned))
        .unwrap_or_else(|| panic!("no answer to {word}"))
}

/// CreateAgent's and UpdateAgent's name check reads the bots answering to
/// the new words, and SendToAgent by name the bots answering to the
/// name, not every bot of the fleet (or of the owner): a record of
/// another bot that cannot be read (written by hand, or by another
/// version) no longer stops them. (The check read every bot record of
/// every owner, subagents included, at each call, and a message by name
/// every bot of its owner's: one bad record, anywhere, failed every
/// CreateAgent of the fleet with "could not read the fleet's records".)
#[tokio::test]
async fn name_checks_and_lookups_read_only_the_bots_answering_to_the_name() {
    let host = TestFleet::new()
        .script("s", SEND_SCRIPT)
        .bot(
            "maker",
            "s",
            &["SendMessage", "SendToAgent", "CreateAgent", "UpdateAgent"],
        )
        .bot("beta", "s", &["SendMessage"])
        .start()
        .await;
    write_unreadable_bot(&host, "wreck", "bob");
    let made = answered(&host, "make").await;
    assert!(made.starts_with("created agent gamma (Gamma)"), "{made}");
    let renamed = answered(&host, "rename").await;
    assert!(renamed.starts_with("updated beta (name)"), "{renamed}");

    write_unreadable_bot(&host, "wreck2", "alice");
    let sent = answered(&host, "send").await;
    assert!(sent.starts_with("delivered to beta as message "), "{sent}");
    host.shutdown().await;
}

/// Regression (QA): a fleet.toml bot renamed with UpdateAgent was named
/// by its new name twice in the refusal of a name its id answers to
/// ("named \"Pingy\" now, and \"Pingy\" again when the host restarts");
/// the name it gets back is the file's.
#[tokio::test]
async fn a_clash_with_a_renamed_config_bot_names_the_files_name() {
    let mut script = rule(
        "rename",
        "UpdateAgent",
        r#"{ agent = "pinger", name = "Pingy" }"#,
    );
    script.push_str(&rule(
        "clash",
        "CreateAgent",
        r#"{ id = "pinger2", name = "Pinger", role = "Pings." }"#,
    ));
    let host = TestFleet::new()
        .script("s", &script)
        .bot("maker", "s", &["SendMessage", "CreateAgent", "UpdateAgent"])
        .bot("pinger", "s", &["SendMessage"])
        .start()
        .await;
    let renamed = said(&host, "rename").await;
    assert!(renamed.starts_with("updated pinger (name)"), "{renamed}");
    let refused = said(&host, "clash").await;
    assert!(
        refused.contains(
            "the agent pinger (named \"Pingy\" now, and \"pinger-name\" again when the host \
             restarts: its name in fleet.toml) already answers to \"pinger\""
        ),
        "{refused}"
    );
    host.shutdown().await;
}

/// Regression: a room may not take a bot's id, but CreateAgent could take
/// a room's (any user's, in any case), and search hits and the
/// `transcripts/<id>/` mirror then named both. The store refuses it in
/// the insert's transaction; the refusal does not say whose room it is.
#[tokio::test]
async fn create_agent_refuses_a_rooms_id() {
    let host = TestFleet::new()
        .script("s", &script())
        .bot("maker", "s", &["SendMessage", "CreateAgent", "UpdateAgent"])
        .bot_of("scout", "s", &["SendMessage"], "bob")
        .bot_of("lookout", "s", &["SendMessage"], "bob")
        .start()
        .await;
    let (status, room) = host
        .create_room(BOB_TOKEN, "standup", &["scout", "lookout"])
        .await;
    assert_eq!(status, 201, "{room}");
    assert_eq!(
        said(&host, "room-id").await,
        "error: the agent id \"Standup\" is already taken (agents and rooms share ids). Next \
         step: choose another name for the new agent (or pass another `id`)"
    );
    assert!(
        !alices_bots(&host)
            .await
            .iter()
            .any(|b| b.eq_ignore_ascii_case("standup"))
    );
    host.shutdown().await;
}

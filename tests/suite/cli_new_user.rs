//! What a new user's common mistakes get from the CLI (QA, round 34's
//! first hour): an empty conversation said so, a bot's id typed as its
//! name pointed to the id, a message's words unquoted sent as one text, a
//! room named where a bot goes (and the reverse) pointed to the command,
//! and `--json` errors worded as stderr's, with commands, not API routes.

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::cli;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

#[tokio::test]
async fn common_mistakes_are_pointed_to_what_was_meant() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("assistant", "s", &["SendMessage"])
        .bot("helper", "s", &["SendMessage"])
        .start()
        .await;
    let url = host.url.as_str();

    // an empty conversation, and an empty room
    let (code, out, err) = cli(&["transcript", "assistant"], url, TOKEN).await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(
        err.contains(
            "no messages with assistant yet; start with `botfleet send assistant \"hello\"`"
        ),
        "{err}"
    );
    let (code, _, err) = cli(
        &[
            "group",
            "create",
            "standup",
            "--members",
            "assistant,helper",
        ],
        url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = cli(&["group", "transcript", "standup"], url, TOKEN).await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(err.contains("nothing was said in standup yet"), "{err}");

    // a room of one bot points to `send`; a memory with nothing in it
    // offers nothing to forget
    let (code, _, err) = cli(
        &["group", "create", "solo", "--members", "assistant"],
        url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("botfleet send BOT TEXT"), "{err}");
    let (code, out, err) = cli(&["memory", "assistant"], url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("forget an item"), "{out}");

    // the id typed as the name shows it
    let (code, _, err) = cli(&["send", "Assistant", "hi"], url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(err.contains("did you mean assistant"), "{err}");

    // the quotes forgotten: the words are the message
    let (code, out, err) = cli(
        &["send", "assistant", "hello", "there", "friend"],
        url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "echo: hello there friend");
    let (code, _, err) = cli(&["transcript", "assistant"], url, TOKEN).await;
    assert_eq!(code, 0);
    assert!(!err.contains("no messages"), "{err}");

    // a room where a bot goes, a bot where a room goes
    let (code, _, err) = cli(&["transcript", "standup"], url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("is a room; read it with `botfleet group transcript standup`"),
        "{err}"
    );
    let (code, _, err) = cli(&["group", "send", "assistant", "hi"], url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("assistant is a bot; send to it with `botfleet send assistant TEXT`"),
        "{err}"
    );
    // so is a bot's id given to the room commands that read or change one
    // (QA: only `group send` said so), without the API's route
    for args in [
        &["group", "transcript", "assistant"][..],
        &["group", "close", "assistant"][..],
        &["group", "members", "assistant", "assistant,helper"][..],
    ] {
        let (code, _, err) = cli(args, url, TOKEN).await;
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains("assistant is a bot; list your rooms with `botfleet group list`")
                && err.contains("`botfleet transcript assistant`")
                && !err.contains("/v1/"),
            "{args:?}: {err}"
        );
    }

    // an empty message is a usage error; the CLI's words, not the API's
    // fields, in what the host refuses
    let (code, _, err) = cli(&["send", "assistant", "  "], url, TOKEN).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the message TEXT is empty"), "{err}");
    let (code, _, err) = cli(&["search", "\"buy milk"], url, TOKEN).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("the query: unbalanced quote") && !err.contains("q: "),
        "{err}"
    );
    // a refusal that names the query says so once
    for (words, said) in [
        (
            "-staging",
            "error: the host answered 400 Bad Request: the query only excludes terms",
        ),
        (
            "",
            "error: the host answered 400 Bad Request: the search query is empty",
        ),
    ] {
        let (code, _, err) = cli(&["search", "--", words], url, TOKEN).await;
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains(said) && !err.contains("the query: the"),
            "{err}"
        );
        assert!(!err.contains("query: the search query"), "{err}");
    }
    let (code, _, err) = cli(
        &[
            "routines",
            "put",
            "assistant",
            "daily",
            "--cron",
            "0 25 * * *",
            "--timezone",
            "UTC",
            "--prompt",
            "p",
        ],
        url,
        TOKEN,
    )
    .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("`--cron`")
            && err.contains("the hour field has 25")
            && !err.contains("`cron`"),
        "{err}"
    );

    // --json says what stderr says: the command, not the route
    let (code, out, _) = cli(&["send", "nobody", "hi", "--json"], url, TOKEN).await;
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`botfleet bots`") && !message.contains("/v1/"),
        "{message}"
    );
    host.shutdown().await;
}

/// The help names the variables `--host` and `--token` are read from as
/// `[env: NAME]`: clap wrote an unset `BOTFLEET_HOST` as
/// `[env: BOTFLEET_HOST=]`, which reads as if it were set to nothing.
#[tokio::test]
async fn the_help_names_the_host_variable_without_a_value() {
    let out = tokio::process::Command::new(crate::support::process::BIN)
        .args(["send", "--help"])
        .env_remove("BOTFLEET_HOST")
        .env_remove("BOTFLEET_TOKEN")
        .output()
        .await
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    assert!(help.contains("[env: BOTFLEET_HOST]"), "{help}");
    assert!(help.contains("[env: BOTFLEET_TOKEN]"), "{help}");
    assert!(!help.contains("BOTFLEET_HOST="), "{help}");
}

/// A bot's display name that is no id at all (Chinese, or with a space)
/// is pointed to the id as an ASCII one is (QA: `botfleet send 小明 你好`
/// got only "invalid bot id"); a string that is neither an id nor the
/// name of one of the user's bots is still refused as an invalid id.
#[tokio::test]
async fn a_display_name_that_is_no_id_is_pointed_to_the_id() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("assistant", "s", &["SendMessage"])
        .tables(
            "[[bots]]\nid = \"xiaoming\"\nname = \"小明\"\nrole = \"r\"\nowner = \"alice\"\n\
             provider = \"s\"\ntools = [\"SendMessage\"]\n\n\
             [[bots]]\nid = \"research\"\nname = \"Research Bot\"\nrole = \"r\"\nowner = \"bob\"\n\
             provider = \"s\"\ntools = [\"SendMessage\"]\n",
        )
        .start()
        .await;
    let url = host.url.as_str();
    let (code, _, err) = cli(&["send", "小明", "你好"], url, TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("did you mean xiaoming (\"小明\")"), "{err}");
    let (code, _, err) = cli(&["transcript", "小明"], url, TOKEN).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("did you mean xiaoming"), "{err}");
    // another user's bot is not named
    let (status, v) = host.get("/v1/bots/Research%20Bot", TOKEN).await;
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().contains("invalid bot id"), "{v}");
    assert!(!v.to_string().contains("research"), "{v}");
    let (status, v) = host
        .get("/v1/bots/Research%20Bot", crate::support::fleet::BOB_TOKEN)
        .await;
    assert_eq!(status, 404, "{v}");
    assert!(v.to_string().contains("did you mean research"), "{v}");
    host.shutdown().await;
}

//! The host's error messages as the CLI prints them: where a hint names
//! an API route that a CLI command does (`create a new room (POST
//! /v1/groups)`), the command instead (`botfleet group create`). The
//! host's text is written for API clients and stays theirs; a CLI user
//! had to translate it. A route the message pairs with its command
//! already (`GET /v1/bots or `botfleet bots``) goes with its connector,
//! leaving the command (QA, 2026-12-04: the CLI printed both); a route
//! the CLI has no command for, or whose command the message names
//! elsewhere, is left as it is.

/// `message` with each API route it names replaced by the CLI command
/// that does the same, where there is one.
pub(super) fn for_cli(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some((at, method)) = next_route(rest) {
        let after_method = &rest[at + method.len() + 1..];
        let path_len = after_method
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | ',' | ';' | '`' | '"'))
            .unwrap_or(after_method.len());
        // a sentence's full stop is not part of the path
        let path = after_method[..path_len].trim_end_matches('.');
        let route_end = at + method.len() + 1 + path.len();
        let cli = command(method, path);
        // "ROUTE or `command …`", "ROUTE, `command …`": the command alone
        let paired = cli.as_ref().and_then(|c| {
            let after = &rest[route_end..];
            [" or ", ", "]
                .into_iter()
                .find(|joint| after.starts_with(&format!("{joint}{}", said(c))))
        });
        // "`command …` or `ROUTE`": the command alone too
        let after_command = cli.as_ref().is_some_and(|c| {
            rest[..at].ends_with(" or `")
                && rest[route_end..].starts_with('`')
                && format!("{out}{}", &rest[..at]).contains(&said(c))
        });
        if after_command {
            out.push_str(&rest[..at - " or `".len()]);
            rest = &rest[route_end + 1..];
            continue;
        }
        // "`command …` or ROUTE", the route bare (QA: "list yours with
        // `botfleet approvals` or GET /v1/approvals" kept the route)
        let bare_after_command = cli.as_ref().is_some_and(|c| {
            rest[..at].ends_with("` or ") && format!("{out}{}", &rest[..at]).contains(&said(c))
        });
        if bare_after_command {
            out.push_str(&rest[..at - " or ".len()]);
            rest = &rest[route_end..];
            continue;
        }
        out.push_str(&rest[..at]);
        if let Some(joint) = paired {
            rest = &rest[route_end + joint.len()..];
            continue;
        }
        match cli.filter(|c| !message.contains(&said(c))) {
            Some(cli) => out.push_str(&format!("`{cli}`")),
            None => out.push_str(&rest[at..route_end]),
        }
        rest = &rest[route_end..];
    }
    out.push_str(rest);
    out
}

/// Where the next `METHOD /v1/` of `text` starts, and its method.
fn next_route(text: &str) -> Option<(usize, &'static str)> {
    ["GET", "POST", "PUT", "DELETE"]
        .into_iter()
        .filter_map(|m| text.find(&format!("{m} /v1/")).map(|at| (at, m)))
        .min_by_key(|(at, _)| *at)
}

/// How a message that names command `cli` already would say it: its words
/// before the first argument (`botfleet bots remove` of `botfleet bots
/// remove BOT`), after a backtick.
fn said(cli: &str) -> String {
    let words: Vec<&str> = cli
        .split(' ')
        .take_while(|w| !w.chars().any(|c| c.is_ascii_uppercase()))
        .collect();
    format!("`{}", words.join(" "))
}

/// The CLI command that does what `method path` does, if there is one.
fn command(method: &str, path: &str) -> Option<String> {
    // a query names the arguments: only search has one here
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let segments: Vec<&str> = path.trim_start_matches("/v1/").split('/').collect();
    // a placeholder (`{bot}`, `<subagent>`) reads as the argument's name
    let arg = |s: &str, name: &str| {
        if s.starts_with(['{', '<']) {
            name.to_owned()
        } else {
            s.to_owned()
        }
    };
    Some(match (method, segments.as_slice()) {
        ("POST", ["groups"]) => "botfleet group create NAME --members BOT,BOT".to_owned(),
        ("GET", ["groups"] | ["groups", _]) => "botfleet group list".to_owned(),
        ("DELETE", ["groups", room]) => format!("botfleet group close {}", arg(room, "ROOM")),
        ("GET", ["groups", room, "entries"]) => {
            format!("botfleet group transcript {}", arg(room, "ROOM"))
        }
        ("POST", ["bots", bot, "messages"]) => format!("botfleet send {} TEXT", arg(bot, "BOT")),
        ("POST", ["groups", room, "messages"]) => {
            format!("botfleet group send {} TEXT", arg(room, "ROOM"))
        }
        ("GET", ["bots"]) => "botfleet bots".to_owned(),
        ("DELETE", ["bots", bot]) => format!("botfleet bots remove {}", arg(bot, "BOT")),
        ("GET", ["bots", bot, "hooks"]) => format!("botfleet hooks {}", arg(bot, "BOT")),
        ("GET", ["bots", bot, "routines"]) => format!("botfleet routines {}", arg(bot, "BOT")),
        ("PUT", ["bots", bot, "routines", name]) => format!(
            "botfleet routines put {} {} --cron CRON --timezone ZONE --prompt TEXT",
            arg(bot, "BOT"),
            arg(name, "NAME")
        ),
        ("DELETE", ["bots", bot, "routines", name]) => format!(
            "botfleet routines remove {} {}",
            arg(bot, "BOT"),
            arg(name, "NAME")
        ),
        ("POST", ["bots", bot, "cancel"]) => format!("botfleet cancel {}", arg(bot, "BOT")),
        ("GET", ["search"]) => {
            let session = query
                .split('&')
                .find_map(|p| p.strip_prefix("session="))
                .map(|s| format!(" --session {}", arg(s, "SESSION")))
                .unwrap_or_default();
            format!("botfleet search WORDS{session}")
        }
        ("GET", ["approvals"]) => "botfleet approvals".to_owned(),
        ("GET", ["bots", bot, "memory"]) => format!("botfleet memory {}", arg(bot, "BOT")),
        ("POST", ["turns", turn, "retry"]) => format!("botfleet retry {}", arg(turn, "TURN")),
        _ => return None,
    })
}

/// Where bot `bot` answers the inputs of a retried turn of `session`,
/// whose first page (`GET /v1/sessions/{session}/entries`) is `page`
/// (`Null` when it could not be read): a room member's turn runs again in
/// its own session of the room, not in the person's conversation, which
/// the hint named whatever the session was (QA).
pub(super) fn retried_where(bot: &str, session: &str, page: &serde_json::Value) -> String {
    let peer = page["peer"].as_str().unwrap_or_default();
    match page["kind"].as_str() {
        Some("group") => format!(
            "{bot} answers them again in its own session of room {peer}, where what it says is \
             held, not published: read it with `GET /v1/sessions/{session}/entries`"
        ),
        Some("routine") => format!(
            "the bot answers them in the run's session: `botfleet transcript {bot} --routine {peer}`"
        ),
        Some("hook") => format!(
            "the bot answers them in the run's session: `botfleet transcript {bot} --hook {peer}`"
        ),
        // (it named the API's route, where the CLI has `--with`: QA)
        Some("agent") => format!(
            "{bot} answers them in its conversation with bot {peer}: `botfleet transcript \
             {bot} --with {peer}`"
        ),
        _ => format!("the bot answers them in its conversation: `botfleet transcript {bot}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A retried turn of a bot's conversation with another bot is read
    /// with the CLI's `--with`, not the API's route (QA).
    #[test]
    fn a_retry_between_bots_names_the_transcript_with_the_other_bot() {
        let page = serde_json::json!({ "kind": "agent", "peer": "lead" });
        let hint = retried_where("researcher", "9a51", &page);
        assert!(
            hint.contains("`botfleet transcript researcher --with lead`") && !hint.contains("GET"),
            "{hint}"
        );
    }

    #[test]
    fn routes_with_a_command_read_as_the_command() {
        let cases = [
            (
                "the room is closed: standup takes no more messages. Its timeline stays \
                 readable; create a new room (POST /v1/groups) to go on",
                "the room is closed: standup takes no more messages. Its timeline stays \
                 readable; create a new room (`botfleet group create NAME --members BOT,BOT`) \
                 to go on",
            ),
            (
                "only a bot made by CreateAgent is removed with DELETE /v1/bots/{bot}",
                "only a bot made by CreateAgent is removed with `botfleet bots remove BOT`",
            ),
            (
                "read the room again (GET /v1/groups/r) and post it again",
                "read the room again (`botfleet group list`) and post it again",
            ),
            // (QA: the CLI printed the route to close a room)
            (
                "you may close the room (DELETE /v1/groups/cr) and create a new one",
                "you may close the room (`botfleet group close cr`) and create a new one",
            ),
            (
                "or cancel its turn with POST /v1/bots/<subagent>/cancel), then retry",
                "or cancel its turn with `botfleet cancel BOT`), then retry",
            ),
            // paired with its command already: the command alone (QA,
            // 2026-12-04: both were printed)
            (
                "no bot \"x\" for you; list your bots with GET /v1/bots or `botfleet bots`",
                "no bot \"x\" for you; list your bots with `botfleet bots`",
            ),
            (
                "running turn (POST /v1/bots/s/cancel, `botfleet cancel s`)",
                "running turn (`botfleet cancel s`)",
            ),
            (
                "Your message is saved; retry it with `botfleet retry T` or \
                 `POST /v1/turns/T/retry`, or rephrase it.",
                "Your message is saved; retry it with `botfleet retry T`, or rephrase it.",
            ),
            (
                "forget it by id; list what it holds with GET /v1/bots/{bot}/memory or \
                 `botfleet memory BOT`",
                "forget it by id; list what it holds with `botfleet memory BOT`",
            ),
            // the command first, the route bare after it (QA)
            (
                "no approval A for you; list yours with `botfleet approvals` or GET /v1/approvals",
                "no approval A for you; list yours with `botfleet approvals`",
            ),
            (
                "no bot b; list them with `botfleet bots` or GET /v1/bots.",
                "no bot b; list them with `botfleet bots`.",
            ),
            // a route with a query, paired with its command (QA,
            // 2026-12-05: `pass session=S (botfleet search …)` kept both)
            (
                "\"standup\" is a room. To search only the room's public timeline, give its \
                 session: GET /v1/search?q=WORDS&session=S1 or `botfleet search WORDS \
                 --session S1`",
                "\"standup\" is a room. To search only the room's public timeline, give its \
                 session: `botfleet search WORDS --session S1`",
            ),
            // the command named elsewhere, or no command: as it was
            (
                "retry it with `botfleet retry T` (or POST /v1/turns/T/retry)",
                "retry it with `botfleet retry T` (or POST /v1/turns/T/retry)",
            ),
            (
                "bot \"b\" has no routine \"x\"; list them with GET /v1/bots/b/routines.",
                "bot \"b\" has no routine \"x\"; list them with `botfleet routines b`.",
            ),
            (
                "change it with PUT /v1/bots/{bot}/routines/{name}",
                "change it with `botfleet routines put BOT NAME --cron CRON --timezone ZONE \
                 --prompt TEXT`",
            ),
            (
                "no routine; GET /v1/webhooks lists hooks",
                "no routine; GET /v1/webhooks lists hooks",
            ),
            ("nothing to change", "nothing to change"),
        ];
        for (host, cli) in cases {
            assert_eq!(for_cli(host), cli);
        }
    }
}

//! How `botfleet send` reports the turn that answered a message: the
//! deliveries on stdout (or one JSON object), and on stderr what a person
//! should know when the turn did not complete, or completed with a notice.

use std::process::ExitCode;

use serde_json::Value;
use serde_json::json;

use super::exit;

/// How the turn that answered a message ended.
#[derive(Clone, Copy)]
pub(super) struct Ended<'a> {
    pub(super) turn: &'a str,
    pub(super) status: &'a str,
    /// The turn's notice to people, if it wrote one.
    pub(super) notice: Option<&'a Value>,
    /// A later turn that had the message in its context and completed:
    /// the host refuses a retry then, which would answer it again.
    pub(super) answered_later: Option<&'a str>,
}

impl Ended<'_> {
    /// What to tell a person on stderr: the turn's notice if it wrote one
    /// (a retry hint only when the notice names a turn to retry: a stopped
    /// subagent's turn, say, would be cancelled again; and only when the
    /// notice does not give it already, as those of a failed or cancelled
    /// turn do), else the status.
    /// The turn to retry, if a retry could help: the one the notice names,
    /// or without a notice the turn itself ([`Ended::explain`] suggests it).
    fn retry_turn(&self) -> Option<&str> {
        if self.answered_later.is_some() {
            return None;
        }
        match self.notice {
            Some(n) => n["retry_turn"].as_str(),
            None => Some(self.turn),
        }
    }

    /// Whether a person is told something besides the replies: the turn
    /// did not complete, or it wrote a notice (one that completed after
    /// its reply and stopped there says so: QA, the CLI showed only the
    /// reply, and its user took the bot to be still working).
    fn noticed(&self) -> bool {
        self.status != "completed" || self.notice.is_some()
    }

    fn explain(&self) -> String {
        let turn = self.turn;
        // (QA: the advice to retry was given again, and the host refused
        // that retry as answered)
        if let Some(later) = self.answered_later {
            return format!(
                "the turn ended {} (turn {turn}); a later turn, {later}, had this message in its \
                 context and completed, so it is not retried: its replies are in the \
                 conversation (`botfleet transcript`)",
                self.status
            );
        }
        let retry = format!("retry with `botfleet retry {turn}`");
        match self.notice {
            Some(n) => {
                let text = super::hints::for_cli(n["text"].as_str().unwrap_or(""));
                let text = text.as_str();
                // the notice is a sentence; what follows continues it, so
                // its full stop goes ("a reply (turn …)", not "a reply. (turn …)")
                let clause = text.trim_end().trim_end_matches('.');
                match n["retry_turn"].as_str() {
                    Some(t) if text.contains(&format!("`botfleet retry {t}`")) => text.to_owned(),
                    Some(t) => format!("{clause} (turn {turn}); retry with `botfleet retry {t}`"),
                    None => format!("{clause} (turn {turn})"),
                }
            }
            None if self.status == "undelivered" => {
                format!("the bot ended its turn without replying (turn {turn}); {retry}")
            }
            None => format!("the turn ended {} (turn {turn}); {retry}", self.status),
        }
    }
}

pub(super) fn report(
    ended: &Ended<'_>,
    deliveries: &[Value],
    session: &str,
    seq: i64,
    as_json: bool,
) -> ExitCode {
    let (turn, status) = (ended.turn, ended.status);
    if as_json {
        let mut out = json!({
            "status": status,
            "turn": turn,
            "session": session,
            "seq": seq,
            "deliveries": deliveries.iter().map(|d| json!({"id": d["id"], "seq": d["seq"], "text": d["text"]})).collect::<Vec<_>>(),
        });
        // what stderr says without --json, so that a script can show why
        // and retry (stderr stays silent: stdout is the whole answer)
        if ended.noticed() {
            out["notice"] = json!(ended.explain());
            if let Some(t) = ended.retry_turn() {
                out["retry_turn"] = json!(t);
                out["retry_command"] = json!(format!("botfleet retry {t}"));
            }
        }
        outln!("{}", super::terminal::json(&out));
    } else {
        let texts: Vec<&str> = deliveries
            .iter()
            .filter_map(|d| d["text"].as_str())
            .collect();
        if !texts.is_empty() {
            outln!("{}", texts.join("\n\n"));
        }
    }
    if ended.noticed() && !as_json {
        errln!("{}", ended.explain());
    }
    match status {
        "completed" => ExitCode::SUCCESS,
        "undelivered" => ExitCode::from(exit::UNDELIVERED),
        _ => ExitCode::from(exit::TURN_FAILED),
    }
}

/// A message that reached a bot paused by its daily token budget: no
/// reply until the pause ends.
pub(super) struct Paused<'a> {
    pub(super) bot: &'a str,
    /// The host's `budget_exhausted` notice after the message (written for
    /// a conversation's first message since the pause began).
    pub(super) notice: Option<&'a str>,
    /// When the pause ends (ms since the epoch), from the host's answer
    /// to the message.
    pub(super) until: Option<i64>,
}

/// Ends a `send` whose message reached a paused bot: the host's notice,
/// or a line saying until when, on stderr (in the object with `--json`),
/// and "saved, no reply yet" (5, as when `--timeout` passes), at once
/// instead of waiting out `--timeout` for a reply that comes after the
/// pause.
pub(super) fn paused(pause: &Paused<'_>, session: &str, seq: i64, as_json: bool) -> ExitCode {
    let bot = pause.bot;
    let when = pause
        .until
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string());
    let text = match (pause.notice, &when) {
        (Some(notice), _) => super::hints::for_cli(notice),
        (None, Some(when)) => {
            format!("{bot} is paused until {when}: its daily token budget is spent")
        }
        (None, None) => format!("{bot} is paused: its daily token budget is spent"),
    };
    if as_json {
        outln!(
            "{}",
            super::terminal::json(&json!({
                "status": "paused",
                "session": session,
                "seq": seq,
                "notice": text,
                "paused_until": pause.until,
            }))
        );
    } else {
        errln!(
            "{text}\nyour message is saved (seq {seq}) and will be answered when the pause \
             ends; see `botfleet transcript {bot}`"
        );
    }
    ExitCode::from(exit::TIMEOUT)
}

/// What a wait that ended unanswered adds when the host stopped answering
/// at `lost` (ms) and never came back: since when, and to check it runs
/// ("" while it answered). A bare "no reply within 360 s" of a host that
/// had died read as a slow bot (QA).
pub(super) fn unreachable_since(lost: Option<i64>) -> String {
    let Some(at) = lost.and_then(super::terminal::minute_utc) else {
        return String::new();
    };
    format!(", and the host has not answered since {at} (is `botfleet run` still running?)")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Ended;

    /// Regression: a DM to a stopped subagent printed "retry with `botfleet
    /// retry …`", and the retry was cancelled again; the turn's notice says
    /// why, and names a turn to retry only when there is one.
    #[test]
    fn the_notice_decides_whether_a_retry_is_suggested() {
        let stopped = json!({"code": "subagent_stopped", "text": "this subagent was stopped"});
        let ended = Ended {
            turn: "t1",
            status: "cancelled",
            notice: Some(&stopped),
            answered_later: None,
        };
        let text = ended.explain();
        assert!(text.starts_with("this subagent was stopped"), "{text}");
        assert!(!text.contains("retry"), "{text}");

        let failed = json!({"code": "turn_failed", "text": "the model failed", "retry_turn": "t1"});
        let ended = Ended {
            notice: Some(&failed),
            ..ended
        };
        assert!(ended.explain().ends_with("retry with `botfleet retry t1`"));

        let ended = Ended {
            notice: None,
            status: "undelivered",
            ..ended
        };
        assert!(ended.explain().contains("without replying"));

        // a later turn had the message in its context and completed: no
        // retry is offered, which the host would refuse (QA)
        let ended = Ended {
            notice: Some(&failed),
            status: "failed",
            answered_later: Some("t2"),
            ..ended
        };
        let text = ended.explain();
        assert!(
            text.contains("a later turn, t2,") && !text.contains("botfleet retry"),
            "{text}"
        );
        assert_eq!(ended.retry_turn(), None);
    }

    /// Regression: the notice of a turn that ended without a reply ends
    /// with a full stop, and `send` printed "… a reply. (turn t1); retry
    /// with …"; the turn and the retry hint continue its sentence.
    #[test]
    fn the_turn_and_retry_hint_continue_the_notice() {
        let text = botfleet_actors::prompts().undelivered.render(&[]).unwrap();
        assert!(text.trim_end().ends_with('.'), "{text}");
        let notice = json!({"code": "undelivered", "text": text, "retry_turn": "t1"});
        let ended = Ended {
            turn: "t1",
            status: "undelivered",
            notice: Some(&notice),
            answered_later: None,
        };
        assert_eq!(
            ended.explain(),
            "The bot finished its turn without sending you a reply (turn t1); retry with \
             `botfleet retry t1`"
        );
        let notice = json!({"code": "undelivered", "text": text});
        let ended = Ended {
            notice: Some(&notice),
            ..ended
        };
        assert_eq!(
            ended.explain(),
            "The bot finished its turn without sending you a reply (turn t1)"
        );
    }

    /// Regression: the host's notices of a failed or cancelled turn say
    /// how to retry, and `send` said it again after them.
    #[test]
    fn the_retry_hint_is_said_once() {
        let prompts = botfleet_actors::prompts();
        for (code, template) in [
            ("turn_failed", &prompts.turn_failed),
            ("turn_cancelled", &prompts.turn_cancelled),
        ] {
            let text = template
                .render(&[("error", "the model failed"), ("turn", "t1")])
                .unwrap();
            let notice = json!({"code": code, "text": text, "retry_turn": "t1"});
            let ended = Ended {
                turn: "t1",
                status: "failed",
                notice: Some(&notice),
                answered_later: None,
            };
            let said = ended.explain();
            assert_eq!(said.matches("botfleet retry t1").count(), 1, "{said}");
            // the notice as the CLI says it: its command, not the route
            assert!(
                said.starts_with(&super::super::hints::for_cli(&text)),
                "{said}"
            );
            assert!(!said.contains("/v1/"), "{said}");
        }
    }
}

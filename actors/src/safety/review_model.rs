//! The optional reviewer model: asked about actions the rules allow,
//! through the same [`Model`] trait as turns (`Purpose::Review`), with a
//! strict JSON verdict. It fails closed: any failure is `ask`.

use std::fmt::Write as _;
use std::time::Duration;

use botfleet_memory::Encoding;
use botfleet_memory::TokenUsage;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::Action;
use super::ReviewDecision;
use super::canonical_json;
use crate::model::ChatMessage;
use crate::model::Model;
use crate::model::ModelRequest;
use crate::model::Purpose;
use crate::model::call_usage::call_usage;
use crate::model::reasoning_text;
use crate::prompts::prompts;

/// The reviewer model's answer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelVerdict {
    decision: String,
    #[serde(default)]
    reason: String,
}

/// The reviewer model and what a call of it needs.
pub struct Reviewer<'a> {
    /// The model.
    pub model: &'a dyn Model,
    /// Its provider's encoding, to count its tokens when it reports none.
    pub encoding: Encoding,
    /// The bot's secrets, scrubbed from what the model is shown and from
    /// its failures' texts.
    pub hidden: &'a crate::safety::Redactor,
    /// The host's credentials, scrubbed from what the model is shown.
    pub host: &'a crate::safety::Redactor,
    /// Longest wait for its answer.
    pub timeout: Duration,
}

/// Asks the reviewer model about an action the rules allowed. Any failure
/// (error, timeout, cancellation, an answer that is not the strict JSON
/// verdict) is [`ReviewDecision::Ask`]: the model reviewer fails closed.
/// A failure's text becomes the approval's reason, which people read:
/// it is cleaned of the bot's secrets and the host's credentials first.
/// `usage` gets the call's tokens once the model answered.
pub async fn review_with_model(
    reviewer: &Reviewer<'_>,
    bot: &str,
    action: &Action,
    cancel: &CancellationToken,
    usage: &mut Option<TokenUsage>,
) -> ReviewDecision {
    let Reviewer {
        model,
        encoding,
        hidden,
        host,
        timeout,
    } = *reviewer;
    // what the reviewer is shown is scrubbed as a tool result is, of the
    // bot's secrets and of the host's: a script the action runs may hold
    // them (QA, 2026-12-05: the reviewer, maybe another provider, was sent
    // a secret's value, users' tokens and its own API key, word for word)
    let scrub = |text: &str| host.scrub(&hidden.scrub(text)).into_owned();
    let mut scripts = String::new();
    for s in &action.scripts {
        let _ = write!(
            scripts,
            "\n--- {} ({}, {:?}, sha256 {}) ---\n{}\n",
            s.origin, s.path, s.kind, s.sha256, s.text
        );
    }
    let mut args = String::new();
    canonical_json(&action.args, &mut args);
    let args = scrub(&args);
    let scripts = scrub(&scripts);
    let Ok(system) = prompts().review.render(&[
        ("tool", &action.tool),
        ("surface", action.surface.as_str()),
        ("args", &args),
        (
            "scripts",
            if scripts.is_empty() {
                "(none)"
            } else {
                &scripts
            },
        ),
    ]) else {
        return ReviewDecision::Ask {
            reason: "the reviewer prompt could not be built".into(),
        };
    };
    let request = ModelRequest {
        purpose: Purpose::Review,
        bot: bot.to_owned(),
        messages: vec![
            ChatMessage::System { content: system },
            ChatMessage::User {
                content: scrub(&format!(
                    "Review this {} action: {}",
                    action.tool, action.summary
                )),
            },
        ],
        tools: Vec::new(),
        max_tokens: Some(300),
    };
    let answer = tokio::time::timeout(
        timeout,
        model.complete_hiding(&request, hidden, &mut (), cancel),
    )
    .await;
    let text = match answer {
        Ok(Ok(response)) => {
            // the call's tokens, for the bot's usage and budget (they were
            // counted nowhere: QA, 2026-12-05): as the provider reported
            // them, or counted with `encoding`
            *usage = Some(call_usage(&request, &response, encoding));
            response.text
        }
        Ok(Err(e)) => {
            return ReviewDecision::Ask {
                reason: format!("the reviewer model failed ({e}), so a person must decide"),
            };
        }
        Err(_) => {
            return ReviewDecision::Ask {
                reason: format!(
                    "the reviewer model did not answer within {} s, so a person must decide",
                    timeout.as_secs()
                ),
            };
        }
    };
    // parsed as the model wrote it, and its words scrubbed whole before
    // the reason is cut: a secret the cut went through would show its
    // start (QA); scrubbed before parsing, a secret that is a word of the
    // verdict's JSON (`decision`, `allow`) broke every verdict into "not
    // a valid verdict" (QA, 2026-12-06)
    parse_verdict_scrubbed(&text, &scrub)
}

/// Most characters of the reviewer model's reason kept.
const MAX_REASON_CHARS: usize = 500;

/// Parses the reviewer model's strict JSON verdict (a leading reasoning
/// block, which a thinking model served without a reasoning parser writes
/// into its answer, is skipped; a fenced block is tolerated); anything
/// else is `Ask`.
#[cfg(test)]
pub(crate) fn parse_verdict(text: &str) -> ReviewDecision {
    parse_verdict_scrubbed(text, &|t: &str| t.to_owned())
}

/// [`parse_verdict`], the model's words it quotes (its reason, an
/// unknown decision) passed through `scrub`.
pub(crate) fn parse_verdict_scrubbed(text: &str, scrub: &dyn Fn(&str) -> String) -> ReviewDecision {
    let trimmed = match reasoning_text::after_reasoning(text) {
        Ok(answer) => answer,
        Err(unclosed) => {
            return ReviewDecision::Ask {
                reason: format!(
                    "the reviewer model's answer was a reasoning block ({}) that never closed, \
                     with no verdict after it, so a person must decide",
                    unclosed.open
                ),
            };
        }
    };
    let body = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|t| t.strip_suffix("```"))
        .unwrap_or(trimmed)
        .trim();
    let verdict: ModelVerdict = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(_) => {
            return ReviewDecision::Ask {
                reason:
                    "the reviewer model's answer was not a valid verdict, so a person must decide"
                        .into(),
            };
        }
    };
    let said = scrub(verdict.reason.trim());
    let said = said.as_str();
    let reason = if said.is_empty() {
        "the reviewer model gave no reason".to_owned()
    } else {
        // asked for one sentence, it may write a book: the reason goes into
        // the approval, its card, the review log and the bot's context
        // (QA, 2026-12-05: 200,000 characters, whole, everywhere)
        match said.char_indices().nth(MAX_REASON_CHARS) {
            Some((cut, _)) => format!(
                "reviewer model: {}… ({} characters more)",
                &said[..cut],
                said[cut..].chars().count()
            ),
            None => format!("reviewer model: {said}"),
        }
    };
    match verdict.decision.as_str() {
        "allow" => ReviewDecision::Allow,
        "deny" => ReviewDecision::Deny { reason },
        "ask" => ReviewDecision::Ask { reason },
        other => ReviewDecision::Ask {
            reason: format!(
                "the reviewer model answered {:?}, which is not allow/ask/deny, so a person must decide",
                scrub(other)
            ),
        },
    }
}

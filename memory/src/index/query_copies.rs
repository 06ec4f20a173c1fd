//! Messages between bots that are stored twice, and which copy a search
//! that covers both leaves out ([`BotCopies`]).
//!
//! A message a bot sends another bot lands in the recipient's session as
//! an `agent_message` (authored by the sender). Two kinds of messages
//! are also kept on the sender's side, word for word:
//!
//! - a bot's `SendMessage` in its conversation with another bot (a
//!   session of kind `agent`): its turn writes a `delivery` there, and
//!   the other bot gets the same text as a message, in its conversation
//!   with the sender or in the session it asked replies to go to (its DM
//!   with the person who started the exchange);
//! - a subagent's report: the last message of its task turn is a
//!   `delivery` in its task session, and its parent gets it as a message
//!   where it delegated from.
//!
//! A search that covers both copies found each such message twice. It
//! now finds a message between bots where it arrived (in the recipient's
//! session, where every `SendToAgent` message is, and the only place it
//! is), except a subagent's report, which is found in the subagent's task
//! session, where it was said: a subagent's earlier messages there are
//! progress nobody else holds, so its last one cannot be told apart from
//! them by kind, while its report is the only message a subagent sends.

use serde::Deserialize;
use serde::Serialize;
use tantivy::query::BooleanQuery;
use tantivy::query::Occur;
use tantivy::query::Query;

use super::Fields;
use super::filter;
use crate::ids::SessionId;

/// A copy of messages between bots to leave out of a search, because the
/// same search covers where the message is kept once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BotCopies {
    /// A bot's conversation with another bot, searched together with
    /// sessions of that other bot: its `delivery` entries (each sent to
    /// the other bot, which holds it as a message from this one) are left
    /// out.
    Sent {
        /// The conversation (a session of kind `agent`).
        session: SessionId,
    },
    /// A subagent whose task session is searched: its reports (its
    /// `agent_message` entries, in its parent's sessions; each repeats
    /// the last message of a task turn, or says why the task ended
    /// without one, which its task session says too) are left out.
    Reported {
        /// The subagent's bot id, the author of its reports.
        subagent: String,
    },
}

/// The kind of the sender's copy of a message in a conversation with a bot.
const SENT_KIND: &str = "delivery";

/// The kind of a subagent's report in its parent's session.
const REPORT_KIND: &str = "agent_message";

/// The entries of `copies`, to exclude.
pub(super) fn bot_copies(fields: &Fields, copies: &[BotCopies]) -> Box<dyn Query> {
    let mut sent: Vec<String> = Vec::new();
    let mut reported: Vec<&str> = Vec::new();
    for copy in copies {
        match copy {
            BotCopies::Sent { session } => sent.push(session.to_string()),
            BotCopies::Reported { subagent } => reported.push(subagent),
        }
    }
    sent.sort_unstable();
    sent.dedup();
    reported.sort_unstable();
    reported.dedup();
    let of_kind = |kind: &str, field, values: &[&str]| -> Box<dyn Query> {
        Box::new(BooleanQuery::new(vec![
            (Occur::Must, filter(fields.kind, std::iter::once(kind))),
            (Occur::Must, filter(field, values.iter().copied())),
        ]))
    };
    let mut parts: Vec<Box<dyn Query>> = Vec::new();
    if !sent.is_empty() {
        let sent: Vec<&str> = sent.iter().map(String::as_str).collect();
        parts.push(of_kind(SENT_KIND, fields.session, &sent));
    }
    if !reported.is_empty() {
        parts.push(of_kind(REPORT_KIND, fields.author, &reported));
    }
    Box::new(BooleanQuery::union(parts))
}

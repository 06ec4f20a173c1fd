//! The bots a turn owes a reply: those that wrote it a message that does
//! not answer it (`EntryKind::AgentMessage::answers`), a question.
//!
//! A bot asked by another may write its answer as text and end its turn:
//! that text reaches nobody, and the asker, which told its person it would
//! answer once the replies came (`awaiting_replies`), waited for good (QA:
//! "B is 2" stayed B's private note, R and the person never heard). Such a
//! turn is reminded once to answer with SendToAgent
//! (prompts/agent_reply_reminder.md), as a person owed a reply is; if it
//! still ends without a word to the asker, the asker is woken by an event
//! saying no answer is coming (prompts/agent_no_reply.md), in the
//! conversation it asked from. An answer is owed nothing back: replies do
//! not bounce between two bots for the hop budget to stop.

use botfleet_memory::BotId;
use botfleet_memory::Mutation;
use botfleet_memory::SessionKind;
use botfleet_memory::StoreError;

use super::Runner;
use crate::engine::unanswered::no_reply_notice;

impl Runner {
    /// The bots that wrote this turn a message owed a reply and got none:
    /// no SendToAgent to them, no SendMessage in this bot's conversation
    /// with them (which goes to them).
    /// A turn that asked a third bot or a subagent waits for its answer,
    /// as a turn owing a person does (`asked.rs`): the answer may come in
    /// the turn it wakes, so nothing is owed yet (a bot handing the
    /// question on down a chain was reminded to answer it at once).
    pub(super) fn replies_owed(&self) -> Vec<&BotId> {
        let key = &self.scope.session.key;
        let mut owed: Vec<&BotId> = Vec::new();
        let asked_others = self.state.asked.iter().any(|a| {
            !self
                .scope
                .reply_to
                .iter()
                .any(|r| r.bot.as_str() == a.as_str())
        });
        if asked_others {
            return owed;
        }
        for r in self.scope.reply_to.iter().filter(|r| r.owed) {
            let sent = self.state.asked.iter().any(|a| a == r.bot.as_str())
                || (key.kind == SessionKind::Agent
                    && key.peer == r.bot.as_str()
                    && self.state.delivered > 0);
            if !sent && !owed.contains(&&r.bot) {
                owed.push(&r.bot);
            }
        }
        owed
    }

    /// The bots to name in the turn's reminder to answer them, once a
    /// turn and while its hop budget lets it answer at all.
    pub(super) fn agent_reply_reminder_due(&self) -> Option<String> {
        if self.state.agent_reminded || self.scope.hop >= self.rt.settings.max_hops {
            return None;
        }
        let owed = self.replies_owed();
        let (last, rest) = owed.split_last()?;
        Some(if rest.is_empty() {
            last.to_string()
        } else {
            let rest: Vec<&str> = rest.iter().map(|b| b.as_str()).collect();
            format!("{} and {last}", rest.join(", "))
        })
    }

    /// The events that tell each bot still owed a reply as the turn ends
    /// that none is coming: one per asker and conversation it asked from,
    /// for its newest message among the inputs. Reads the inputs only
    /// when a reply is owed.
    pub(super) async fn no_reply_notices(&self) -> Result<Vec<Mutation>, StoreError> {
        let owed: Vec<BotId> = self.replies_owed().into_iter().cloned().collect();
        if owed.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for question in self.unanswered_questions().await? {
            if let botfleet_memory::EntryKind::AgentMessage {
                from,
                answers: false,
                ..
            } = &question.kind
                && owed.contains(from)
                && let Some(req) =
                    no_reply_notice(&self.rt.store, &self.bot, &question, self.turn).await?
            {
                out.push(Mutation::Admit(Box::new(req)));
            }
        }
        Ok(out)
    }
}

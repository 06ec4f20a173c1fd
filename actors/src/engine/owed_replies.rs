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
//! not bounce between two bots for the hop budget to stop (a reply to an
//! answer is an answer too: a "thanks!" taken as a question was owed a
//! reply). A question handed on to a third bot is still owed in the turn
//! that third bot's answer wakes ([`Runner::note_question_handed_on`]).
//!
//! Not told apart: a bot's interim word to the asker ("let me check"), or
//! its question back, settles the question as an answer would; its real
//! answer, later and written as text, gets no reminder.

use botfleet_memory::BotId;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::StoreError;

use super::Runner;
use crate::engine::unanswered::no_reply_notice;
use crate::engine::unanswered::turn_failed_notice;
use crate::tools::ReplyTo;
use crate::tools::unanswered_at_budget;

/// How many of the conversation's newest entries are looked through for
/// a question handed on ([`Runner::note_question_handed_on`]).
const HANDED_ON_SCAN: i64 = 200;

impl Runner {
    /// The other bot of this conversation, when it wrote this turn a
    /// message owed a reply and got none: no SendToAgent to it, no
    /// SendMessage here (which goes to it). A message owed a reply lands
    /// only in its sender's conversation with this bot, so that bot is the
    /// one a turn can owe.
    ///
    /// A turn that asked a third bot or a subagent waits for its answer,
    /// as a turn owing a person does (`asked.rs`): the answer may come in
    /// the turn it wakes, so nothing is owed yet (a bot handing the
    /// question on down a chain was reminded to answer it at once). So
    /// does a turn whose call waits for its owner's approval: the
    /// decision's turn owes the answer (its event carries the question).
    /// Reminded meanwhile, it could not answer (the gate refuses a message
    /// to a bot while an approval waits), and the asker was told no answer
    /// was coming, which came once the owner approved (QA).
    pub(super) fn reply_owed(&self) -> Option<&BotId> {
        let owed = &self.scope.reply_to.iter().find(|r| r.owed)?.bot;
        // anything asked of another: a question handed on (to a bot whose
        // answer woke it too: a chain's next link); of it: an answer
        if !self.state.asked.is_empty() || self.state.delivered > 0 || self.state.awaits_approval {
            return None;
        }
        Some(owed)
    }

    /// The bot to name in the turn's reminder to answer it, once a turn
    /// and while its hop budget lets it answer at all.
    pub(super) fn agent_reply_reminder_due(&self) -> Option<&BotId> {
        if self.state.agent_reminded || self.scope.hop >= self.rt.settings.max_hops {
            return None;
        }
        self.reply_owed()
    }

    /// The question the other bot of this conversation asked that this
    /// turn still owes a reply, though none of its inputs is that bot's:
    /// the bot handed the question on to a third bot (its turn then waited,
    /// owing nothing yet), whose answer woke it here, where the question
    /// was asked (review: its answer, written as text, reached nobody, with
    /// no reminder and no word to the asker). Owed when nothing this bot
    /// sent the asker (SendMessage here, SendToAgent to it) came after the
    /// question. Looked for once a turn, as it is about to end, and only in
    /// a conversation with a bot woken by another bot's answer.
    pub(super) async fn note_question_handed_on(&mut self) -> Result<(), StoreError> {
        if self.handed_on.is_some() {
            return Ok(());
        }
        self.handed_on = Some(None);
        let key = &self.scope.session.key;
        if key.kind != SessionKind::Agent
            || key.peer == self.bot.id.as_str()
            || self.scope.reply_to.is_empty()
            || self
                .scope
                .reply_to
                .iter()
                .any(|r| r.bot.as_str() == key.peer)
        {
            return Ok(());
        }
        let Ok(peer) = BotId::new(key.peer.as_str()) else {
            return Ok(());
        };
        let entries = self
            .rt
            .store
            .tail_entries(self.session, HANDED_ON_SCAN)
            .await?;
        let Some(at) = entries.iter().rposition(
            |e| matches!(&e.kind, EntryKind::AgentMessage { from, .. } if *from == peer),
        ) else {
            return Ok(());
        };
        let question = &entries[at];
        let EntryKind::AgentMessage {
            answers: false,
            reply_session,
            ..
        } = &question.kind
        else {
            return Ok(());
        };
        let sent_since = entries[at + 1..].iter().any(|e| match &e.kind {
            EntryKind::Delivery { .. } => true,
            EntryKind::ToolResult {
                name,
                content,
                is_error: false,
                ..
            } => {
                name == "SendToAgent" && crate::tools::recipient_in(content) == Some(peer.as_str())
            }
            _ => false,
        });
        if sent_since {
            return Ok(());
        }
        let session = reply_session.unwrap_or_else(|| {
            SessionKey {
                bot: peer.clone(),
                kind: SessionKind::Agent,
                peer: self.bot.id.to_string(),
            }
            .id()
        });
        self.scope.reply_to.push(ReplyTo {
            bot: peer,
            session,
            asked_at: question.created_at,
            owed: true,
        });
        self.handed_on = Some(Some(question.clone()));
        Ok(())
    }

    /// The events that tell the bot still owed a reply as the turn ends
    /// that none is coming: one per conversation it asked from,
    /// for its newest message among the inputs (or the question handed
    /// on). Reads the inputs only when a reply is owed.
    /// Also when the turn's hop budget is spent (it could not answer, and
    /// was not reminded): nobody else tells the asker, and the hop budget's
    /// notice only comes of a refused send (review: the person waited for
    /// good). The event, a hop past the budget, wakes an asker that can
    /// tell its person; one that asked from a conversation with a bot
    /// could only have its message refused, so the chain's person gets the
    /// hop budget's notice instead (once per chain: none after a refusal's).
    pub(super) async fn no_reply_notices(&self) -> Result<Vec<Mutation>, StoreError> {
        self.owed_reply_notices(None).await
    }

    /// The events that tell the bot still owed a reply, as the turn fails
    /// for good with `error`, that its turn failed: no answer comes unless
    /// its owner retries the turn (QA: the failure's notice was only in the
    /// two bots' conversation, and the asker and its person waited for
    /// good). As [`Self::no_reply_notices`] otherwise; a failure at the hop
    /// budget's last hop tells nobody else.
    pub(super) async fn failed_turn_notices(&self, error: &str) -> Vec<Mutation> {
        match self.owed_reply_notices(Some(error)).await {
            Ok(notices) => notices,
            Err(e) => {
                tracing::warn!(bot = %self.bot.id, turn = %self.turn, error = %e, "could not tell the asking bot the turn failed");
                Vec::new()
            }
        }
    }

    /// [`Self::no_reply_notices`], or with `failed` the error of a turn
    /// that failed, [`Self::failed_turn_notices`].
    async fn owed_reply_notices(&self, failed: Option<&str>) -> Result<Vec<Mutation>, StoreError> {
        let Some(owed) = self.reply_owed().cloned() else {
            return Ok(Vec::new());
        };
        let mut questions: Vec<Entry> = self
            .unanswered_questions()
            .await?
            .into_iter()
            .filter(|q| {
                matches!(&q.kind, EntryKind::AgentMessage { from, answers: false, .. }
                    if *from == owed)
            })
            .collect();
        if let Some(Some(handed_on)) = &self.handed_on {
            questions.push(handed_on.clone());
        }
        let spent = self.scope.hop >= self.rt.settings.max_hops;
        let mut out = Vec::new();
        let mut stranded = false;
        for question in questions {
            let notice = match failed {
                None => {
                    no_reply_notice(&self.rt.store, &self.bot, &question, self.turn, spent).await?
                }
                Some(error) => {
                    let store = &self.rt.store;
                    turn_failed_notice(store, &self.bot, &question, self.turn, error, spent).await?
                }
            };
            match notice {
                Some(req) => out.push(Mutation::Admit(Box::new(req))),
                None => stranded = spent,
            }
        }
        if stranded && failed.is_none() {
            out.extend(unanswered_at_budget(&self.tool_ctx(""), &owed).await?);
        }
        Ok(out)
    }
}

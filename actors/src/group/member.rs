//! Running one member: what it is shown, and reading the end of its turn.
//!
//! A member's turn input is an untrusted `Event` in its own group session
//! `{bot: member, kind: Group, peer: room}`, authored [`input_author`].
//! Until a turn that consumed it ends for good ([`answers`]), the member
//! has the floor: every `Delivery` in its session after the input is one
//! of its public messages. An interrupted turn (a user DM to the member)
//! hands the input to the member's next turn, so deliveries of every turn
//! up to the one that answers count. SendMessage writes a `Delivery` only
//! while the member has the floor; otherwise it holds the message
//! ([`super::held`]). The coordinator publishes each delivery to the
//! timeline as soon as it reads it (`super::live`), not when the turn
//! ends.

use botfleet_memory::BotId;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::SessionId;
use botfleet_memory::TurnId;
use botfleet_memory::TurnStatus;
use serde::Deserialize;
use serde::Serialize;

use super::era::BEFORE_SHARING_CODE;
use super::mentions::MemberName;
use super::run::Limits;
use crate::prompts::prompts;
use crate::prompts::quoted_name;

/// Most earlier public messages shown in one member input.
pub(crate) const MAX_SHOWN: usize = 20;

/// Author of the coordinator's inputs in a member's session of `room`.
pub(crate) fn input_author(room: &str) -> String {
    format!("room:{room}")
}

/// Whether `author` is a room's coordinator ([`input_author`]).
pub(crate) fn is_input_author(author: &str) -> bool {
    author.starts_with("room:")
}

/// Whether a turn that ended with `status` answered its room input for
/// good (an interrupted turn hands it on to the next one).
pub(crate) fn answers(status: TurnStatus) -> bool {
    match status {
        TurnStatus::Interrupted | TurnStatus::Running => false,
        TurnStatus::Completed
        | TurnStatus::Undelivered
        | TurnStatus::Failed
        | TurnStatus::Cancelled => true,
    }
}

/// Whether an entry of a room timeline is a public message (a person's
/// message or a member's published reply).
pub(crate) fn is_message(entry: &Entry) -> bool {
    matches!(
        entry.kind,
        EntryKind::UserMessage { .. } | EntryKind::Delivery { .. }
    )
}

/// What a member has been shown of a timeline: user messages up to
/// `user`, deliveries up to `delivery`. Two marks, because user messages
/// of later runs land in the timeline while a run publishes replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct Cursor {
    /// Newest user message seq shown.
    pub user: i64,
    /// Newest delivery seq shown.
    pub delivery: i64,
    /// Seq, in the member's own session, of the end of the turn that
    /// answered its last input: what it sent after that was held.
    #[serde(default)]
    pub answered: i64,
}

/// What a member is shown on its turn.
pub(crate) struct InputView<'a> {
    /// Room display name.
    pub room: &'a str,
    /// Every member of the room.
    pub names: &'a [MemberName],
    /// Per member (as `names`): whether it takes no turns (removed, or a
    /// stopped subagent); such a member is not listed as one to address
    /// (QA: a removed member was, and models were invited to @mention a
    /// member that never answers). Shorter than `names`: the rest present.
    pub absent: &'a [bool],
    /// The member whose turn it is (index into `names`).
    pub member: usize,
    /// Public messages of the timeline (oldest first).
    pub messages: &'a [Entry],
    /// Public messages older than the first of `messages` (the
    /// coordinator keeps a tail of the timeline) the member was not
    /// shown: they count in the "(N earlier messages not shown)" line.
    pub earlier: usize,
    /// Replies about to be published with this input (same transaction),
    /// with provisional seqs above every stored one.
    pub pending: &'a [Entry],
    /// What it has been shown.
    pub cursor: Cursor,
    /// Seq of the user message of the run: later user messages belong to
    /// later runs (runs of a room are sequential, so every later delivery
    /// belongs to this one). This keeps the text a pure function of the
    /// stored state, which a resumed run relies on.
    pub trigger: i64,
    /// Messages of its last turn the limits kept back.
    pub withheld: u32,
    /// Messages it sent since its last turn, when it was not its turn.
    pub held: u32,
    /// The room's limits.
    pub limits: Limits,
}

fn author_label(entry: &Entry, names: &[MemberName]) -> String {
    if !is_delivery(entry) {
        return format!("{} (person)", entry.author);
    }
    match names.iter().find(|n| n.id == entry.author) {
        Some(n) => format!("{} (@{})", n.name, n.id),
        // a member since taken out of the room: `@a2:` at the start of a
        // line read as a mention, and said nothing of why it had no name
        // (QA, 2026-12-05); its name is not in the room's state, which
        // keeps the input a function of it
        None => format!("{} (former member)", entry.author),
    }
}

/// How the lines of a message after its first are indented in an input.
pub(crate) const CONTINUATION_INDENT: &str = "  ";

/// Characters a model may read as the end of a line: `\n`, `\r`, vertical
/// tab, form feed, NEL, and the Unicode line and paragraph separators.
fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// One public message of an input: its author's label, then its text with
/// every line after the first indented ([`CONTINUATION_INDENT`]). Only
/// labels start a line in the messages part of an input, so a message
/// cannot pass for another message (a person's included), for the
/// "(N earlier messages not shown)" line, or for the end of the input: a
/// member's text is not trusted, and other members read it.
pub(crate) fn render_message(label: &str, text: &str) -> String {
    let text = text.replace("\r\n", "\n");
    let mut parts = text.split(is_line_break);
    let mut out = format!("{label}:");
    if let Some(first) = parts.next()
        && !first.is_empty()
    {
        out.push(' ');
        out.push_str(first);
    }
    for line in parts {
        out.push('\n');
        out.push_str(CONTINUATION_INDENT);
        out.push_str(line);
    }
    out
}

/// The text of a member's turn input (prompts/group_turn.md), and what
/// it covers (the member's next cursor).
pub(crate) fn render_input(view: &InputView<'_>) -> (String, Cursor) {
    let me = view.names.get(view.member);
    let c = view.cursor;
    let visible: Vec<&Entry> = view
        .messages
        .iter()
        .chain(view.pending)
        .filter(|e| {
            if is_delivery(e) {
                e.seq > c.delivery
            } else {
                e.seq > c.user && e.seq <= view.trigger
            }
        })
        .collect();
    let covered = Cursor {
        answered: c.answered,
        user: c.user.max(view.trigger),
        delivery: visible
            .iter()
            .filter(|e| is_delivery(e))
            .map(|e| e.seq)
            .max()
            .unwrap_or(c.delivery),
    };
    let new: Vec<&Entry> = visible
        .into_iter()
        .filter(|e| me.is_none_or(|m| !(e.author == m.id && is_delivery(e))))
        .collect();
    let hidden = new.len().saturating_sub(MAX_SHOWN);
    let earlier = view.earlier;
    // the message the run answers is shown even when more than the
    // messages shown came after it (replies of earlier discussions it
    // was queued behind): else the member answers a question it was
    // never shown
    let asked = new
        .iter()
        .position(|e| e.seq == view.trigger && !is_delivery(e))
        .filter(|at| *at < hidden);
    let mut lines = Vec::with_capacity(new.len().min(MAX_SHOWN) + 2);
    let shown_from = match asked {
        Some(at) => {
            let from = new.len().saturating_sub(MAX_SHOWN - 1);
            if at + earlier > 0 {
                lines.push(not_shown(Shown::Earlier, at + earlier));
            }
            lines.push(render_message(
                &author_label(new[at], view.names),
                new[at].kind.text(),
            ));
            let between = from - at - 1;
            if between > 0 {
                lines.push(not_shown(Shown::Between, between));
            }
            from
        }
        None => {
            if hidden + earlier > 0 {
                lines.push(not_shown(Shown::Earlier, hidden + earlier));
            }
            hidden
        }
    };
    for e in new.iter().skip(shown_from) {
        lines.push(render_message(&author_label(e, view.names), e.kind.text()));
    }
    let others: Vec<String> = view
        .names
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != view.member && !view.absent.get(*i).copied().unwrap_or(false))
        .map(|(_, n)| format!("{} (@{})", n.name, n.id))
        .collect();
    let p = prompts();
    let per_turn = view.limits.max_per_turn.to_string();
    let mut notes = Vec::new();
    if view.withheld > 0 {
        // "1 … was", "2 … were"
        let note = if view.withheld == 1 {
            &p.group_withheld_one
        } else {
            &p.group_withheld
        };
        notes.push(
            note.render(&[
                ("withheld", &view.withheld.to_string()),
                ("max_per_turn", &per_turn),
                ("max_replies", &view.limits.max_replies.to_string()),
            ])
            .unwrap_or_default(),
        );
    }
    if view.held > 0 {
        let note = if view.held == 1 {
            &p.group_held_one
        } else {
            &p.group_held
        };
        notes.push(
            note.render(&[("held", &view.held.to_string())])
                .unwrap_or_default(),
        );
    }
    let notes = notes.join("\n");
    let members = if others.is_empty() {
        p.group_members_none.render(&[]).unwrap_or_default()
    } else {
        others.join(", ")
    };
    let text = p
        .group_turn
        .render(&[
            ("room", &quoted_name(view.room)),
            ("members", &members),
            ("messages", &lines.join("\n\n")),
            ("notes", &notes),
            ("max_per_turn", &per_turn),
        ])
        .unwrap_or_default();
    (text, covered)
}

/// A "(N … messages not shown)" line of an input, from `template`.
/// Where the messages a "not shown" line stands for are.
#[derive(Clone, Copy)]
enum Shown {
    /// Before those shown.
    Earlier,
    /// Between the message the discussion answers and the newest shown.
    Between,
}

/// The line standing for `count` public messages left out ("(1 message
/// not shown)", "(6 messages not shown)").
fn not_shown(at: Shown, count: usize) -> String {
    let p = prompts();
    let template = match (at, count) {
        (Shown::Earlier, 1) => &p.group_not_shown_earlier_one,
        (Shown::Earlier, _) => &p.group_not_shown_earlier,
        (Shown::Between, 1) => &p.group_not_shown_one,
        (Shown::Between, _) => &p.group_not_shown,
    };
    template
        .render(&[("count", &count.to_string())])
        .map(|t| t.trim_end().to_owned())
        .unwrap_or_default()
}

fn is_delivery(e: &Entry) -> bool {
    matches!(e.kind, EntryKind::Delivery { .. })
}

/// Waiting for the turn of a member that answers one input.
#[derive(Debug)]
pub(crate) struct MemberWait {
    /// The member bot.
    pub bot: BotId,
    /// Its group session.
    pub session: SessionId,
    /// Seq of the input in that session.
    pub input_seq: i64,
    /// Entries up to this seq were read.
    pub scanned: i64,
    /// Deliveries after the input, in order.
    deliveries: Vec<Entry>,
    /// Messages after the input that SendMessage refused because the room
    /// was given to more people since (`super::era`).
    refused: usize,
    /// What its input showed it: its cursor once the turn is recorded
    /// (not before, so a checkpoint taken while the turn runs renders the
    /// same input again after a restart).
    pub shown: Cursor,
}

/// How a member's turn ended.
#[derive(Debug)]
pub(crate) struct MemberDone {
    /// Its deliveries, in order.
    pub deliveries: Vec<Entry>,
    /// The final status of the turn.
    pub status: TurnStatus,
    /// The turn that answered the input.
    pub turn: Option<TurnId>,
    /// Its messages SendMessage refused because the room was given to
    /// more people since the input (`super::era`).
    pub refused: usize,
}

impl MemberWait {
    /// Waits for the turn answering `input_seq` of `session`.
    pub(crate) fn new(bot: BotId, session: SessionId, input_seq: i64) -> Self {
        Self {
            bot,
            session,
            input_seq,
            scanned: input_seq,
            deliveries: Vec::new(),
            refused: 0,
            shown: Cursor::default(),
        }
    }

    /// The deliveries read so far, in order: the replies of the running
    /// turn, published as they come (`super::live`).
    pub(crate) fn deliveries(&self) -> &[Entry] {
        &self.deliveries
    }

    /// Reads entries after [`MemberWait::scanned`] (oldest first); returns
    /// the outcome once a turn that consumed the input ended for good.
    ///
    /// Every delivery until then counts, whichever turn wrote it: while
    /// the input is unanswered the member has the floor, and SendMessage
    /// told it so (a turn that began just before the input arrived
    /// included). An interrupted turn hands the input on.
    pub(crate) fn feed(&mut self, entries: &[Entry]) -> Option<MemberDone> {
        for e in entries {
            if e.seq <= self.scanned {
                continue;
            }
            self.scanned = e.seq;
            if let EntryKind::Delivery { .. } = &e.kind
                && e.turn.is_some()
            {
                self.deliveries.push(e.clone());
            }
            if let EntryKind::Notice { code, .. } = &e.kind
                && code == BEFORE_SHARING_CODE
            {
                self.refused += 1;
            }
            if let EntryKind::TurnEnd { status, inputs, .. } = &e.kind
                && inputs.contains(&self.input_seq)
                && answers(*status)
            {
                return Some(MemberDone {
                    deliveries: std::mem::take(&mut self.deliveries),
                    status: *status,
                    turn: e.turn,
                    refused: std::mem::take(&mut self.refused),
                });
            }
        }
        None
    }
}

#[cfg(test)]
#[path = "member_tests.rs"]
mod tests;

//! Prompt templates from `prompts/*.md`, compiled in and parsed once.
//!
//! A template is literal text with `{{name}}` placeholders. Rendering takes
//! named values and fails if a placeholder has none, so a prompt can never go
//! out with a hole in it.

use std::sync::LazyLock;

/// A template that failed to render.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("prompt {template}: no value for placeholder {{{{{name}}}}}")]
pub struct PromptError {
    /// Template file.
    pub template: &'static str,
    /// Missing placeholder.
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Text(&'static str),
    Var(&'static str),
}

/// A parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    name: &'static str,
    segments: Vec<Segment>,
}

impl Template {
    /// Parses `{{name}}` placeholders out of `text`.
    pub fn parse(name: &'static str, text: &'static str) -> Self {
        let mut segments = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            match rest[start + 2..].find("}}") {
                Some(len) => {
                    if start > 0 {
                        segments.push(Segment::Text(&rest[..start]));
                    }
                    segments.push(Segment::Var(rest[start + 2..start + 2 + len].trim()));
                    rest = &rest[start + 2 + len + 2..];
                }
                None => break,
            }
        }
        if !rest.is_empty() {
            segments.push(Segment::Text(rest));
        }
        Self { name, segments }
    }

    /// Names of the placeholders, in order of first use.
    pub fn placeholders(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for s in &self.segments {
            if let Segment::Var(v) = s
                && !out.contains(v)
            {
                out.push(*v);
            }
        }
        out
    }

    /// Whether `text` could be a rendering of this template: it starts
    /// with the template's text before its first placeholder (a template
    /// that starts with a placeholder matches nothing).
    pub fn rendered_in(&self, text: &str) -> bool {
        match self.segments.first() {
            Some(Segment::Text(head)) => text.starts_with(head.trim_end_matches('\n')),
            Some(Segment::Var(_)) | None => false,
        }
    }

    /// Whether `text` reads as a whole rendering of this template: it
    /// begins with its first text, ends with its last (when the template
    /// ends in text) and holds the texts between in order. Stricter than
    /// [`Template::rendered_in`] where a person could begin a message the
    /// same way: `[time: 3pm] call mom` begins as the time note does
    /// (`[time: {{when}}]`) but does not end as it does (QA: the scripted
    /// model took that message for the runtime's note and left it out).
    pub fn is_rendering(&self, text: &str) -> bool {
        let segments = self.segments.as_slice();
        let Some(Segment::Text(first)) = segments.first() else {
            return false;
        };
        if segments.len() == 1 {
            return text == first.trim_end_matches('\n');
        }
        let Some(mut rest) = text.strip_prefix(*first) else {
            return false;
        };
        // the texts between in order, then the last text (the file's
        // final newline aside: a rendering has none) at the end
        let (between, tail) = match segments.last() {
            Some(Segment::Text(last)) => (
                &segments[1..segments.len() - 1],
                last.trim_end_matches('\n'),
            ),
            _ => (&segments[1..], ""),
        };
        for segment in between {
            if let Segment::Text(t) = segment {
                let Some(at) = rest.find(*t) else {
                    return false;
                };
                rest = &rest[at + t.len()..];
            }
        }
        rest.ends_with(tail)
    }

    /// Renders with `(name, value)` pairs. The result has no trailing newline.
    pub fn render(&self, vars: &[(&str, &str)]) -> Result<String, PromptError> {
        let mut out = String::new();
        for s in &self.segments {
            match s {
                Segment::Text(t) => out.push_str(t),
                Segment::Var(name) => match vars.iter().find(|(k, _)| k == name) {
                    Some((_, v)) => out.push_str(v),
                    None => {
                        return Err(PromptError {
                            template: self.name,
                            name: (*name).to_owned(),
                        });
                    }
                },
            }
        }
        let trimmed = out.trim_end_matches('\n').len();
        out.truncate(trimmed);
        Ok(out)
    }
}

macro_rules! prompts {
    ($($(#[$doc:meta])* $field:ident => $file:literal,)*) => {
        /// Every prompt template.
        #[derive(Debug)]
        pub struct Prompts {
            $($(#[$doc])* pub $field: Template,)*
        }

        impl Prompts {
            fn load() -> Self {
                Self {
                    $($field: Template::parse($file, include_str!(concat!("../../prompts/", $file))),)*
                }
            }

            /// Every template with its file name (for tests and docs).
            pub fn all(&self) -> Vec<&Template> {
                vec![$(&self.$field,)*]
            }
        }
    };
}

prompts! {
    /// The system prompt of a turn.
    system => "system.md",
    /// The reminder injected when a reply is owed.
    delivery_reminder => "delivery_reminder.md",
    /// Before the next input after a turn a person cancelled before it
    /// answered: what it was asked was not finished, and what it handed
    /// on for it may still report.
    cancelled_before => "cancelled_before.md",
    /// The delivery reminder of a turn that asked other bots or
    /// subagents for what its answer needs.
    delivery_reminder_awaiting => "delivery_reminder_awaiting.md",
    /// Notice of a turn that ended waiting for the answers it asked for.
    awaiting_replies => "awaiting_replies.md",
    /// The event that wakes a bot whose message another bot's removal by
    /// its owner left unanswered.
    agent_removed_unanswered => "agent_removed_unanswered.md",
    /// The same event for a message that waited in the queue of a bot a
    /// start found no longer in the fleet file.
    agent_removed_from_config_unanswered => "agent_removed_from_config_unanswered.md",
    /// The same event for a message to a bot that fleet.toml gave to
    /// another user before it answered.
    agent_owner_changed_unanswered => "agent_owner_changed_unanswered.md",
    /// The reminder of a turn that answered no bot that wrote it a
    /// message owed a reply.
    agent_reply_reminder => "agent_reply_reminder.md",
    /// The event that wakes a bot whose message another bot's turn ended
    /// without answering, even after its reminder.
    agent_no_reply => "agent_no_reply.md",
    /// The event to a bot whose message another bot's turn failed over
    /// for good (`{{bot}}`, `{{asked}}`, `{{error}}`).
    agent_turn_failed_asker => "agent_turn_failed_asker.md",
    /// Notice of a turn cancelled, before it answered a person, by its
    /// owner's removal of its bot.
    turn_cancelled_removed => "turn_cancelled_removed.md",
    /// The reminder after a step that wrote a tool call as text.
    written_call_reminder => "written_call_reminder.md",
    /// Result of a call cut off by a crash.
    outcome_unknown => "outcome_unknown.md",
    /// The same for a call a clean stop of the host ended (a Shell
    /// command killed with its process group) before its result was
    /// recorded.
    outcome_unknown_stopped => "outcome_unknown_stopped.md",
    /// Result of a call whose result the store refused to record (the
    /// turn resumed after the store's wait, with no restart).
    outcome_unknown_store => "outcome_unknown_store.md",
    /// Result of a call that was skipped.
    call_not_run => "call_not_run.md",
    /// Result shown for a call with no recorded result.
    missing_result => "missing_result.md",
    /// Notice of a failed turn.
    turn_failed => "turn_failed.md",
    /// Notice of a failed turn of a routine, naming the routine.
    routine_failed => "routine_failed.md",
    /// Notice of a failed turn of a webhook's run, naming the webhook.
    hook_failed => "hook_failed.md",
    /// Notice of a failed turn answering another bot (a message or a
    /// subagent's report), naming it: the owner who reads it sent nothing.
    agent_failed => "agent_failed.md",
    /// What a subagent's task reads as (its title, in its name and role
    /// too) to the owner its bot was given to, when the task was given in
    /// a conversation that stays its former owner's.
    withheld_task => "withheld_task.md",
    /// What such a task's last report reads as to that owner.
    withheld_report => "withheld_report.md",
    /// Notice of a failed turn of a subagent's task, naming its parent
    /// (nobody sent it "a message": its parent gave it a task).
    task_failed => "task_failed.md",
    /// Notice of a model call that failed after the turn delivered.
    failed_after_reply => "failed_after_reply.md",
    /// Notice of an undelivered turn.
    undelivered => "undelivered.md",
    /// Notice of a turn stopped before it answered a person.
    turn_cancelled => "turn_cancelled.md",
    /// The notice in a subagent's task of its turn a person cancelled.
    subagent_task_cancelled => "subagent_task_cancelled.md",
    /// A message from another bot, as data.
    agent_message => "agent_message.md",
    /// The same for a bot that has no SendToAgent to answer with.
    agent_message_plain => "agent_message_plain.md",
    /// How its own subagent's report is shown to a parent that is shown
    /// MessageSubagent: quoted data, and to steer it with MessageSubagent
    /// or a new Task (not as a message from any bot).
    subagent_report => "subagent_report.md",
    /// The same for a parent that is not shown MessageSubagent.
    subagent_report_plain => "subagent_report_plain.md",
    /// A subagent's report that names the task it reports on (its title),
    /// to a parent shown MessageSubagent.
    subagent_report_task => "subagent_report_task.md",
    /// The same for a parent that is not shown MessageSubagent.
    subagent_report_task_plain => "subagent_report_task_plain.md",
    /// Outside data (webhooks, reports), as data.
    untrusted_event => "untrusted_event.md",
    /// An event the owner configured.
    trusted_event => "trusted_event.md",
    /// The reviewer model's instructions (auto-review).
    review => "review.md",
    /// Result of a call that now waits for a person's approval.
    approval_requested => "approval_requested.md",
    /// The same, outside a conversation with the owner (with another bot,
    /// a subagent's task, a routine, a webhook, a room): nobody there can
    /// expire it with a message, and SendMessage may not reach the owner.
    approval_requested_elsewhere => "approval_requested_elsewhere.md",
    /// Result of a call whose exact action already ran with an approval,
    /// made again (the decision's note, read after the run, asks for it).
    approval_used => "approval_used.md",
    /// Result of a call whose exact action a person denied for the same
    /// request, made again.
    approval_denied_again => "approval_denied_again.md",
    /// The event telling a bot its action was approved.
    approval_approved => "approval_approved.md",
    /// The same when the approved call's tool is no longer among the
    /// bot's tools: the action can no longer run.
    approval_approved_tool_gone => "approval_approved_tool_gone.md",
    /// The event telling a bot its action was denied.
    approval_denied => "approval_denied.md",
    /// [`approval_approved`](Prompts::approval_approved) outside a DM
    /// (with another bot, a subagent's task, a routine, a webhook, a
    /// room): SendMessage there answers whoever the conversation is with,
    /// which need not be the owner who decided.
    approval_approved_elsewhere => "approval_approved_elsewhere.md",
    /// The same when the approved call's tool is no longer the bot's.
    approval_approved_tool_gone_elsewhere => "approval_approved_tool_gone_elsewhere.md",
    /// [`approval_denied`](Prompts::approval_denied) outside a DM.
    approval_denied_elsewhere => "approval_denied_elsewhere.md",
    /// Result of a call auto-review refused outright.
    review_denied => "review_denied.md",
    /// The memory block of the prompt (information, not instructions).
    memory => "memory.md",
    /// What changed in memory inside a compaction epoch.
    memory_update => "memory_update.md",
    /// The line before an input saying when it arrived, in the bot's
    /// owner's time zone.
    time_note => "time_note.md",
    /// Ends the memory block when items did not fit its share of the
    /// context: how many were left out.
    memory_left_out => "memory_left_out.md",
    /// A section of the memory block all of whose items were left out
    /// (instead of "(none)", which said the bot had none).
    memory_section_left_out => "memory_section_left_out.md",
    /// Remember's error in a shared room when the layer is full (no
    /// counts: they take in what the bot holds in private).
    memory_full_room => "memory_full_room.md",
    /// Its next step: the items remembered in that room to replace.
    memory_full_room_replace => "memory_full_room_replace.md",
    /// Its next step when nothing remembered in that room can go.
    memory_full_room_none => "memory_full_room_none.md",
    /// The fact extractor's instructions (system message).
    extract_facts => "extract_facts.md",
    /// What the fact extractor reads (user message).
    extract_input => "extract_input.md",
    /// The middle of a text cut from the fact extractor's request.
    extract_clipped => "extract_clipped.md",
    /// A member's turn in a group room: the new public messages.
    group_turn => "group_turn.md",
    /// Note to a room member that some of its messages were withheld.
    group_withheld => "group_withheld.md",
    /// The same note when one message was withheld (its grammar).
    group_withheld_one => "group_withheld_one.md",
    /// Note to a room member that messages it sent outside its turn were
    /// not published.
    group_held => "group_held.md",
    /// The same note when one message was held (its grammar).
    group_held_one => "group_held_one.md",
    /// In a member's input, for the public messages before those shown.
    group_not_shown_earlier => "group_not_shown_earlier.md",
    /// The same line when one message is left out (its grammar).
    group_not_shown_earlier_one => "group_not_shown_earlier_one.md",
    /// In a member's input, for the public messages between the one the
    /// discussion answers and the newest shown.
    group_not_shown => "group_not_shown.md",
    /// The same line when one message is left out (its grammar).
    group_not_shown_one => "group_not_shown_one.md",
    /// Result of a room member's SendMessage outside its turn.
    group_held_result => "group_held_result.md",
    /// Result of a room member's SendMessage in a turn that did not take
    /// the input the room's discussion awaits (its next turn does).
    group_held_next_result => "group_held_next_result.md",
    /// Notice in a room member's session of a message it was not allowed
    /// to publish (people read it; the room counts it).
    group_held_notice => "group_held_notice.md",
    /// Result of a room member's SendMessage past the room's limit of
    /// messages per member turn: not published.
    group_over_limit_result => "group_over_limit_result.md",
    /// Notice in a room member's session keeping a message it sent past
    /// that limit (people read it).
    group_over_limit_notice => "group_over_limit_notice.md",
    /// Result of a room member's SendMessage once the discussion has the
    /// room's cap of replies: not published.
    group_room_full_result => "group_room_full_result.md",
    /// Notice in a room member's session keeping a message it sent past
    /// that cap (people read it).
    group_room_full_notice => "group_room_full_notice.md",
    /// Timeline notice of a member turn that failed or was cancelled.
    group_member_failed => "group_member_failed.md",
    /// The same in a shared room: where the member's owner reads why (the
    /// error is the owner's, other users read the timeline).
    group_member_failed_shared => "group_member_failed_shared.md",
    /// Timeline notice of a member turn cancelled because the member, a
    /// subagent, was stopped: it takes no more turns.
    group_member_stopped => "group_member_stopped.md",
    /// A member bot its owner removed (made by CreateAgent) during a
    /// discussion: its turn was cancelled, and takes no retry.
    group_member_removed => "group_member_removed.md",
    /// Timeline notice of a member whose turn failed because its daily
    /// token budget is spent.
    group_member_paused => "group_member_paused.md",
    /// The same in a shared room: until when, not the member's token use
    /// (its owner's to read).
    group_member_paused_shared => "group_member_paused_shared.md",
    /// Notice in a room of another user when its owner stopped sharing a
    /// member (`shareable = false`): it left the room.
    group_member_unshared => "group_member_unshared.md",
    /// The summary that starts a new context epoch in each member's
    /// session of a room when a change of members gives it to other
    /// people: nothing said there before is carried over.
    group_now_shared => "group_now_shared.md",
    /// `members_changed` notice in a room of one owner that a start makes
    /// shared because fleet.toml gave one of its members to another user:
    /// whose it is now, who reads the room from there on.
    group_member_given => "group_member_given.md",
    /// Result of a room member's SendMessage in a turn that began before
    /// the room was given to more people: not published.
    group_era_result => "group_era_result.md",
    /// Notice in a room member's session keeping that message (people
    /// read it; the coordinator counts it).
    group_era_notice => "group_era_notice.md",
    /// Timeline notice: what such a turn sent is not published, and where
    /// its owner reads it.
    group_era_timeline => "group_era_timeline.md",
    /// Notice in a member's session closing an input its discussion no
    /// longer awaits (the member was removed while it had the floor).
    group_member_skipped => "group_member_skipped.md",
    /// The members part of a room member's input when every other member
    /// takes no turns (removed, or a stopped subagent).
    group_members_none => "group_members_none.md",
    /// Why a discussion ended after a round with failed member turns.
    group_failed_round => "group_failed_round.md",
    /// Why a discussion ended when no member had anything new to answer
    /// (nobody was offered a turn: not a silence).
    group_no_news => "group_no_news.md",
    /// Why a discussion ended when no member addressed could take a turn.
    group_no_turn => "group_no_turn.md",
    /// Who of those addressed could take no turn, at a discussion's end.
    group_absent => "group_absent.md",
    /// Why one member took no turn: the fleet's config no longer lists it.
    group_absent_removed => "group_absent_removed.md",
    /// … its owner removed it (a bot made by CreateAgent).
    group_absent_removed_by_owner => "group_absent_removed_by_owner.md",
    /// … made by CreateAgent, its owner is no longer a user of the host.
    group_absent_owner_away => "group_absent_owner_away.md",
    /// … a subagent removed with its parent.
    group_absent_parent_gone => "group_absent_parent_gone.md",
    /// … it is a subagent its parent stopped.
    group_absent_stopped => "group_absent_stopped.md",
    /// … its owner no longer shares it.
    group_absent_unshared => "group_absent_unshared.md",
    /// … it was taken out of the room after the message was posted.
    group_absent_left => "group_absent_left.md",
    /// Why a discussion ended after a round in which auto-review held
    /// back what members tried to publish (not a silence; the end then
    /// names them: `group_review_refused`).
    group_refused_round => "group_refused_round.md",
    /// Whose replies auto-review refused, at a discussion's end.
    group_review_refused => "group_review_refused.md",
    /// Who published nothing and waits for its owner's approval of an
    /// action, at a discussion's end.
    group_awaiting_approval => "group_awaiting_approval.md",
    /// A routine's run: its prompt, name, slot and reporting rule.
    routine_run => "routine_run.md",
    /// Added to a routine's run that fires late (missed while down).
    routine_late => "routine_late.md",
    /// The reporting rule of a routine that may stay silent.
    routine_silent_ok => "routine_silent_ok.md",
    /// The reporting rule of a routine that must report.
    routine_must_report => "routine_must_report.md",
    /// The role of a subagent.
    subagent_role => "subagent_role.md",
    /// The hop budget error: a message to a bot not sent.
    hop_budget => "hop_budget.md",
    /// The hop budget error: work for a subagent not given.
    hop_budget_task => "hop_budget_task.md",
    /// The hop budget error: work for a subagent not given in a
    /// conversation another bot started, whose answer would not fit.
    hop_budget_task_answer => "hop_budget_task_answer.md",
    /// After a hop budget error in a conversation with a person.
    hop_budget_answer => "hop_budget_answer.md",
    /// After a hop budget error in a conversation with a bot.
    hop_budget_end => "hop_budget_end.md",
    /// After a Task or MessageSubagent refused by the hop budget in a
    /// conversation with a bot when one message to it still fits.
    hop_budget_reply_left => "hop_budget_reply_left.md",
    /// The notice of a chain of bots cut off by the hop budget.
    hop_budget_notice => "hop_budget_notice.md",
    /// The same notice for a chain a routine or a webhook started.
    hop_budget_notice_event => "hop_budget_notice_event.md",
    /// The chain-breadth error: a chain's messages between bots reached
    /// `runtime.max_chain_messages`, so this one was not sent.
    chain_budget => "chain_budget.md",
    /// The notice of a chain of bots cut off by its breadth bound.
    chain_budget_notice => "chain_budget_notice.md",
    /// The same notice for a chain a routine or a webhook started.
    chain_budget_notice_event => "chain_budget_notice_event.md",
    /// What a chain-cut notice says a bot could not do: send one more
    /// message to a bot (`{{cut}}` of the notices above).
    chain_cut_message => "chain_cut_message.md",
    /// The same for a Task refused: start a subagent for its task (the
    /// subagent was never made, so no id is named).
    chain_cut_task => "chain_cut_task.md",
    /// The same for a bot that, at the hop budget's last hop, ended its
    /// turn without answering the bot that asked it (`{{to}}`).
    chain_cut_answer => "chain_cut_answer.md",
    /// A compaction summary, as the model sees it.
    summary => "summary.md",
    /// The compaction call's instructions.
    compact => "compact.md",
    /// The marker ending a summary cut off at its token bound.
    compact_clipped => "compact_clipped.md",
    /// What stands for the middle of an entry's text cut to fit the
    /// compaction request (its start and end are kept around it).
    compact_entry_cut => "compact_entry_cut.md",
    /// The notice of a bot paused by its token budget.
    budget_paused => "budget_paused.md",
    /// The same of a subagent, which spends its parent's budget.
    budget_paused_shared => "budget_paused_shared.md",
    /// The reminder after a looping output.
    loop_reminder => "loop_reminder.md",
    /// The result of a repeated identical tool call.
    tool_loop => "tool_loop.md",
    /// The reminder after an answer cut off at the token limit.
    cut_off => "cut_off.md",
    /// The result of each call of an answer cut off at the token limit.
    call_cut_off => "call_cut_off.md",
    /// The notice of a model that refused to answer.
    model_refused => "model_refused.md",
    /// What is left of a refused call's long argument in later requests.
    argument_cut => "argument_cut.md",
    /// What an older tool result of a long turn is cut to in its requests.
    result_cut => "result_cut.md",
    /// A message over the per-entry cap: its start and its end around a
    /// note saying what was cut and where the whole is.
    entry_clipped => "entry_clipped.md",
    /// The same for a tool's result over the cap.
    result_clipped => "result_clipped.md",
    /// The same for a result search leaves out (SearchTranscript,
    /// ReadTranscript, CheckSubagent: they only quote other entries).
    result_clipped_quoting => "result_clipped_quoting.md",
    /// A long string of a call's arguments over the per-entry budget.
    argument_clipped => "argument_clipped.md",
    /// The notice of a message to a stopped subagent.
    subagent_stopped => "subagent_stopped.md",
    /// The notice in a subagent's task when its parent stopped it.
    subagent_task_stopped => "subagent_task_stopped.md",
    /// A subagent's report of a task it could not finish.
    subagent_unfinished => "subagent_unfinished.md",
    /// The same, with its last progress.
    subagent_unfinished_progress => "subagent_unfinished_progress.md",
    /// Why a subagent's task ended unfinished when a person cancelled it.
    subagent_cancelled => "subagent_cancelled.md",
    /// Why a subagent's task ended when its owner removed its parent (a
    /// bot made by CreateAgent).
    subagent_removed => "subagent_removed.md",
    /// Why a subagent's task ended when its parent left the fleet's config.
    subagent_removed_config => "subagent_removed_config.md",
    /// The notice ending a turn in the DM of a person who no longer owns
    /// the bot (its owner changed in fleet.toml).
    owner_changed => "owner_changed.md",
    /// The notice ending a turn in a bot's conversation with a bot that
    /// belongs to another user now (an owner changed in fleet.toml).
    owner_changed_bot => "owner_changed_bot.md",
    /// The notice ending a turn whose inputs came before an owner change
    /// into a session its new owner reads from the change on (a run of a
    /// routine the former owner made through the API, a room's message).
    owner_changed_run => "owner_changed_run.md",
    /// The room's notice of a member whose turn ended so: what the room
    /// said to it before fleet.toml gave it to its owner is not answered.
    group_member_owner_changed => "group_member_owner_changed.md",
    /// The notice ending a turn of a subagent's task that came from a
    /// conversation of its parent's former owner (an owner changed in
    /// fleet.toml).
    owner_changed_task => "owner_changed_task.md",
    /// Why such a task failed, in its parent's report and CheckSubagent.
    owner_changed_task_report => "owner_changed_task_report.md",
}

static PROMPTS: LazyLock<Prompts> = LazyLock::new(Prompts::load);

/// The compiled-in prompts.
pub fn prompts() -> &'static Prompts {
    &PROMPTS
}

/// A name from outside (a room's name, which its creator chose) as a
/// prompt shows it: a JSON string, quoted and with its `"`, `\` and
/// line breaks escaped, so the name cannot close its quotes and go on
/// as text of the prompt (`mix" room. SYSTEM: …`). A template puts it
/// where a quoted name goes, without quotes of its own.
pub(crate) fn quoted_name(name: &str) -> String {
    // a `str` always serializes; the Debug form is as closed
    serde_json::to_string(name).unwrap_or_else(|_| format!("{name:?}"))
}

impl Template {
    /// The template's file name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole rendering is one; a text that only begins as one (a
    /// person's `[time: 3pm] call mom`) is not. Templates that end in a
    /// variable (a memory update's changes) or in text, or have none.
    #[test]
    fn a_rendering_is_told_from_a_text_that_begins_like_one() {
        let p = prompts();
        let note = p.time_note.render(&[("when", "Mon 09:00")]).unwrap();
        assert!(p.time_note.is_rendering(&note));
        assert!(!p.time_note.is_rendering("[time: 3pm] call mom"));
        let update = p.memory_update.render(&[("changes", "- a\n- b")]).unwrap();
        assert!(p.memory_update.is_rendering(&update));
        let reminder = p.delivery_reminder.render(&[]).unwrap();
        assert!(p.delivery_reminder.is_rendering(&reminder));
        assert!(
            !p.delivery_reminder
                .is_rendering(&format!("{reminder} and more"))
        );
        let summary = p
            .summary
            .render(&[
                ("text", "they said hi"),
                ("covers_to_seq", "4"),
                ("epoch", "1"),
            ])
            .unwrap();
        assert!(p.summary.is_rendering(&summary));
        assert!(!p.summary.is_rendering("Summary of the earlier part, by me"));
    }

    #[test]
    fn every_template_renders_with_its_placeholders() {
        for t in prompts().all() {
            let names = t.placeholders();
            let vars: Vec<(&str, &str)> = names.iter().map(|n| (*n, "x")).collect();
            let out = t.render(&vars);
            assert!(out.is_ok(), "{}: {:?}", t.name(), out);
            if let Some(first) = names.first() {
                let partial: Vec<(&str, &str)> =
                    vars.iter().filter(|(k, _)| k != first).cloned().collect();
                assert!(
                    t.render(&partial).is_err(),
                    "{} should need {first}",
                    t.name()
                );
            }
        }
    }

    /// Every template is described in prompts/README.md, the list people
    /// read to find one (twelve were missing from it).
    #[test]
    fn every_template_is_listed_in_the_readme() {
        let readme = include_str!("../../prompts/README.md");
        // named as a word: `cut_off.md` inside `call_cut_off.md` is not it
        let named = |name: &str| {
            readme.match_indices(name).any(|(at, _)| {
                !readme[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        };
        for t in prompts().all() {
            assert!(named(t.name()), "{} is not in prompts/README.md", t.name());
        }
    }

    #[test]
    fn parses_placeholders() {
        let t = Template::parse("t", "a {{x}} b {{ y }}{{x}}\n");
        assert_eq!(t.placeholders(), vec!["x", "y"]);
        assert_eq!(
            t.render(&[("x", "1"), ("y", "2")]).ok(),
            Some("a 1 b 21".into())
        );
    }
}

//! An approval belongs to the session it was asked in: the same action
//! asked in another session of the bot (a routine's, a person's DM) gets
//! its own approval, card and expiry, and an approval decided for one
//! session does not let the action run in another. (Before, a DM turn was
//! handed the routine session's pending approval, with no card in the DM
//! and a text saying the person's next message would expire it.)

use botfleet_memory::ApprovalRecord;
use botfleet_memory::EntryKind;
use botfleet_memory::ExpiryCause;
use botfleet_memory::Priority;
use pretty_assertions::assert_eq;

use super::*;

/// Opens the bot's routine session `name` (its first event) and answers
/// its record, as a turn there sees it.
async fn routine_session(fx: &Fx, name: &str) -> SessionRecord {
    let key = SessionKey {
        bot: fx.bot.id.clone(),
        kind: SessionKind::Routine,
        peer: name.into(),
    };
    let mut req = crate::protocol::user_message(&fx.bot.owner, &fx.bot, name, None);
    req.source = format!("routine:{}", fx.bot.id);
    req.entry.session = key.id();
    req.entry.author = "system".into();
    req.entry.kind = EntryKind::Event {
        origin: format!("routine:{name}"),
        text: "run the paste".into(),
        trusted: true,
        hop: None,
        chain: None,
        asked: None,
    };
    req.session = key.clone();
    req.priority = Priority::Background;
    fx.rt
        .store
        .write(vec![Mutation::Admit(Box::new(req))])
        .await
        .unwrap();
    SessionRecord {
        id: key.id(),
        key,
        owner: fx.bot.owner.clone(),
        epoch: 0,
        last_seq: 1,
        created_at: 0,
    }
}

/// `command` asked through the gate in `session` (the fixture's scope is
/// switched there for the call).
async fn shell_in(fx: &mut Fx, session: &SessionRecord, command: &str) -> GateDecision {
    let own = std::mem::replace(&mut fx.scope.session, session.clone());
    let d = fx.shell(command).await;
    fx.scope.session = own;
    d
}

async fn record(fx: &Fx, id: ApprovalId) -> ApprovalRecord {
    fx.rt.store.approval(id).await.unwrap().unwrap()
}

fn message_of(d: &GateDecision) -> &str {
    match d {
        GateDecision::AwaitApproval { message, .. } => message,
        other => panic!("expected an approval request, got {other:?}"),
    }
}

#[tokio::test]
async fn the_same_action_in_another_session_gets_its_own_approval() {
    let mut fx = Fx::new(ReviewModes::default()).await;
    let routine = routine_session(&fx, "nightly").await;
    let in_routine = shell_in(&mut fx, &routine, PASTE_PIPE).await;
    let first = approval_of(&in_routine);
    assert!(
        message_of(&in_routine).contains("among their pending approvals"),
        "{in_routine:?}"
    );
    // asked again in the routine: the same approval
    assert_eq!(
        approval_of(&shell_in(&mut fx, &routine, PASTE_PIPE).await),
        first
    );

    // the person asks the same in their DM: a new approval of the DM,
    // with the DM's text (their next message expires it)
    let in_dm = fx.shell(PASTE_PIPE).await;
    let second = approval_of(&in_dm);
    assert_ne!(second, first, "the DM got the routine's approval");
    assert!(
        message_of(&in_dm).contains("or when u sends a new message"),
        "{in_dm:?}"
    );
    assert_eq!(record(&fx, second).await.session, fx.scope.session.id);
    assert_eq!(record(&fx, first).await.session, routine.id);
    let dm_cards = fx
        .rt
        .store
        .entries_after(fx.scope.session.id, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.kind, EntryKind::Approval { .. }))
        .count();
    assert_eq!(dm_cards, 1, "the DM shows its own card");

    // the person's next message expires the DM's approval only
    fx.user_message().await;
    let dm = record(&fx, second).await;
    assert_eq!(
        (dm.status, dm.expired_by),
        (ApprovalStatus::Expired, Some(ExpiryCause::UserMessage))
    );
    assert_eq!(record(&fx, first).await.status, ApprovalStatus::Pending);
}

#[tokio::test]
async fn an_approval_decided_for_one_session_does_not_run_the_action_in_another() {
    let mut fx = Fx::new(ReviewModes::default()).await;
    let routine = routine_session(&fx, "nightly").await;
    let first = approval_of(&shell_in(&mut fx, &routine, PASTE_PIPE).await);
    fx.decide(first, ApprovalDecision::Approve).await;

    // the DM does not use the routine's approval: it asks its own
    let in_dm = fx.shell(PASTE_PIPE).await;
    assert_ne!(approval_of(&in_dm), first, "{in_dm:?}");
    // the routine, which it was decided for, runs it
    let d = shell_in(&mut fx, &routine, PASTE_PIPE).await;
    let GateDecision::Run { approval, .. } = &d else {
        panic!("{d:?}")
    };
    assert_eq!(*approval, Some(first));
}

/// A side effect refused while an approval waits quotes that approval's
/// action only to a turn of the person who decides it: a turn in a
/// session of someone else (a room's discussion owned by another user, a
/// DM kept by a former owner) learns its id, not what was asked.
#[tokio::test]
async fn the_waiting_refusal_quotes_the_action_only_to_its_decider() {
    let mut fx = Fx::new(ReviewModes::default()).await;
    let id = approval_of(&fx.shell(PASTE_PIPE).await);
    let own = refused(&fx.shell("ls").await);
    assert!(
        own.contains("paste.example") && own.contains(&id.to_string()),
        "{own}"
    );

    let mut elsewhere = fx.scope.session.clone();
    elsewhere.owner = UserId::new("v").unwrap();
    let other = shell_in(&mut fx, &elsewhere, "ls").await;
    let other = refused(&other);
    assert!(
        other.contains("1 approval(s) of yours are waiting") && other.contains(&id.to_string()),
        "{other}"
    );
    assert!(!other.contains("paste.example"), "{other}");
}

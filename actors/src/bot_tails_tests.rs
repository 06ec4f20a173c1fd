use botfleet_memory::SessionId;

use super::MAX_TAILS;
use super::Tails;
use crate::engine::SessionTail;

fn put_new(tails: &mut Tails) -> SessionId {
    let session = SessionId::new_v7();
    tails.put(session, SessionTail::new(session));
    session
}

#[test]
fn at_most_max_tails_are_held_the_least_recently_used_left_out() {
    let mut tails = Tails::default();
    let sessions: Vec<SessionId> = (0..MAX_TAILS).map(|_| put_new(&mut tails)).collect();
    assert_eq!(tails.len(), MAX_TAILS);
    // the first session's turn runs again: taken out and given back, it is
    // the most recently used
    let first = tails.take(&sessions[0]).unwrap();
    tails.put(sessions[0], first);
    let newest = put_new(&mut tails);
    assert_eq!(tails.len(), MAX_TAILS);
    assert!(
        tails.take(&sessions[1]).is_none(),
        "the least recently used stays"
    );
    assert!(tails.take(&sessions[0]).is_some());
    assert!(tails.take(&newest).is_some());
    for _ in 0..3 * MAX_TAILS {
        put_new(&mut tails);
    }
    assert_eq!(tails.len(), MAX_TAILS);
}

#[test]
fn a_run_of_a_session_not_held_makes_room_for_its_context() {
    let mut tails = Tails::default();
    let sessions: Vec<SessionId> = (0..MAX_TAILS).map(|_| put_new(&mut tails)).collect();
    // a held context taken by its run: one fewer held, the run holds it
    assert!(tails.take(&sessions[5]).is_some());
    assert_eq!(tails.len(), MAX_TAILS - 1);
    tails.put(sessions[5], SessionTail::new(sessions[5]));
    // a session without one: the run's new context and those held make
    // no more than the bot keeps, the least recently used left out
    let new = SessionId::new_v7();
    assert!(tails.take(&new).is_none());
    assert_eq!(tails.len(), MAX_TAILS - 1);
    assert!(
        tails.take(&sessions[0]).is_none(),
        "the oldest was left out"
    );
    assert!(tails.take(&sessions[5]).is_some());
}

#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;

/// Drives a run to its end; `speak(member, round)` says how many messages
/// the member delivers. Returns the order of turns `(member, round)`.
fn drive(run: &mut Run, mut speak: impl FnMut(usize, u32) -> u32) -> Vec<(usize, u32)> {
    let mut order = Vec::new();
    for _ in 0..1000 {
        match run.advance() {
            Next::Done(_) => return order,
            Next::Run { member, round, .. } => {
                order.push((member, round));
                let n = speak(member, round);
                run.record(if n == 0 {
                    Turn::Skipped
                } else {
                    Turn::Spoke(n)
                });
            }
        }
    }
    panic!("run did not terminate");
}

#[test]
fn chatty_members_stop_at_the_reply_limit() {
    let mut run = Run::new(vec![0, 1, 2], Limits::default());
    // each wants to send 3 messages a turn: 2 are published
    let order = drive(&mut run, |_, _| 3);
    assert_eq!(order, vec![(0, 1), (1, 1), (2, 1), (0, 2), (1, 2)]);
    assert_eq!(run.replies(), 10);
    assert_eq!(run.end(), Some(End::ReplyLimit));
}

#[test]
fn one_message_per_turn_stops_at_the_round_limit() {
    let mut run = Run::new(vec![0, 1, 2], Limits::default());
    let order = drive(&mut run, |_, _| 1);
    assert_eq!(order.len(), 9);
    assert_eq!(run.replies(), 9);
    assert_eq!(run.end(), Some(End::RoundLimit));
}

#[test]
fn a_silent_round_ends_the_run() {
    let mut run = Run::new(vec![0, 1, 2], Limits::default());
    let order = drive(&mut run, |_, _| 0);
    assert_eq!(order, vec![(0, 1), (1, 1), (2, 1)]);
    assert_eq!(run.end(), Some(End::SilentRound { round: 1 }));
    assert_eq!(run.replies(), 0);
}

#[test]
fn a_round_with_failed_turns_is_not_called_silent() {
    let mut run = Run::new(vec![0, 1, 2], Limits::default());
    // 0 fails, 1 and 2 pass
    for (member, turn) in [(0, Turn::Failed(0)), (1, Turn::Skipped), (2, Turn::Skipped)] {
        assert!(matches!(run.advance(), Next::Run { member: m, .. } if m == member));
        run.record(turn);
    }
    let end = run.advance();
    assert_eq!(
        end,
        Next::Done(End::FailedRound {
            round: 1,
            failed: 1,
            turns: 3
        })
    );
    assert_eq!(run.failed(), 1);
    let text = run.end().unwrap().describe(&Limits::default());
    assert_eq!(
        text,
        "nobody spoke in round 1, in which 1 of 3 member turns failed"
    );
    assert_eq!(run.end().unwrap().code(), "failed_round");
}

/// A run of members 0 and 1 whose turns in order were `turns`.
fn run_of(turns: &[(usize, Turn)]) -> Run {
    let mut run = Run::new(vec![0, 1], Limits::default());
    for (member, turn) in turns {
        assert!(matches!(run.advance(), Next::Run { member: m, .. } if m == *member));
        run.record(*turn);
    }
    run
}

/// Member 0's `turn` then member 1's pass: the round is not a silence,
/// member 0's outcome is `outcome`.
fn not_silent(turn: Turn, outcome: MemberOutcome) -> Run {
    let mut run = run_of(&[(0, turn), (1, Turn::Skipped)]);
    let Next::Done(end) = run.advance() else {
        panic!("{run:?}");
    };
    assert_eq!(end, End::SilentRound { round: 1 });
    assert_eq!(run.describe_end(end), "nobody published in round 1");
    assert_eq!(
        run.outcomes(),
        vec![(0, outcome), (1, MemberOutcome::Passed)]
    );
    run
}

/// A checkpoint written before `round_field` and `slot_field` existed
/// reads as before: a member that says nothing passes in silence.
fn older_checkpoint_reads_as_before(round_field: &str, slot_field: &str) {
    let mut old = serde_json::to_value(Run::new(vec![0], Limits::default())).unwrap();
    old.as_object_mut().unwrap().remove(round_field);
    for slot in old["slots"].as_array_mut().unwrap() {
        slot.as_object_mut().unwrap().remove(slot_field);
    }
    let mut run: Run = serde_json::from_value(old).unwrap();
    assert!(matches!(run.advance(), Next::Run { member: 0, .. }));
    run.record(Turn::Skipped);
    assert_eq!(run.advance(), Next::Done(End::SilentRound { round: 1 }));
    assert_eq!(
        run.describe_end(End::SilentRound { round: 1 }),
        "nobody had more to say (round 1 passed in silence)"
    );
}

/// A member whose messages auto-review refused did not pass: a round of
/// it and a member that did pass is not called a silence, its outcome is
/// `held`, and it is named; one refused in round 1 that speaks in round 2
/// spoke. A checkpoint written before `held` existed reads as before.
#[test]
fn a_member_review_refused_is_held_not_silent() {
    let run = not_silent(Turn::Held, MemberOutcome::Held);
    assert_eq!(run.held(), vec![0]);

    // refused in round 1, spoke in round 2
    let run = run_of(&[(0, Turn::Held), (1, Turn::Spoke(1)), (0, Turn::Spoke(1))]);
    assert_eq!(run.outcomes()[0], (0, MemberOutcome::Spoke));
    assert!(run.held().is_empty());

    older_checkpoint_reads_as_before("round_held", "held");
}

/// A member that published nothing and asked for an approval did not
/// pass: its outcome is `awaiting_approval`, the round is not a silence,
/// and the run names it (QA, 2026-12-06: "round 1 passed in silence",
/// the member `passed`). A checkpoint written before reads as before.
#[test]
fn a_member_awaiting_approval_is_not_silent() {
    let run = not_silent(Turn::Asked, MemberOutcome::AwaitingApproval);
    assert_eq!(run.awaiting_approval(), vec![0]);
    assert!(run.held().is_empty());
    assert_eq!(
        serde_json::to_value(MemberOutcome::AwaitingApproval).unwrap(),
        serde_json::json!("awaiting_approval")
    );
    older_checkpoint_reads_as_before("round_asked", "asked");
}

/// A member that could take no turn (removed from the config) ran none:
/// it is not offered another round, the end is not called a silence,
/// and the run names it. (Its absence counted as a turn: "round 2 passed
/// in silence" where only the other member had spoken.)
#[test]
fn an_absent_member_takes_no_turn_and_no_silence_is_claimed() {
    let mut run = Run::new(vec![0, 1], Limits::default());
    assert!(matches!(run.advance(), Next::Run { member: 0, .. }));
    run.record(Turn::Absent);
    assert!(matches!(run.advance(), Next::Run { member: 1, .. }));
    run.record(Turn::Spoke(1));
    // round 2: 0 has 1's message to read, but is out
    let Next::Done(end) = run.advance() else {
        panic!("{run:?}");
    };
    assert_eq!(end, End::SilentRound { round: 2 });
    assert_eq!(
        run.describe_end(end),
        "no member had anything new to answer after round 1"
    );
    assert_eq!(run.absent(), vec![0]);
    assert_eq!(
        run.outcomes(),
        vec![(0, MemberOutcome::NoTurn), (1, MemberOutcome::Spoke)]
    );

    // every member addressed absent: round 1 ran no turn
    let mut run = Run::new(vec![2], Limits::default());
    assert!(matches!(run.advance(), Next::Run { member: 2, .. }));
    run.record(Turn::Absent);
    let Next::Done(end) = run.advance() else {
        panic!("{run:?}");
    };
    assert_eq!(
        run.describe_end(end),
        "no member addressed could take a turn"
    );
}

#[test]
fn what_a_failed_turn_delivered_counts_and_the_next_round_is_silent() {
    let mut run = Run::new(vec![0, 1], Limits::default());
    assert!(matches!(run.advance(), Next::Run { member: 0, .. }));
    // it published one message, then failed
    assert_eq!(
        run.record(Turn::Failed(1)),
        Recorded {
            published: 1,
            withheld: 0
        }
    );
    assert!(matches!(run.advance(), Next::Run { member: 1, .. }));
    run.record(Turn::Skipped);
    // round 2: 0 has nothing new, 1 has seen everything
    assert_eq!(run.advance(), Next::Done(End::SilentRound { round: 2 }));
    assert_eq!((run.replies(), run.failed()), (1, 1));
}

#[test]
fn a_member_whose_turn_failed_takes_no_more_turns_in_the_run() {
    let mut run = Run::new(vec![0, 1, 2], Limits::default());
    // round 1: 0 fails at once, 1 and 2 speak
    for (member, turn) in [
        (0, Turn::Failed(0)),
        (1, Turn::Spoke(1)),
        (2, Turn::Spoke(1)),
    ] {
        assert!(matches!(run.advance(), Next::Run { member: m, round: 1, .. } if m == member));
        run.record(turn);
    }
    // round 2 has news for 0 (both replies) and 1 (2's reply), but 0 is
    // not woken again
    assert!(matches!(
        run.advance(),
        Next::Run {
            member: 1,
            round: 2,
            ..
        }
    ));
    run.record(Turn::Skipped);
    assert_eq!(run.advance(), Next::Done(End::SilentRound { round: 2 }));
    assert_eq!(run.turns(), vec![(0, 1), (1, 2), (2, 1)]);
    // and it stays out after the state is stored and read back
    let copy: Run = serde_json::from_value(serde_json::to_value(&run).unwrap()).unwrap();
    assert_eq!(copy, run);
}

#[test]
fn a_state_stored_before_members_could_be_out_reads_back() {
    // a run checkpoint written by an earlier version has no `out` field
    let mut run = Run::new(vec![0, 1], Limits::default());
    run.advance();
    run.record(Turn::Spoke(1));
    let mut value = serde_json::to_value(&run).unwrap();
    for slot in value["slots"].as_array_mut().unwrap() {
        slot.as_object_mut().unwrap().remove("out");
    }
    let copy: Run = serde_json::from_value(value).unwrap();
    assert_eq!(copy, run);
}

#[test]
fn a_lone_member_is_not_woken_to_read_its_own_messages() {
    let mut run = Run::new(vec![1], Limits::default());
    let order = drive(&mut run, |_, _| 1);
    assert_eq!(order, vec![(1, 1)]);
    assert_eq!(run.end(), Some(End::SilentRound { round: 2 }));
    assert_eq!(run.replies(), 1);
}

#[test]
fn only_members_with_something_new_run() {
    // 0 speaks in round 1; 1 and 2 stay silent. In round 2, 0 has nothing
    // new (only its own message), 1 and 2 have seen it: round 2 is silent.
    let mut run = Run::new(vec![0, 1, 2], Limits::default());
    let order = drive(&mut run, |m, r| u32::from(m == 0 && r == 1));
    assert_eq!(order, vec![(0, 1), (1, 1), (2, 1)]);
    assert_eq!(run.end(), Some(End::SilentRound { round: 2 }));
}

#[test]
fn members_run_in_room_order_whatever_the_selection_order() {
    let mut run = Run::new(vec![4, 1, 1, 3], Limits::default());
    assert_eq!(run.members(), vec![1, 3, 4]);
    let order = drive(&mut run, |_, _| 0);
    assert_eq!(order, vec![(1, 1), (3, 1), (4, 1)]);
}

#[test]
fn no_selection_ends_at_once() {
    let mut run = Run::new(vec![], Limits::default());
    assert_eq!(run.advance(), Next::Done(End::NoMembers));
    assert_eq!(run.record(Turn::Spoke(3)), Recorded::default());
}

#[test]
fn withheld_messages_are_counted() {
    let mut run = Run::new(vec![0, 1], Limits::default());
    assert!(matches!(run.advance(), Next::Run { member: 0, .. }));
    assert_eq!(
        run.record(Turn::Spoke(5)),
        Recorded {
            published: 2,
            withheld: 3
        }
    );
}

#[test]
fn what_a_running_turn_may_publish_stops_at_both_limits() {
    let limits = Limits {
        max_members: 6,
        max_rounds: 3,
        max_replies: 3,
        max_per_turn: 2,
    };
    let mut run = Run::new(vec![0, 1], limits);
    assert!(matches!(run.advance(), Next::Run { member: 0, .. }));
    assert_eq!(run.publishable(1), 1);
    assert_eq!(run.publishable(3), 2);
    run.record(Turn::Spoke(2));
    assert!(matches!(run.advance(), Next::Run { member: 1, .. }));
    // one reply left in the run
    assert_eq!(run.publishable(2), 1);
    run.record(Turn::Spoke(2));
    assert_eq!(run.publishable(1), 0);
}

#[test]
fn the_state_survives_serialization_mid_run() {
    let mut run = Run::new(vec![0, 1, 2], Limits::default());
    run.advance();
    run.record(Turn::Spoke(1));
    let next = run.advance();
    let copy: Run = serde_json::from_value(serde_json::to_value(&run).unwrap()).unwrap();
    assert_eq!(copy, run);
    let mut copy = copy;
    assert_eq!(copy.advance(), next);
}

/// What a member does on a turn, drawn at random: how many messages it
/// delivers, and whether its turn then fails.
fn behaviour() -> impl Strategy<Value = Vec<(u32, bool)>> {
    proptest::collection::vec(
        (
            prop_oneof![3 => Just(0u32), 3 => Just(1u32), 2 => 2u32..6],
            proptest::bool::weighted(0.15),
        ),
        1..64,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// For random selections, limits and speak/skip/fail behaviour: every
    /// run terminates within rounds × members turns, no limit is ever
    /// exceeded, a silent full round ends it, and a member whose turn
    /// failed never runs again in the run.
    #[test]
    fn limits_hold_and_runs_terminate(
        selected in proptest::collection::vec(0usize..6, 0..8),
        acts in behaviour(),
        rounds in 1u32..5,
        replies in 1u32..14,
        per_turn in 1u32..4,
    ) {
        let limits = Limits { max_members: 6, max_rounds: rounds, max_replies: replies, max_per_turn: per_turn };
        let mut run = Run::new(selected.clone(), limits);
        let mut distinct = selected.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let mut i = 0;
        let mut turns = 0u32;
        // per round: did anyone publish
        let mut spoke: Vec<bool> = Vec::new();
        let mut last_round = 0;
        let mut failed: Vec<usize> = Vec::new();
        loop {
            match run.advance() {
                Next::Done(end) => {
                    if distinct.is_empty() {
                        prop_assert_eq!(end, End::NoMembers);
                    }
                    if let End::SilentRound { round } = end {
                        // the silent round published nothing
                        prop_assert!(!spoke.get(round as usize - 1).copied().unwrap_or(false));
                    }
                    break;
                }
                Next::Run { member, round, slot } => {
                    prop_assert!(distinct.contains(&member));
                    prop_assert!(!failed.contains(&member), "member {} ran again after failing", member);
                    prop_assert_eq!(distinct[slot], member);
                    prop_assert!(round >= 1 && round <= rounds, "round {} of {}", round, rounds);
                    prop_assert!(round >= last_round);
                    // every earlier round had a speaker, or we would have stopped
                    for r in 1..round {
                        prop_assert!(spoke.get(r as usize - 1).copied().unwrap_or(false));
                    }
                    last_round = round;
                    turns += 1;
                    prop_assert!(turns <= rounds * distinct.len() as u32);
                    let (n, fails) = acts[i % acts.len()];
                    i += 1;
                    let before = run.replies();
                    // what the coordinator publishes while the turn runs,
                    // message by message, is what recording it publishes
                    let live: Vec<u32> = (0..=n).map(|k| run.publishable(k)).collect();
                    let rec = run.record(match (n, fails) {
                        (n, true) => Turn::Failed(n),
                        (0, false) => Turn::Skipped,
                        (n, false) => Turn::Spoke(n),
                    });
                    if fails {
                        failed.push(member);
                    }
                    prop_assert_eq!(live.last().copied(), Some(rec.published));
                    prop_assert!(live.windows(2).all(|w| w[1] >= w[0] && w[1] - w[0] <= 1));
                    prop_assert!(rec.published <= per_turn);
                    prop_assert_eq!(rec.published + rec.withheld, n);
                    prop_assert_eq!(run.replies(), before + rec.published);
                    prop_assert!(run.replies() <= replies);
                    while spoke.len() < round as usize {
                        spoke.push(false);
                    }
                    if rec.published > 0 {
                        spoke[round as usize - 1] = true;
                    }
                }
            }
        }
        prop_assert!(run.end().is_some());
        prop_assert!(run.replies() <= replies);
        // the log holds the user's message and exactly the published replies
        prop_assert_eq!(run.log().len() as u32, run.replies() + 1);
        // no member published more than per_turn × its turns
        for (member, t) in run.turns() {
            let mine = run.log().iter().filter(|a| **a == Some(member)).count() as u32;
            prop_assert!(mine <= t * per_turn);
        }
        // asking again after the end is stable
        let end = run.end();
        prop_assert_eq!(run.advance(), Next::Done(end.unwrap()));
    }

    /// Random mentions of known and unknown names: the selection is
    /// exactly the known members, in room order, without duplicates.
    #[test]
    fn mentions_select_known_members_in_room_order(
        picks in proptest::collection::vec(0usize..9, 0..6),
        everyone in any::<bool>(),
        upper in any::<bool>(),
    ) {
        let members = super::super::mentions::tests_support::members(&["alpha", "beta", "gamma", "delta"]);
        let names = ["alpha", "beta", "gamma", "delta", "zed", "omega", "x1", "BETA", "Gamma-Name"];
        let mut text = String::from("hi");
        for p in &picks {
            let n = if upper { names[*p].to_uppercase() } else { names[*p].to_owned() };
            text.push_str(&format!(" @{n},"));
        }
        if everyone {
            text.push_str(" @everyone");
        }
        let sel = super::super::mentions::select(&text, &members);
        let mut want: Vec<usize> = picks.iter().filter_map(|p| match *p {
            0..=3 => Some(*p),
            7 => Some(1),
            8 => Some(2),
            _ => None,
        }).collect();
        want.sort_unstable();
        want.dedup();
        let known_any = !want.is_empty();
        if everyone || picks.is_empty() {
            want = vec![0, 1, 2, 3];
        }
        let unknown: Vec<&usize> = picks.iter().filter(|p| matches!(**p, 4..=6)).collect();
        if !everyone && !known_any && !unknown.is_empty() {
            want = Vec::new();
        }
        prop_assert_eq!(sel.members, want);
        prop_assert_eq!(sel.unknown.is_empty(), unknown.is_empty());
    }
}

use super::*;

fn checkpoint(turn: TurnId, step: u64) -> Mutation {
    Mutation::Checkpoint {
        turn,
        checkpoint: serde_json::json!({ "step": step }),
    }
}

fn steps(batch: &[Mutation]) -> Vec<(TurnId, u64)> {
    batch
        .iter()
        .filter_map(|m| match m {
            Mutation::Checkpoint { turn, checkpoint } => {
                Some((*turn, checkpoint["step"].as_u64().unwrap_or(0)))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_batch_keeps_only_its_last_checkpoint() {
    let turn = TurnId::new_v7();
    let mut batch = vec![
        checkpoint(turn, 1),
        Mutation::ResetAttempts { turn },
        checkpoint(turn, 2),
    ];
    one_checkpoint(&mut batch, turn);
    assert_eq!(steps(&batch), vec![(turn, 2)]);
    assert_eq!(batch.len(), 2, "the other mutations stay");
}

#[test]
fn a_batch_that_ends_the_turn_writes_no_checkpoint() {
    let turn = TurnId::new_v7();
    let mut batch = vec![
        checkpoint(turn, 1),
        Mutation::EndTurn {
            turn,
            status: TurnStatus::Completed,
            error: None,
        },
    ];
    one_checkpoint(&mut batch, turn);
    assert!(steps(&batch).is_empty());
    assert_eq!(batch.len(), 1);
}

#[test]
fn another_turns_checkpoint_is_left_alone() {
    let (turn, other) = (TurnId::new_v7(), TurnId::new_v7());
    let mut batch = vec![
        checkpoint(other, 7),
        checkpoint(turn, 1),
        Mutation::EndTurn {
            turn,
            status: TurnStatus::Completed,
            error: None,
        },
    ];
    one_checkpoint(&mut batch, turn);
    assert_eq!(steps(&batch), vec![(other, 7)]);
}

fn reply(bot: &str, session: u8) -> ReplyTo {
    ReplyTo {
        bot: BotId::new(bot).unwrap(),
        session: botfleet_memory::SessionKey {
            bot: BotId::new(bot).unwrap(),
            kind: SessionKind::Agent,
            peer: format!("peer{session}"),
        }
        .id(),
        asked_at: 0,
        owed: true,
    }
}

/// Regression (review, cf3e80d): a bot that wrote from two of its
/// sessions, with another bot's message between, was named twice in the
/// failure notice (`Vec::dedup` drops neighbours only).
#[test]
fn the_failure_notice_names_each_bot_once_in_the_order_they_wrote() {
    let reply_to = [reply("r", 1), reply("x", 1), reply("r", 2), reply("x", 1)];
    assert_eq!(bots_named(&reply_to), "r, x");
    assert_eq!(bots_named(&[reply("r", 1)]), "r");
}

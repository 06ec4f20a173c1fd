//! What a committed batch of a turn wrote that the runner follows up on:
//! the entries it appended (fed to the tail), the inputs it admitted for
//! other bots (routed), the bots it wrote (reloaded). Read by position,
//! mutation by mutation with its result, so a `Mutation::Limited` counts
//! only the branch the writer took: a refused call's message is neither
//! routed nor shown, its refusal is.

use botfleet_memory::AdmitOutcome;
use botfleet_memory::AdmittedRecord;
use botfleet_memory::BotId;
use botfleet_memory::Entry;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;

/// What one mutation of a batch may write that the runner follows up on,
/// taken before the batch goes to the store.
pub(super) enum Shape {
    /// An entry appended (`Append`, `TellChain`): in the tail when its
    /// result says where it landed.
    Entry(NewEntry),
    /// An input admitted for a bot (`Admit`, a subagent's report): routed
    /// when accepted.
    Input(Priority, NewEntry),
    /// A bot written (`UpsertBot`).
    Bot(BotId),
    /// The branches of a `Limited`: `within`, then each limit's `refused`.
    Limited {
        within: Vec<Shape>,
        refused: Vec<Vec<Shape>>,
    },
    /// Nothing to follow up on.
    Other,
}

impl Shape {
    /// The shape of each mutation of `batch`, by position.
    pub(super) fn of(batch: &[Mutation]) -> Vec<Shape> {
        batch.iter().map(Shape::of_one).collect()
    }

    fn of_one(m: &Mutation) -> Shape {
        if let Mutation::Append(e) | Mutation::TellChain { notice: e, .. } = m {
            return Shape::Entry((**e).clone());
        }
        if let Mutation::Admit(req)
        | Mutation::EndSubagentTask {
            report: Some(req), ..
        } = m
        {
            return Shape::Input(req.priority, req.entry.clone());
        }
        if let Mutation::UpsertBot(b) = m {
            return Shape::Bot(b.id.clone());
        }
        if let Mutation::Limited(l) = m {
            return Shape::Limited {
                within: Shape::of(&l.within),
                refused: l.limits.iter().map(|l| Shape::of(&l.refused)).collect(),
            };
        }
        Shape::Other
    }
}

/// What a committed batch wrote, in batch order.
#[derive(Default)]
pub(super) struct Written {
    /// Entries appended, where they landed.
    pub appended: Vec<Entry>,
    /// Inputs accepted for other bots.
    pub admitted: Vec<(AdmittedRecord, Priority, NewEntry)>,
    /// Bots written.
    pub upserted: Vec<BotId>,
}

impl Written {
    /// `shapes` (of a batch) with the batch's `results`.
    pub(super) fn of(shapes: Vec<Shape>, results: &[MutationResult]) -> Written {
        let mut out = Written::default();
        out.add(shapes, results);
        out
    }

    fn add(&mut self, shapes: Vec<Shape>, results: &[MutationResult]) {
        for (shape, result) in shapes.into_iter().zip(results) {
            match shape {
                Shape::Entry(ne) => {
                    // a `TellChain` told before answers `Done`: nothing landed
                    if let MutationResult::Appended {
                        seq,
                        gid,
                        created_at,
                        ..
                    } = result
                    {
                        self.appended.push(Entry {
                            id: ne.id,
                            session: ne.session,
                            seq: *seq,
                            gid: *gid,
                            author: ne.author,
                            turn: ne.turn,
                            created_at: *created_at,
                            kind: ne.kind,
                        });
                    }
                }
                Shape::Input(priority, entry) => {
                    // a duplicate was routed when first admitted; a stopped
                    // subagent's report is not admitted at all
                    if let MutationResult::Admitted(AdmitOutcome::Accepted(rec)) = result {
                        self.admitted.push((rec.clone(), priority, entry));
                    }
                }
                Shape::Bot(id) => self.upserted.push(id),
                Shape::Limited {
                    within,
                    mut refused,
                } => {
                    if let MutationResult::Limited {
                        refused: by,
                        results,
                    } = result
                    {
                        let taken = match by {
                            Some(i) if *i < refused.len() => refused.swap_remove(*i),
                            Some(_) => Vec::new(),
                            None => within,
                        };
                        self.add(taken, results);
                    }
                }
                Shape::Other => {}
            }
        }
    }
}

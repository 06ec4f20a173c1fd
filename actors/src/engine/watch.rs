//! Watching a turn for loops: the streamed text of each model call goes
//! through the loop detector (a fresh one per call), and the turn's tool
//! calls through the repeated-call guard.

use crate::model::SinkControl;
use crate::model::StreamSink;
use crate::safety::LoopDetector;
use crate::safety::LoopKind;
use crate::safety::LoopVerdict;

/// A stream sink that aborts the stream when the output loops.
pub(crate) struct LoopSink {
    detector: LoopDetector,
    /// What looped, once it did.
    pub(crate) tripped: Option<String>,
    /// What the attempt being streamed made: its text, and its calls and
    /// reasoning ([`StreamSink::on_unshown`]), which the loop detector
    /// does not watch.
    received: String,
    /// The texts of the attempts the provider sent again after they broke
    /// off (those that had streamed any): the server made them, and they
    /// count toward the turn's usage (`Runner::call_model`).
    pub(crate) voided: Vec<String>,
}

impl LoopSink {
    pub(crate) fn new() -> Self {
        Self {
            detector: LoopDetector::default(),
            tripped: None,
            received: String::new(),
            voided: Vec::new(),
        }
    }

    /// The text the last attempt streamed, taken.
    pub(crate) fn take_received(&mut self) -> String {
        std::mem::take(&mut self.received)
    }
}

impl StreamSink for LoopSink {
    fn on_text(&mut self, delta: &str) -> SinkControl {
        self.received.push_str(delta);
        match self.detector.push(delta) {
            LoopVerdict::Continue => SinkControl::Continue,
            LoopVerdict::Loop {
                kind,
                period,
                repeats,
                sample,
            } => {
                let what = match (kind, period) {
                    (LoopKind::Chars, 1) => format!("the same character {repeats} times"),
                    (LoopKind::Chars, _) => format!("the same {period} characters {repeats} times"),
                    (LoopKind::Lines, 1) => format!("the same line {repeats} times"),
                    (LoopKind::Lines, _) => format!("the same {period} lines {repeats} times"),
                };
                let sample: String = sample.chars().take(80).collect();
                tracing::warn!(%what, %sample, "model output loops; stream aborted");
                self.tripped = Some(what.clone());
                SinkControl::Abort {
                    reason: format!("loop: {what}"),
                }
            }
        }
    }

    fn on_unshown(&mut self, piece: &str) {
        self.received.push_str(piece);
    }

    /// The provider sends the request again after a broken stream: the
    /// text seen so far is void, and the new answer is watched from its
    /// start (else a retried answer would count its own start twice).
    fn on_restart(&mut self) {
        self.detector = LoopDetector::default();
        if !self.received.is_empty() {
            self.voided.push(std::mem::take(&mut self.received));
        }
    }
}

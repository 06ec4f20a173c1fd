//! Agent-level loop detection: the same tool calls, over and over.
//!
//! A model stuck in a loop often does not repeat text but actions: it reads
//! the same file, runs the same command, or alternates between two calls
//! without changing anything. [`ToolCallLoopGuard`] sees every call of a turn
//! as (tool name, arguments), identifies it by a hash of the name and the
//! canonical form of the arguments (object keys sorted, so key order does not
//! matter), and reports when a block of `period` calls has been repeated
//! `repeats` times in a row.
//!
//! Defaults: 3 copies of a block of 1 to 4 calls. `A A A` and `A B A B A B`
//! trip; `test, edit x, test, edit y, test` does not, because the edits differ.
//! Calls that legitimately repeat unchanged (polling a job) need their own
//! budget or must be told apart by their arguments (a poll counter).

use serde_json::Value;

use super::loop_detector::FNV_START;
use super::loop_detector::PeriodRuns;
use super::loop_detector::RepeatThreshold;
use super::loop_detector::fnv1a;

/// Tuning for [`ToolCallLoopGuard`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLoopConfig {
    /// Consecutive copies of the same call block that count as a loop
    /// (raised to 2). Default 3.
    pub repeats: usize,
    /// Longest block of calls checked, in calls (raised to 1). Default 4.
    pub max_period: usize,
}

impl Default for ToolLoopConfig {
    fn default() -> Self {
        Self {
            repeats: 3,
            max_period: 4,
        }
    }
}

/// The answer to [`ToolCallLoopGuard::observe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolLoopVerdict {
    /// The call is not part of a loop.
    Continue,
    /// The latest calls repeat a block of earlier calls.
    Loop {
        /// Number of calls in the repeating block.
        period: usize,
        /// Consecutive copies of the block, the latest call included.
        repeats: usize,
        /// Tool names of the block, oldest first.
        tools: Vec<String>,
    },
}

/// Watches the tool calls of one turn for repetition.
#[derive(Debug, Clone)]
pub struct ToolCallLoopGuard {
    config: ToolLoopConfig,
    runs: PeriodRuns<u64>,
    names: Vec<String>,
}

impl ToolCallLoopGuard {
    /// A guard with `config`, normalised as documented on its fields.
    pub fn new(config: ToolLoopConfig) -> Self {
        let config = ToolLoopConfig {
            repeats: config.repeats.max(2),
            max_period: config.max_period.max(1),
        };
        let threshold = RepeatThreshold {
            min_repeats: config.repeats,
            min_span: 1,
        };
        Self {
            config,
            runs: PeriodRuns::new(config.max_period, threshold, threshold),
            names: Vec::with_capacity(config.max_period),
        }
    }

    /// Records a call of `tool` with `args` and says whether the calls loop.
    pub fn observe(&mut self, tool: &str, args: &Value) -> ToolLoopVerdict {
        let mut hash = fnv1a(FNV_START, tool.as_bytes());
        hash = fnv1a(hash, &[0]);
        hash = hash_value(hash, args);
        if self.names.len() == self.config.max_period {
            self.names.remove(0);
        }
        self.names.push(tool.to_owned());
        match self.runs.push(hash, false) {
            None => ToolLoopVerdict::Continue,
            Some(hit) => ToolLoopVerdict::Loop {
                period: hit.period,
                repeats: hit.repeats,
                tools: self.names[self.names.len().saturating_sub(hit.period)..].to_vec(),
            },
        }
    }

    /// Forgets all calls (at the start of a turn).
    pub fn reset(&mut self) {
        self.runs.clear();
        self.names.clear();
    }
}

impl Default for ToolCallLoopGuard {
    fn default() -> Self {
        Self::new(ToolLoopConfig::default())
    }
}

/// Hashes the canonical form of `value`: object keys sorted, every value
/// tagged with its type and length-prefixed, so distinct values do not meet.
fn hash_value(hash: u64, value: &Value) -> u64 {
    match value {
        Value::Null => fnv1a(hash, b"n"),
        Value::Bool(b) => fnv1a(hash, if *b { b"t" } else { b"f" }),
        Value::Number(n) => hash_str(fnv1a(hash, b"#"), &n.to_string()),
        Value::String(s) => hash_str(fnv1a(hash, b"s"), s),
        Value::Array(items) => {
            let mut hash = fnv1a(hash, b"[");
            hash = fnv1a(hash, &(items.len() as u64).to_le_bytes());
            for item in items {
                hash = hash_value(hash, item);
            }
            hash
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            let mut hash = fnv1a(hash, b"{");
            hash = fnv1a(hash, &(entries.len() as u64).to_le_bytes());
            for (key, item) in entries {
                hash = hash_str(hash, key);
                hash = hash_value(hash, item);
            }
            hash
        }
    }
}

fn hash_str(hash: u64, s: &str) -> u64 {
    let hash = fnv1a(hash, &(s.len() as u64).to_le_bytes());
    fnv1a(hash, s.as_bytes())
}

#[cfg(test)]
#[path = "tool_loop_tests.rs"]
mod tests;

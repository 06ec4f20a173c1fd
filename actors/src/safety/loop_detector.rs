//! Loop detection on streamed model output.
//!
//! A model that starts repeating itself rarely stops on its own: it streams the
//! same sentence, line or block until the token limit. [`LoopDetector`] watches
//! the text deltas of one assistant message as they arrive and reports a
//! [`LoopVerdict::Loop`] as soon as the tail of the stream is a repetition that
//! ordinary writing does not produce. The turn engine then injects one reminder
//! and retries; a second loop ends the turn with a non-retryable error
//! (DESIGN.md §8).
//!
//! # What counts as a loop
//!
//! Two period matchers run side by side, both incrementally:
//!
//! - **Characters** ([`LoopKind::Chars`]), within one line: for every period
//!   `p` in `1..=max_char_period` the detector keeps the length of the current
//!   run where each character equals the one `p` before it. The last
//!   `run + p` characters then consist of one unit of `p` characters repeated
//!   `(run + p) / p` times. `aaaa…`, `the the the …` and a sentence repeated
//!   without line breaks are all caught here. Runs reset at every newline.
//! - **Lines** ([`LoopKind::Lines`]): completed lines are hashed into a ring of
//!   recent lines and the same run counting is applied with a period of `k`
//!   lines, `k` in `1..=max_line_period`: one line repeated, or a block of `k`
//!   lines repeated.
//!
//! A repetition trips when it has at least `min_repeats` copies **and** spans
//! at least `min_span` units (characters or lines), see [`RepeatThreshold`].
//! The span floor keeps short repetitions legal (`hahaha`, a row of `=`, three
//! identical lines), the repeat floor demands several copies of long units.
//!
//! Tolerances:
//!
//! - Inside Markdown code fences (a line starting with three or more backticks
//!   or tildes, closed by the same character at least as many times) the
//!   higher `*_in_fence` thresholds apply: code legitimately repeats lines and
//!   literal patterns.
//! - Whitespace is padding, not a loop: the line matcher skips blank and
//!   whitespace-only lines as if they were not there (they neither end nor
//!   extend a run of border lines), and the character
//!   matcher does not report a unit made only of whitespace. Local models
//!   pad a complete answer with hundreds of newlines or spaces before a
//!   tool call; that answer must run, not fail as a loop.
//! - Table and box border lines (only characters like `-=+|_*~:#.` and the
//!   Unicode box-drawing block, plus whitespace; e.g. `|---|:--:|`,
//!   `+-----+`, `───────`, `═══`) are skipped by the line matcher as if they
//!   were not there, and the character matcher does not report inside them
//!   while they are at most `border_line_max_chars` long. Only a run of more
//!   than `max_border_lines` consecutive border lines is reported.
//!
//! # Defaults and why
//!
//! | setting | default | reason |
//! |---|---|---|
//! | `chars` | 4 repeats, 200 chars | `p = 1` needs 200 identical characters, `the ` 50 copies, a 50-char sentence 4 copies; prose never does that |
//! | `chars_in_fence` | 8 repeats, 1000 chars | zero-filled arrays and padding in code reach a few hundred characters |
//! | `lines` | 4 repeats, 12 lines | one line 12 times, a 2-line block 6 times, a 3+-line block 4 times |
//! | `lines_in_fence` | 8 repeats, 40 lines | code has runs of identical lines (`}`, `0,`) but not 40 of them |
//! | `max_char_period` | 256 | sentences and short paragraphs; longer units usually contain newlines |
//! | `max_line_period` | 32 | blocks up to 32 lines; a longer block needs ≥ 128 lines to trip anyway |
//! | `border_line_max_chars` | 512 | wider than any real table border |
//! | `max_border_lines` | 200 | taller than any real box drawing |
//! | `check_budget` | 500 ms | seed 002: detection is best effort and fails open |
//! | `sample_max_chars` | 160 | enough to quote the loop in a reminder or a log |
//!
//! With these defaults the same 80-character sentence streamed 500 times is
//! flagged after its 4th copy when it has no line breaks (320 chars) and after
//! the 12th line when each copy is a line.
//!
//! # Cost
//!
//! Each character costs `max_char_period` branch-free compare-and-increment
//! steps over contiguous 16-bit arrays (auto-vectorised), each line
//! `max_line_period` steps; buffers are capped at `2 × period` entries, so
//! nothing is rescanned. With the defaults that is roughly 30–90 ns per byte
//! of prose on a 2-core CI machine (`cargo bench --bench safety`), i.e. tens
//! of microseconds per second of streaming.
//! The total time spent in [`LoopDetector::push`] is measured with
//! [`Instant`]; once it exceeds `check_budget` the detector stops checking and
//! answers [`LoopVerdict::Continue`] for the rest of the message (fail open).

use std::collections::VecDeque;
use std::time::Duration;
use std::time::Instant;

/// When a repetition counts as a loop: both floors must be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepeatThreshold {
    /// Minimum number of consecutive copies of the repeating unit (raised to 2).
    pub min_repeats: usize,
    /// Minimum length of the repeated region, in characters for character
    /// loops and in lines for line loops (raised to 1). Runs are counted in
    /// 16 bits, so a requirement above 65 535 acts as 65 535.
    pub min_span: usize,
}

/// Tuning for [`LoopDetector`]; see the module docs for the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopConfig {
    /// Character repetition within a line, outside code fences.
    pub chars: RepeatThreshold,
    /// Character repetition within a line, inside code fences.
    pub chars_in_fence: RepeatThreshold,
    /// Line-block repetition outside code fences.
    pub lines: RepeatThreshold,
    /// Line-block repetition inside code fences.
    pub lines_in_fence: RepeatThreshold,
    /// Longest character period checked (clamped to `1..=4096`).
    pub max_char_period: usize,
    /// Longest line-block period checked (clamped to `1..=1024`).
    pub max_line_period: usize,
    /// A border-only line longer than this is treated as ordinary text.
    pub border_line_max_chars: usize,
    /// More consecutive border lines than this are reported as a loop.
    pub max_border_lines: usize,
    /// Total time the detector may spend checking one message; fails open.
    pub check_budget: Duration,
    /// Longest [`LoopVerdict::Loop::sample`], in characters.
    pub sample_max_chars: usize,
}

impl Default for LoopConfig {
    fn default() -> Self {
        Self {
            chars: RepeatThreshold {
                min_repeats: 4,
                min_span: 200,
            },
            chars_in_fence: RepeatThreshold {
                min_repeats: 8,
                min_span: 1000,
            },
            lines: RepeatThreshold {
                min_repeats: 4,
                min_span: 12,
            },
            lines_in_fence: RepeatThreshold {
                min_repeats: 8,
                min_span: 40,
            },
            max_char_period: 256,
            max_line_period: 32,
            border_line_max_chars: 512,
            max_border_lines: 200,
            check_budget: Duration::from_millis(500),
            sample_max_chars: 160,
        }
    }
}

/// Which matcher found the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LoopKind {
    /// A unit of `period` characters repeated within one line.
    Chars,
    /// A block of `period` lines repeated (or a run of border lines).
    Lines,
}

/// The answer to each [`LoopDetector::push`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopVerdict {
    /// No loop so far (or the check budget is spent); keep streaming.
    Continue,
    /// The output is looping; stop the stream.
    Loop {
        /// Which matcher tripped.
        kind: LoopKind,
        /// Length of the repeating unit, in characters or lines.
        period: usize,
        /// Number of consecutive copies seen when it tripped.
        repeats: usize,
        /// The repeating unit (lines joined by `\n`), truncated.
        sample: String,
    },
}

/// Incremental loop detector for one streamed assistant message.
///
/// Feed every text delta to [`push`](Self::push); stop the stream on the
/// first [`LoopVerdict::Loop`]. After a loop the detector stays tripped and
/// repeats the same verdict until [`reset`](Self::reset).
#[derive(Debug)]
pub struct LoopDetector {
    config: LoopConfig,
    chars: PeriodRuns<u32>,
    lines: PeriodRuns<u64>,
    line_samples: VecDeque<String>,
    line: LineState,
    fence: Option<Fence>,
    border_lines: usize,
    spent: Duration,
    exhausted: bool,
    tripped: Option<LoopVerdict>,
}

impl LoopDetector {
    /// A detector with `config`, normalised as documented on its fields.
    pub fn new(config: LoopConfig) -> Self {
        let config = normalise(config);
        let chars = PeriodRuns::new(config.max_char_period, config.chars, config.chars_in_fence);
        let lines = PeriodRuns::new(config.max_line_period, config.lines, config.lines_in_fence);
        Self {
            line_samples: VecDeque::with_capacity(config.max_line_period + 1),
            line: LineState::new(config.sample_max_chars),
            config,
            chars,
            lines,
            fence: None,
            border_lines: 0,
            spent: Duration::ZERO,
            exhausted: false,
            tripped: None,
        }
    }

    /// Feeds the next text delta; returns whether the output is looping.
    pub fn push(&mut self, delta: &str) -> LoopVerdict {
        if let Some(verdict) = &self.tripped {
            return verdict.clone();
        }
        if self.exhausted {
            return LoopVerdict::Continue;
        }
        if self.spent >= self.config.check_budget {
            self.exhausted = true;
            return LoopVerdict::Continue;
        }
        let start = Instant::now();
        for (i, c) in delta.chars().enumerate() {
            if i % CLOCK_STRIDE == CLOCK_STRIDE - 1
                && self.spent.saturating_add(start.elapsed()) >= self.config.check_budget
            {
                self.exhausted = true;
                break;
            }
            if let Some(verdict) = self.step(c) {
                self.spent = self.spent.saturating_add(start.elapsed());
                self.tripped = Some(verdict.clone());
                return verdict;
            }
        }
        self.spent = self.spent.saturating_add(start.elapsed());
        LoopVerdict::Continue
    }

    /// Forgets everything seen so far (for a retry of the same message).
    pub fn reset(&mut self) {
        self.chars.clear();
        self.lines.clear();
        self.line_samples.clear();
        self.line.clear();
        self.fence = None;
        self.border_lines = 0;
        self.spent = Duration::ZERO;
        self.exhausted = false;
        self.tripped = None;
    }

    /// True once the check budget is spent and the detector has failed open.
    pub fn budget_exhausted(&self) -> bool {
        self.exhausted
    }

    /// Time spent checking so far.
    pub fn check_time(&self) -> Duration {
        self.spent
    }

    /// The configuration in force, after normalisation.
    pub fn config(&self) -> &LoopConfig {
        &self.config
    }

    fn step(&mut self, c: char) -> Option<LoopVerdict> {
        if c == '\n' {
            return self.end_line();
        }
        self.line.push(c);
        let hit = self.chars.push(u32::from(c), self.fence.is_some())?;
        if self.line.is_border(self.config.border_line_max_chars) {
            return None;
        }
        // spaces or tabs repeated: padding (the unit is at most
        // `max_char_period` characters, checked only once a run trips)
        let blank = |u: &u32| char::from_u32(*u).is_some_and(char::is_whitespace);
        if self.chars.tail(hit.period).iter().all(blank) {
            return None;
        }
        let sample: String = self
            .chars
            .tail(hit.period)
            .iter()
            .filter_map(|&u| char::from_u32(u))
            .take(self.config.sample_max_chars)
            .collect();
        Some(LoopVerdict::Loop {
            kind: LoopKind::Chars,
            period: hit.period,
            repeats: hit.repeats,
            sample,
        })
    }

    fn end_line(&mut self) -> Option<LoopVerdict> {
        self.chars.clear();
        let in_fence = self.fence.is_some();
        self.fence = next_fence(self.fence, &self.line.prefix);
        let verdict = if self.line.is_border(self.config.border_line_max_chars) {
            self.border_lines += 1;
            (self.border_lines > self.config.max_border_lines).then(|| LoopVerdict::Loop {
                kind: LoopKind::Lines,
                period: 1,
                repeats: self.border_lines,
                sample: self.line.prefix.clone(),
            })
        } else if self.line.blank {
            // padding: not a line of the text for the line matcher, and
            // neither ends nor extends a run of border lines (border lines
            // with blank lines between them are still a run of borders)
            None
        } else {
            self.border_lines = 0;
            self.record_line(in_fence)
        };
        self.line.clear();
        verdict
    }

    fn record_line(&mut self, in_fence: bool) -> Option<LoopVerdict> {
        let hit = self.lines.push(self.line.hash, in_fence);
        if self.line_samples.len() > self.config.max_line_period {
            self.line_samples.pop_front();
        }
        self.line_samples.push_back(self.line.prefix.clone());
        let hit = hit?;
        let first = self.line_samples.len().saturating_sub(hit.period);
        let mut sample = String::new();
        for (i, line) in self.line_samples.range(first..).enumerate() {
            if i > 0 {
                sample.push('\n');
            }
            sample.push_str(line);
        }
        let sample = sample.chars().take(self.config.sample_max_chars).collect();
        Some(LoopVerdict::Loop {
            kind: LoopKind::Lines,
            period: hit.period,
            repeats: hit.repeats,
            sample,
        })
    }
}

impl Default for LoopDetector {
    fn default() -> Self {
        Self::new(LoopConfig::default())
    }
}

/// Characters between two reads of the clock inside one delta.
const CLOCK_STRIDE: usize = 1024;

fn normalise(mut config: LoopConfig) -> LoopConfig {
    for t in [
        &mut config.chars,
        &mut config.chars_in_fence,
        &mut config.lines,
        &mut config.lines_in_fence,
    ] {
        t.min_repeats = t.min_repeats.max(2);
        t.min_span = t.min_span.max(1);
    }
    config.max_char_period = config.max_char_period.clamp(1, 4096);
    config.max_line_period = config.max_line_period.clamp(1, 1024);
    config
}

/// A repetition found by [`PeriodRuns`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Hit {
    /// Length of the repeating unit.
    pub(super) period: usize,
    /// Consecutive copies of the unit.
    pub(super) repeats: usize,
}

/// Online period matcher over a stream of items (characters, line hashes,
/// tool-call hashes).
///
/// For each period `p` it keeps `run[p]`, the number of consecutive latest
/// items equal to the item `p` before them; the last `run[p] + p` items are
/// then periodic with period `p`. Arrays are indexed by `j = max - p` so that
/// the update walks `history` and `runs` forwards together and vectorises.
#[derive(Debug, Clone)]
pub(super) struct PeriodRuns<T> {
    max: usize,
    history: Vec<T>,
    runs: Vec<u16>,
    need: Vec<u16>,
    need_alt: Vec<u16>,
}

impl<T: Copy + PartialEq> PeriodRuns<T> {
    /// A matcher for periods `1..=max`; `need` applies normally, `need_alt`
    /// when the caller says so (inside code fences).
    pub(super) fn new(max: usize, need: RepeatThreshold, need_alt: RepeatThreshold) -> Self {
        let max = max.max(1);
        Self {
            max,
            // grows with the message: a short answer never allocates the
            // whole window (2 KiB of chars, a size glibc serves only after
            // consolidating its fast bins, once per model call)
            history: Vec::new(),
            runs: vec![0; max],
            need: run_needed(max, need),
            need_alt: run_needed(max, need_alt),
        }
    }

    /// Appends `item` and returns the shortest period that reaches its
    /// threshold, if any.
    pub(super) fn push(&mut self, item: T, alt: bool) -> Option<Hit> {
        let n = self.history.len();
        let avail = n.min(self.max);
        let from = self.max - avail;
        let need = if alt { &self.need_alt } else { &self.need };
        let runs = &mut self.runs[from..];
        let prevs = &self.history[n - avail..];
        let needs = &need[from..];
        // Branch-free 16-bit lanes so that it vectorises widely; runs
        // saturate, and thresholds are capped to fit.
        let mut hit = 0u16;
        for ((run, prev), needed) in runs.iter_mut().zip(prevs).zip(needs) {
            let keep = u16::from(*prev == item).wrapping_neg();
            *run = run.saturating_add(1) & keep;
            hit |= u16::from(*run >= *needed);
        }
        if self.history.len() == 2 * self.max {
            self.history.drain(..self.max);
        }
        self.history.push(item);
        if hit == 0 {
            return None;
        }
        // The shortest period is at the highest index.
        (from..self.max).rev().find_map(|j| {
            let run = self.runs[j] as usize;
            let period = self.max - j;
            (self.runs[j] >= need[j]).then_some(Hit {
                period,
                repeats: (run + period) / period,
            })
        })
    }

    /// The last `len` items (fewer if fewer were pushed).
    pub(super) fn tail(&self, len: usize) -> &[T] {
        &self.history[self.history.len().saturating_sub(len)..]
    }

    /// Forgets all items.
    pub(super) fn clear(&mut self) {
        self.history.clear();
        self.runs.fill(0);
    }
}

/// Run length at which each period trips, indexed by `j = max - p`.
fn run_needed(max: usize, t: RepeatThreshold) -> Vec<u16> {
    let repeats = t.min_repeats.max(2);
    (0..max)
        .map(|j| {
            let p = max - j;
            let span = t.min_span.max(repeats.saturating_mul(p));
            u16::try_from(span - p).unwrap_or(u16::MAX)
        })
        .collect()
}

/// The line being streamed: its hash, a prefix for fences and samples, and
/// whether it is a border line so far.
#[derive(Debug)]
struct LineState {
    hash: u64,
    prefix: String,
    prefix_max: usize,
    prefix_chars: usize,
    chars: usize,
    has_border: bool,
    border_only: bool,
    /// Only whitespace so far (an empty line too).
    blank: bool,
}

impl LineState {
    fn new(sample_max_chars: usize) -> Self {
        let prefix_max = sample_max_chars.max(16);
        Self {
            hash: FNV_START,
            prefix: String::with_capacity(prefix_max),
            prefix_max,
            prefix_chars: 0,
            chars: 0,
            has_border: false,
            border_only: true,
            blank: true,
        }
    }

    fn push(&mut self, c: char) {
        let mut buf = [0u8; 4];
        self.hash = fnv1a(self.hash, c.encode_utf8(&mut buf).as_bytes());
        if self.prefix_chars < self.prefix_max {
            self.prefix.push(c);
            self.prefix_chars += 1;
        }
        self.chars += 1;
        if !c.is_whitespace() {
            self.blank = false;
        }
        if is_border_char(c) {
            self.has_border = true;
        } else if !c.is_whitespace() {
            self.border_only = false;
        }
    }

    fn is_border(&self, max_chars: usize) -> bool {
        self.has_border && self.border_only && self.chars <= max_chars
    }

    fn clear(&mut self) {
        self.hash = FNV_START;
        self.prefix.clear();
        self.prefix_chars = 0;
        self.chars = 0;
        self.has_border = false;
        self.border_only = true;
        self.blank = true;
    }
}

/// Characters that table and box borders are drawn with.
fn is_border_char(c: char) -> bool {
    matches!(
        c,
        '-' | '=' | '+' | '|' | '_' | '*' | '~' | ':' | '#' | '.' | '·' | '—' | '–'
    ) || ('\u{2500}'..='\u{259F}').contains(&c)
}

/// An open code fence: its character and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fence {
    marker: char,
    len: usize,
}

/// The fence state after a line whose first characters are `prefix`.
fn next_fence(open: Option<Fence>, prefix: &str) -> Option<Fence> {
    let trimmed = prefix.trim_start();
    let Some(marker) = trimmed.chars().next().filter(|&c| c == '`' || c == '~') else {
        return open;
    };
    let len = trimmed.chars().take_while(|&c| c == marker).count();
    if len < 3 {
        return open;
    }
    match open {
        None => Some(Fence { marker, len }),
        Some(fence) => {
            let closes = marker == fence.marker
                && len >= fence.len
                && trimmed[len * marker.len_utf8()..].trim().is_empty();
            if closes { None } else { Some(fence) }
        }
    }
}

/// FNV-1a of nothing: the starting value for [`fnv1a`].
pub(super) const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over `bytes`, continuing from `hash`; chunking does not matter.
pub(super) fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

#[cfg(test)]
#[path = "loop_detector_tests.rs"]
mod tests;

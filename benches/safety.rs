//! Costs of the safety layer: loop detection per streamed KiB, lock
//! acquire/release throughput, redaction decisions and secret scrubbing.
//!
//! Auto-review and the tool gate are in `safety_review.rs`, the approvals
//! page of a user with many approvals in `approvals_page.rs`.
//!
//! Run with `cargo bench --bench safety`.

use std::hint::black_box;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use botfleet_actors::safety::Classification;
use botfleet_actors::safety::LockManager;
use botfleet_actors::safety::LockMode;
use botfleet_actors::safety::LoopDetector;
use botfleet_actors::safety::LoopVerdict;
use botfleet_actors::safety::PrivacyMode;
use botfleet_actors::safety::Purpose;
use botfleet_actors::safety::Redactor;
use botfleet_actors::safety::decide;
use criterion::Criterion;
use criterion::Throughput;
use criterion::criterion_group;
use criterion::criterion_main;
use futures::FutureExt as _;

mod approvals_page;
mod safety_review;

/// Bytes of text per loop-detector iteration.
const STREAM_BYTES: usize = 16 * 1024;
/// Size of one streamed delta, about one or two tokens' worth.
const DELTA_BYTES: usize = 20;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

/// Non-repeating English-like prose in paragraphs.
fn prose(len: usize) -> String {
    let words = [
        "the",
        "model",
        "reads",
        "a",
        "file",
        "and",
        "then",
        "writes",
        "tests",
        "for",
        "parser",
        "which",
        "handles",
        "errors",
        "in",
        "every",
        "branch",
        "of",
        "workspace",
        "carefully",
        "before",
        "running",
        "cargo",
        "again",
        "so",
        "that",
        "nothing",
        "breaks",
        "later",
        "when",
        "users",
        "deploy",
        "it",
        "to",
        "production",
        "with",
        "new",
        "settings",
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut text = String::with_capacity(len + 64);
    let mut sentence = 0;
    while text.len() < len {
        let n = 6 + rng.next() % 14;
        for i in 0..n {
            if i > 0 {
                text.push(' ');
            }
            text.push_str(rng.pick(&words));
        }
        text.push_str(". ");
        sentence += 1;
        if sentence % 5 == 0 {
            text.push_str("\n\n");
        }
    }
    text
}

/// Rust-like code in a fence, every line different.
fn code(len: usize) -> String {
    let idents = ["x", "value", "count", "buf", "state", "item", "len", "node"];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut text = String::from("```rust\n");
    let mut line = 0;
    while text.len() < len {
        let a = rng.pick(&idents);
        let b = rng.pick(&idents);
        let line_text = match rng.next() % 4 {
            0 => format!("    let {a}_{line} = {b}.len() + {};\n", rng.next() % 100),
            1 => format!("    assert_eq!({a}[{line}], {});\n", rng.next() % 1000),
            2 => format!("    if {a} > {b} {{ return Err(Error::Bad({line})); }}\n"),
            _ => format!("    {a}.push({b}_{line});\n"),
        };
        text.push_str(&line_text);
        line += 1;
    }
    text.push_str("```\n");
    text
}

fn stream(text: &str) -> LoopVerdict {
    let mut detector = LoopDetector::default();
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + DELTA_BYTES).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let verdict = detector.push(&text[at..end]);
        if verdict != LoopVerdict::Continue {
            return verdict;
        }
        at = end;
    }
    LoopVerdict::Continue
}

fn loop_detector(c: &mut Criterion) {
    let mut group = c.benchmark_group("loop_detector");
    group.throughput(Throughput::Bytes(STREAM_BYTES as u64));
    for (name, text) in [("prose", prose(STREAM_BYTES)), ("code", code(STREAM_BYTES))] {
        let text = &text[..STREAM_BYTES];
        assert_eq!(stream(text), LoopVerdict::Continue, "{name} must not trip");
        group.bench_function(name, |b| b.iter(|| stream(black_box(text))));
    }
    group.finish();
}

fn locks(c: &mut Criterion) {
    let mut group = c.benchmark_group("locks");
    let manager = LockManager::new();
    let path = PathBuf::from("/workspace/src/main.rs");
    group.bench_function("uncontended_path", |b| {
        b.iter(|| {
            let guard = manager
                .lock_path(black_box(&path), LockMode::Write, "bench")
                .now_or_never();
            drop(black_box(guard));
        });
    });
    group.bench_function("uncontended_all", |b| {
        b.iter(|| drop(black_box(manager.lock_all("bench").now_or_never())));
    });

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build();
    let Ok(runtime) = runtime else {
        return;
    };
    for (name, spread) in [("contended_same_path", 1u64), ("contended_mixed", 4u64)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| runtime.block_on(contended(iters, spread)));
        });
    }
    group.finish();
}

/// Four tasks share `iters` acquisitions over `spread` paths (one in eight
/// exclusive when spread > 1), yielding while they hold the lock.
async fn contended(iters: u64, spread: u64) -> Duration {
    let manager = LockManager::new();
    let start = Instant::now();
    let tasks: Vec<_> = (0..4u64)
        .map(|task| {
            let manager = manager.clone();
            tokio::spawn(async move {
                let mut rng = Rng(0x9e37_79b9 ^ (task + 1));
                for _ in 0..iters.div_ceil(4) {
                    let pick = rng.next();
                    if spread > 1 && pick.is_multiple_of(8) {
                        let _all = manager.lock_all("bench").await;
                        tokio::task::yield_now().await;
                    } else {
                        let path = format!("/workspace/f{}", pick % spread);
                        let mode = if pick.is_multiple_of(2) {
                            LockMode::Read
                        } else {
                            LockMode::Write
                        };
                        let _guard = manager.lock_path(Path::new(&path), mode, "bench").await;
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    start.elapsed()
}

fn redaction(c: &mut Criterion) {
    let mut group = c.benchmark_group("redaction");
    let cases: Vec<(PrivacyMode, Purpose, Classification)> = PrivacyMode::ALL
        .iter()
        .flat_map(|&m| {
            Purpose::ALL
                .iter()
                .flat_map(move |&p| Classification::ALL.iter().map(move |&c| (m, p, c)))
        })
        .collect();
    group.throughput(Throughput::Elements(cases.len() as u64));
    group.bench_function("decide_all_90", |b| {
        b.iter(|| {
            for &(m, p, c) in black_box(&cases) {
                black_box(decide(m, p, c));
            }
        });
    });
    let digest = decide(
        PrivacyMode::NoStorage,
        Purpose::Logging,
        Classification::Code,
    );
    let snippet = "fn main() { println!(\"hello\"); }";
    group.throughput(Throughput::Elements(1));
    group.bench_function("apply_digest", |b| {
        b.iter(|| black_box(digest.apply(Classification::Code, black_box(snippet))));
    });

    let redactor = Redactor::new([
        "sk-live-0123456789abcdef",
        "hunter2-correct-horse",
        "ghp_abcdefABCDEF0123",
    ]);
    let mut output = prose(4096);
    output.insert_str(2048, " sk-live-0123456789abcdef ");
    group.throughput(Throughput::Bytes(output.len() as u64));
    group.bench_function("scrub_4KiB_3_secrets", |b| {
        b.iter(|| black_box(redactor.scrub(black_box(&output)).len()));
    });
    group.finish();
}

criterion_group!(
    benches,
    loop_detector,
    locks,
    redaction,
    safety_review::rules,
    safety_review::gate,
    approvals_page::page
);
criterion_main!(benches);

//! Transcript search micro-benchmarks on small inputs, quick enough for CI:
//! indexing a batch, and 1-term, 2-term, phrase, CJK and session-restricted
//! searches over a few thousand entries. The full-size figures come from the
//! `search-load` binary (benches/search_load.rs, docs/search.md).
//!
//! ```text
//! cargo bench -j2 --bench search
//! ```

use std::hint::black_box;

use botfleet_memory::BotId;
use botfleet_memory::Entry;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::IndexOptions;
use botfleet_memory::Indexer;
use botfleet_memory::SearchQuery;
use botfleet_memory::SessionId;
use botfleet_memory::TranscriptIndex;
use criterion::BatchSize;
use criterion::Criterion;
use criterion::Throughput;
use criterion::criterion_group;
use criterion::criterion_main;

const ENTRIES: usize = 3_000;
const SESSIONS: usize = 30;

const LATIN: &[&str] = &[
    "deploy",
    "staging",
    "rollback",
    "budget",
    "invoice",
    "supplier",
    "meeting",
    "release",
    "candidate",
    "database",
    "migration",
    "failed",
    "latency",
    "alert",
    "report",
    "weekly",
];
const HAN: &[&str] = &[
    "供应商",
    "数据库",
    "迁移",
    "失败",
    "部署",
    "生产环境",
    "会议",
    "报价",
    "预算",
    "上线",
    "回滚",
    "客户",
    "合同",
    "东京",
    "東京の会議",
    "ありがとう",
];

fn bot() -> BotId {
    BotId::new("bench").unwrap_or_else(|e| panic!("{e}"))
}

fn session(s: usize) -> SessionId {
    SessionId::derive(&bot(), "dm", &format!("u{s}"))
}

/// Deterministic mixed-language entries.
fn entries(n: usize) -> Vec<Entry> {
    let mut x: u64 = 42;
    let mut next = move |m: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m as u64) as usize
    };
    (0..n)
        .map(|i| {
            let mut text = String::new();
            for k in 0..12 {
                if next(3) == 0 {
                    text.push_str(HAN[next(HAN.len())]);
                } else {
                    if k > 0 {
                        text.push(' ');
                    }
                    text.push_str(LATIN[next(LATIN.len())]);
                }
            }
            Entry {
                id: EntryId::new_v7(),
                session: session(i % SESSIONS),
                seq: (i / SESSIONS) as i64 + 1,
                gid: i as i64 + 1,
                author: "alice".into(),
                turn: None,
                created_at: 1_700_000_000_000 + i as i64,
                kind: EntryKind::UserMessage { text },
            }
        })
        .collect()
}

fn build(dir: &std::path::Path, entries: &[Entry]) -> TranscriptIndex {
    let index = TranscriptIndex::open(dir).unwrap_or_else(|e| panic!("{e}"));
    let mut indexer =
        Indexer::open(&index, IndexOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let bot = bot();
    for e in entries {
        indexer.add(e, &bot).unwrap_or_else(|e| panic!("{e}"));
    }
    indexer.commit().unwrap_or_else(|e| panic!("{e}"));
    index
}

fn indexing(c: &mut Criterion) {
    let batch = entries(1_000);
    let mut group = c.benchmark_group("index");
    group.sample_size(10);
    group.throughput(Throughput::Elements(batch.len() as u64));
    group.bench_function("1000 entries + commit", |b| {
        b.iter_batched(
            || tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")),
            |dir| black_box(build(dir.path(), &batch)),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn searching(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let index = build(dir.path(), &entries(ENTRIES));
    index.warm_up();
    let mut group = c.benchmark_group("search");
    let queries = [
        ("1-term", SearchQuery::new("supplier")),
        ("2-term", SearchQuery::new("deploy rollback")),
        ("phrase", SearchQuery::new("\"release candidate\"")),
        ("cjk word", SearchQuery::new("供应商")),
        ("cjk phrase", SearchQuery::new("\"数据库迁移\"")),
        ("japanese", SearchQuery::new("東京の会議")),
        (
            "1-term, 3 sessions",
            SearchQuery::new("budget").in_sessions([session(1), session(2), session(3)]),
        ),
    ];
    for (name, query) in queries {
        group.bench_function(name, |b| {
            b.iter(|| {
                black_box(
                    index
                        .search_blocking(&query)
                        .unwrap_or_else(|e| panic!("{e}")),
                )
            })
        });
    }
    group.finish();
}

/// The check of every segment's checksum the indexer runs after each start
/// (`TranscriptIndex::check_segments`): it reads the whole index.
fn checksum_check(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let index = build(dir.path(), &entries(ENTRIES));
    let mut group = c.benchmark_group("index");
    group.sample_size(10);
    group.throughput(Throughput::Elements(ENTRIES as u64));
    group.bench_function(format!("checksum check, {ENTRIES} entries"), |b| {
        b.iter(|| black_box(index.check_segments().unwrap_or_else(|e| panic!("{e}"))))
    });
    group.finish();
}

criterion_group!(benches, indexing, searching, checksum_check);
criterion_main!(benches);

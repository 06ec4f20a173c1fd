//! Memory on the turn path, at the limits: the prompt's memory snapshot of
//! a bot reaching three scopes (agent, user, project), each holding
//! `MAX_PROFILE_FACTS` facts and `MAX_LOG_ENTRIES` log entries, and the
//! ranking of 3000 log entries against an input. Figures in
//! docs/memory.md ("Cost on the turn path").
//!
//! `cargo bench -j2 --bench memory`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Importance;
use botfleet_memory::LOG_PROMPT_CAP;
use botfleet_memory::Layer;
use botfleet_memory::MAX_LOG_ENTRIES;
use botfleet_memory::MAX_PROFILE_FACTS;
use botfleet_memory::MemoryId;
use botfleet_memory::MemoryItem;
use botfleet_memory::MemoryOp;
use botfleet_memory::MemoryScope;
use botfleet_memory::Mutation;
use botfleet_memory::NewMemory;
use botfleet_memory::RecallParams;
use botfleet_memory::Store;
use botfleet_memory::StoreOptions;
use botfleet_memory::UserId;
use botfleet_memory::bot_scopes;
use botfleet_memory::rank_log;
use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use serde_json::json;

const WORDS: [&str; 7] = [
    "supplier",
    "budget",
    "供应商",
    "会议",
    "release",
    "invoice",
    "Paris",
];
const INPUT: &str = "what did we decide about the supplier budget?";

fn log_text(i: usize) -> String {
    format!(
        "entry {i}: discussed the {} and the {} with the team, decided to follow up",
        WORDS[i % WORDS.len()],
        WORDS[(i / 7) % WORDS.len()]
    )
}

fn new(seed: &str, scope: &MemoryScope, layer: Layer, text: String) -> NewMemory {
    NewMemory {
        id: MemoryId::derive(seed),
        scope: scope.clone(),
        layer,
        text,
        importance: Importance::NORMAL,
        expires_at: None,
        source: "bench".into(),
    }
}

fn snapshot(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db"))).unwrap();
    let bot = BotRecord {
        id: BotId::new("a").unwrap(),
        name: "A".into(),
        owner: UserId::new("alice").unwrap(),
        role: String::new(),
        provider: "p".into(),
        tools: vec![],
        settings: json!({ "projects": ["apollo"] }),
        origin: "bench".into(),
        created_at: 0,
        updated_at: 0,
    };
    runtime.block_on(async {
        for scope in bot_scopes(&bot) {
            let mut batch = Vec::new();
            for i in 0..MAX_LOG_ENTRIES {
                let op =
                    MemoryOp::Add(new(&format!("{scope}{i}"), &scope, Layer::Log, log_text(i)));
                batch.push(Mutation::Memory(Box::new(op)));
            }
            for i in 0..MAX_PROFILE_FACTS {
                let text = format!("fact {i} about {}", WORDS[i % WORDS.len()]);
                let op = MemoryOp::Add(new(&format!("{scope}p{i}"), &scope, Layer::Profile, text));
                batch.push(Mutation::Memory(Box::new(op)));
            }
            store.write(batch).await.unwrap();
        }
    });
    let now = chrono::Utc::now().timestamp_millis();
    // every turn after the first: the scopes were not written since the
    // last snapshot, so the scope cache answers (only the ~30 chosen log
    // entries are read)
    c.bench_function("memory/snapshot_3_scopes_at_the_limits", |b| {
        b.iter(|| {
            let s = runtime
                .block_on(store.bot_memory_snapshot(&bot, black_box(INPUT), now))
                .unwrap();
            assert_eq!(s.log.len(), LOG_PROMPT_CAP);
            s
        });
    });
    // a turn right after each of the three scopes was written: every scope
    // is read from the store again (the write itself is not timed)
    let mut k = 0u64;
    c.bench_function("memory/snapshot_3_scopes_at_the_limits_after_writes", |b| {
        b.iter_batched(
            || {
                k += 1;
                let batch = bot_scopes(&bot)
                    .into_iter()
                    .map(|scope| {
                        Mutation::Memory(Box::new(MemoryOp::Replace {
                            id: MemoryId::derive(&format!("{scope}p0")),
                            scope,
                            text: format!("fact 0, revision {k}"),
                            importance: None,
                            source: "bench".into(),
                        }))
                    })
                    .collect();
                runtime.block_on(store.write(batch)).unwrap();
            },
            |()| {
                let s = runtime
                    .block_on(store.bot_memory_snapshot(&bot, black_box(INPUT), now))
                    .unwrap();
                assert_eq!(s.log.len(), LOG_PROMPT_CAP);
                s
            },
            criterion::BatchSize::PerIteration,
        );
    });
    runtime.block_on(store.close());
}

fn ranking(c: &mut Criterion) {
    let now = chrono::Utc::now().timestamp_millis();
    let entries: Vec<MemoryItem> = (0..3000)
        .map(|i| {
            let created = now - (i % 90) as i64 * 86_400_000;
            MemoryItem {
                id: MemoryId::derive(&format!("e{i}")),
                scope: MemoryScope::Agent(BotId::new("r").unwrap()),
                layer: Layer::Log,
                text: log_text(i),
                importance: Importance::NORMAL,
                source: "bench".into(),
                created_at: created,
                updated_at: created,
                expires_at: None,
            }
        })
        .collect();
    let params = RecallParams::default();
    c.bench_function("memory/rank_log_3000_entries", |b| {
        b.iter_batched(
            || entries.clone(),
            |es| rank_log(es, black_box(INPUT), now, &params).len(),
            criterion::BatchSize::LargeInput,
        );
    });
}

criterion_group!(benches, snapshot, ranking);
criterion_main!(benches);

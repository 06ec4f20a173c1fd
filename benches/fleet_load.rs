//! fleet-load: the host's durable throughput and latency under load.
//!
//! In one process, through the fleet's own interface (`FleetHandle::admit`,
//! the same call the HTTP API makes): N bots on the scripted model, which
//! answers every message instantly with one SendMessage. Every step of
//! every turn is committed to SQLite before the next starts.
//!
//! Phases:
//! 1. warm-up: one message per bot (activates every bot actor); RSS per
//!    active bot is measured after it;
//! 2. closed loop: one client per bot sends its share of M messages, each
//!    after the previous one was delivered; gives durable turns/s and the
//!    admission-to-delivery latency distribution;
//! 3. burst: B admissions as fast as S concurrent senders (default 64) can make them
//!    (turns run meanwhile); gives admissions/s.
//!
//! `cargo run --release --bin fleet-load -- --help` for options. Prints a
//! table and one JSON line.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

#[path = "bench_store.rs"]
mod bench_store;

use bench_store::SyncMode;
use bench_store::open_store;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use botfleet::actors::FleetHandle;
use botfleet::actors::FleetSettings;
use botfleet::actors::Runtime;
use botfleet::memory::AdmitOutcome;
use botfleet::memory::BotId;
use botfleet::memory::BotRecord;
use botfleet::memory::SessionId;
use botfleet::memory::SessionKey;
use botfleet::memory::SessionKind;
use botfleet::memory::UserId;
use botfleet::model::Model;
use botfleet::model::Script;
use botfleet::model::ScriptedModel;
use botfleet::tools::ToolRegistry;
use botfleet::tools::Workspace;
use clap::Parser;
use serde_json::json;
use std::sync::Mutex;
use tokio::sync::oneshot;

/// A turn answers with one SendMessage; the fact extraction after it (on
/// unless `--no-extract`) finds nothing to change, as most turns do. The
/// extract rule matters: a script without one is never asked to extract,
/// so without it `extract_memory` would measure nothing.
const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]

[[rule]]
purpose = "extract"
steps = [ { text = '{"add": [], "replace": [], "remove": []}' } ]
"#;

/// Entries one scripted turn writes after the user message: assistant,
/// tool result, delivery, assistant, turn end. The delivery is the third.
const DELIVERY_OFFSET: i64 = 3;
const ENTRIES_PER_TURN: i64 = 6;

#[derive(Debug, Parser)]
#[command(about = "Durable turn throughput and admission latency of a botfleet host")]
struct Args {
    /// Bots.
    #[arg(long, default_value_t = 1000)]
    bots: usize,
    /// Messages in the closed-loop phase (spread evenly over the bots).
    #[arg(long, default_value_t = 100_000)]
    messages: usize,
    /// Concurrent senders in the burst phase (each waits for its admission
    /// to commit before sending the next).
    #[arg(long, default_value_t = 64)]
    senders: usize,
    /// Admissions in the burst phase (0 to skip).
    #[arg(long, default_value_t = 100_000)]
    burst: usize,
    /// SQLite synchronous mode: normal or full.
    #[arg(long, value_enum, default_value_t = SyncMode::Normal)]
    sync: SyncMode,
    /// Worker threads of the runtime (default: number of cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Turn off the after-turn fact extraction (`runtime.extract_memory`),
    /// which is on by default and costs a background model call and reads
    /// per turn.
    #[arg(long)]
    no_extract: bool,
    /// Data directory (default: a temporary one).
    #[arg(long)]
    data: Option<std::path::PathBuf>,
}

/// Waiters for a session reaching a seq, fed by the store's change signals.
#[derive(Default)]
struct Watch {
    seen: HashMap<SessionId, i64>,
    /// session → (delivery seq, turn-end seq, when the delivery was seen, wake-up)
    waiters: HashMap<SessionId, Waiter>,
}

struct Waiter {
    delivery: i64,
    end: i64,
    delivered_at: Option<Instant>,
    tx: oneshot::Sender<Instant>,
}

/// Live heap bytes, counted by a wrapper around the host's allocator
/// (mimalloc, as in src/main.rs), so
/// that the memory of idle bot actors can be measured apart from SQLite's
/// page caches and the allocator's retained pages.
struct Counting;

static LIVE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

// SAFETY: forwards every call to mimalloc unchanged and only
// keeps a running count of the bytes it handed out.
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: same contract as the caller's
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        LIVE.fetch_sub(layout.size() as i64, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: same contract as the caller's
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as i64 - layout.size() as i64,
            std::sync::atomic::Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live_bytes() -> i64 {
    LIVE.load(std::sync::atomic::Ordering::Relaxed)
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let args = Args::parse();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(t) = args.threads {
        rt.worker_threads(t);
    }
    rt.enable_all().build().unwrap().block_on(run(args));
}

async fn run(args: Args) {
    let tmp = std::env::temp_dir().join(format!("botfleet-fleet-load-{}", uuid::Uuid::now_v7()));
    let dir = args.data.clone().unwrap_or_else(|| tmp.clone());
    let store = open_store(&dir, args.sync);
    let model: Arc<dyn Model> =
        Arc::new(ScriptedModel::new(Script::parse(SCRIPT, "bench").unwrap()));
    let mut settings = FleetSettings::new(dir.join("workspace"));
    settings.debounce = Duration::ZERO;
    settings.idle_timeout = Duration::from_secs(3600);
    settings.extract_memory = !args.no_extract;
    let owner = UserId::new("bench").unwrap();
    let bots: Vec<BotRecord> = (0..args.bots)
        .map(|i| BotRecord {
            id: BotId::new(format!("bot{i}")).unwrap(),
            name: format!("Bot {i}"),
            owner: owner.clone(),
            role: "Answers ok.".into(),
            provider: "scripted".into(),
            tools: vec!["SendMessage".into()],
            settings: json!({}),
            origin: "bench".into(),
            created_at: 0,
            updated_at: 0,
        })
        .collect();
    let workspace = Workspace::open(&settings.workspace).unwrap();
    let runtime = Runtime::new(
        store.clone(),
        HashMap::from([("scripted".to_string(), model)]),
        ToolRegistry::builtin(),
        settings,
        workspace,
    );
    // extra bots that never get a message: woken once, they sit idle in memory
    let idle: Vec<BotRecord> = (0..args.bots)
        .map(|i| BotRecord {
            id: BotId::new(format!("idle{i}")).unwrap(),
            name: format!("Idle {i}"),
            ..bots[0].clone()
        })
        .collect();
    let all: Vec<BotRecord> = bots.iter().chain(idle.iter()).cloned().collect();
    let rss_start = rss_bytes();
    let fleet = FleetHandle::start(runtime, all).await.unwrap();
    // heap per active idle bot: wake the idle bots and count live bytes
    tokio::time::sleep(Duration::from_millis(300)).await;
    let live_before = live_bytes();
    for b in &idle {
        fleet.wake(b.id.clone()).unwrap();
    }
    while fleet.active().await.unwrap().len() < idle.len() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let heap_per_idle_bot = (live_bytes() - live_before) as f64 / idle.len() as f64;

    // one dispatcher turns change signals into wake-ups of waiting clients
    let watch = Arc::new(Mutex::new(Watch::default()));
    let mut changes = store.subscribe();
    let w = watch.clone();
    tokio::spawn(async move {
        loop {
            match changes.recv().await {
                Ok(c) => {
                    let now = Instant::now();
                    let mut w = w.lock().unwrap();
                    let seen = w.seen.entry(c.session).or_insert(0);
                    *seen = (*seen).max(c.seq);
                    let seen = *seen;
                    let fire = match w.waiters.get_mut(&c.session) {
                        Some(waiter) => {
                            if seen >= waiter.delivery && waiter.delivered_at.is_none() {
                                waiter.delivered_at = Some(now);
                            }
                            seen >= waiter.end
                        }
                        None => false,
                    };
                    if fire && let Some(waiter) = w.waiters.remove(&c.session) {
                        let _ = waiter.tx.send(waiter.delivered_at.unwrap_or(now));
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    panic!("change signals lagged by {n}")
                }
                Err(_) => return,
            }
        }
    });
    let user = UserId::new("bench").unwrap();

    // 1. warm-up: activate every bot
    let t = Instant::now();
    let mut handles = Vec::new();
    for b in &bots {
        let (fleet, watch, b, user) = (fleet.clone(), watch.clone(), b.clone(), user.clone());
        handles.push(tokio::spawn(async move {
            send_and_wait(&fleet, &watch, &user, &b, 0).await
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let warm = t.elapsed();
    let rss_active = rss_bytes();
    let rss_per_bot = rss_active.saturating_sub(rss_start) as f64 / args.bots as f64;

    // 2. closed loop
    let per_bot = args.messages / args.bots;
    let t = Instant::now();
    let mut handles = Vec::new();
    for b in &bots {
        let (fleet, watch, b, user) = (fleet.clone(), watch.clone(), b.clone(), user.clone());
        handles.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per_bot);
            for i in 1..=per_bot {
                lat.push(send_and_wait(&fleet, &watch, &user, &b, i).await);
            }
            lat
        }));
    }
    let mut latencies = Vec::with_capacity(args.messages);
    for h in handles {
        latencies.extend(h.await.unwrap());
    }
    let closed = t.elapsed();
    let turns = (per_bot * args.bots) as f64;
    latencies.sort_unstable();

    // check the work: every closed-loop message delivered exactly once
    let mut delivered = 0i64;
    let sampled = bots.len().min(20);
    for b in bots.iter().take(sampled) {
        let session = SessionKey {
            bot: b.id.clone(),
            kind: SessionKind::Dm,
            peer: user.to_string(),
        }
        .id();
        let entries = store.entries_after(session, 0, 1_000_000).await.unwrap();
        delivered += entries
            .iter()
            .filter(|e| e.kind.name() == "delivery")
            .count() as i64;
    }

    // 3. burst admissions
    let mut admit_rate = 0.0;
    let mut burst_elapsed = Duration::ZERO;
    if args.burst > 0 {
        let senders = args.senders.clamp(1, args.burst);
        let t = Instant::now();
        let mut handles = Vec::new();
        for s in 0..senders {
            let (fleet, bots, user) = (fleet.clone(), bots.clone(), user.clone());
            let n = args.burst / senders;
            handles.push(tokio::spawn(async move {
                for i in 0..n {
                    let b = &bots[(s * n + i) % bots.len()];
                    let req = botfleet::actors::user_message(&user, b, "burst", None);
                    match fleet.admit(req).await.unwrap() {
                        AdmitOutcome::Accepted(_) => {}
                        other => panic!("{other:?}"),
                    }
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        burst_elapsed = t.elapsed();
        admit_rate = (args.burst / senders * senders) as f64 / burst_elapsed.as_secs_f64();
    }

    let rss_peak = rss_bytes();
    fleet.shutdown().await;

    {
        use std::sync::atomic::Ordering::Relaxed;
        let st = store.stats();
        let (c, b, m, us, w) = (
            st.commits.load(Relaxed),
            st.batches.load(Relaxed),
            st.mutations.load(Relaxed),
            st.busy_us.load(Relaxed),
            st.wal_catch_ups.load(Relaxed),
        );
        let wus = st.wal_catch_up_us.load(Relaxed);
        // frames of 4 KiB pages plus their 24-byte headers
        let wal_mib = st.wal_frames_peak.load(Relaxed) as f64 * 4120.0 / (1024.0 * 1024.0);
        println!(
            "  store: {c} commits, {b} batches ({:.1}/commit), {m} mutations, writer busy {:.2} s ({:.1} µs/batch), {w} WAL catch-ups ({:.1} ms each), largest WAL {:.0} MiB",
            b as f64 / c.max(1) as f64,
            us as f64 / 1e6,
            us as f64 / b.max(1) as f64,
            wus as f64 / 1e3 / w.max(1) as f64,
            wal_mib
        );
    }
    let p50 = percentile(&latencies, 0.50);
    let p99 = percentile(&latencies, 0.99);
    let turns_per_s = turns / closed.as_secs_f64();
    println!(
        "fleet-load: {} bots, {} messages (closed loop), {} burst admissions, synchronous={}, extract_memory={}",
        args.bots,
        per_bot * args.bots,
        args.burst,
        args.sync,
        !args.no_extract
    );
    println!(
        "  warm-up (activate {} bots, one turn each)   {:>10.2?}",
        args.bots, warm
    );
    println!(
        "  durable turns/s (closed loop)               {:>10.0}",
        turns_per_s
    );
    println!(
        "  admission→delivery p50 / p99                {:>10.2?} / {:.2?}",
        p50, p99
    );
    println!(
        "  admissions/s (burst, turns running)         {:>10.0}   ({:.2?})",
        admit_rate, burst_elapsed
    );
    println!(
        "  heap per active idle bot actor              {:>10.0} B",
        heap_per_idle_bot
    );
    println!(
        "  RSS per active bot                          {:>10.0} B",
        rss_per_bot
    );
    println!(
        "  RSS start / after warm-up / end             {} / {} / {} MiB",
        rss_start >> 20,
        rss_active >> 20,
        rss_peak >> 20
    );
    println!(
        "  check: deliveries in {sampled:>2} sampled sessions    {:>10} (expected {})",
        delivered,
        sampled * (per_bot + 1)
    );
    println!(
        "{}",
        json!({
            "bench": "fleet-load",
            "bots": args.bots,
            "messages": per_bot * args.bots,
            "burst": args.burst,
            "senders": args.senders,
            "synchronous": args.sync,
            "extract_memory": !args.no_extract,
            "turns_per_s": turns_per_s.round(),
            "latency_p50_us": p50.as_micros(),
            "latency_p99_us": p99.as_micros(),
            "admissions_per_s": admit_rate.round(),
            "rss_per_active_bot_bytes": rss_per_bot.round(),
            "heap_per_idle_bot_bytes": heap_per_idle_bot.round(),
            "rss_peak_mib": rss_peak >> 20,
            "warmup_ms": warm.as_millis(),
        })
    );
    let _ = std::fs::remove_dir_all(&tmp);
    assert_eq!(
        delivered,
        (sampled * (per_bot + 1)) as i64,
        "every message delivered exactly once"
    );
}

/// Sends message `i` of a bot and waits for the end of its turn; returns
/// the admission-to-delivery latency.
async fn send_and_wait(
    fleet: &FleetHandle,
    watch: &Mutex<Watch>,
    user: &UserId,
    bot: &BotRecord,
    i: usize,
) -> Duration {
    let session = SessionKey {
        bot: bot.id.clone(),
        kind: SessionKind::Dm,
        peer: user.to_string(),
    }
    .id();
    // seqs are predictable: each turn of the scripted model writes a fixed set of entries
    let first = i as i64 * ENTRIES_PER_TURN + 1;
    let (tx, rx) = oneshot::channel();
    let t0 = Instant::now();
    let req = botfleet::actors::user_message(user, bot, "hello", None);
    match fleet.admit(req).await.unwrap() {
        AdmitOutcome::Accepted(rec) => assert_eq!(rec.seq, first, "unexpected entry layout"),
        other => panic!("{other:?}"),
    }
    {
        let mut w = watch.lock().unwrap();
        let end = first + ENTRIES_PER_TURN - 1;
        if w.seen.get(&session).copied().unwrap_or(0) >= end {
            return t0.elapsed();
        }
        w.waiters.insert(
            session,
            Waiter {
                delivery: first + DELIVERY_OFFSET,
                end,
                delivered_at: None,
                tx,
            },
        );
    }
    let at = rx.await.unwrap();
    at.duration_since(t0)
}

//! agent-load: SendToAgent throughput across many bots.
//!
//! In one process, through the fleet's own interface (`FleetHandle::admit`,
//! the same call the HTTP API makes): N bots (default 10,000) on the
//! scripted model, each with its own one-rule script (a provider per bot,
//! so picking the rule costs nothing), arranged in rings of K bots per
//! owner (default: one owner, one ring of N). A bot answers every message
//! instantly with one SendToAgent to the next bot of its ring, so one user
//! message starts a chain that runs from bot to bot until the hop budget
//! (`max_hops`, default 8) stops it: the bot that receives the last hop has
//! its SendToAgent refused ("hop budget spent") and ends its turn.
//!
//! Every message is durable before the next bot sees it: the sender's tool
//! call, the ledger row, the recipient's `agent_message` entry and its
//! inbox row commit in one batch, then the recipient runs its own turn
//! (every step committed) and sends on.
//!
//! Phases:
//! 1. warm-up: every bot woken (actors active, nothing timed);
//! 2. rounds (default 10): each ring is cut into disjoint runs of
//!    hops + 1 bots, one chain each, so no bot gets two inputs at once (a
//!    bot's queued inputs of one session fold into one turn, which would
//!    merge chains); every round's seed user messages are admitted by 64
//!    senders, then the round ends when the fleet is quiet (no running
//!    turn, no unclaimed inbox row); the next round shifts the chains by
//!    one bot. Wall time from the first admission to the last quiet,
//!    seeding and barriers included. Reported: inter-bot messages/s
//!    (persisted `agent_message` entries / wall), turns/s (all turns, seed
//!    turns included), CPU, commits and writer time per message.
//!
//! Checks: `agent_message` entries = chains × hops, refused hops = chains,
//! every turn ended.
//!
//! `cargo run --release --bin agent-load -- --help` for options. Prints a
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
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use std::time::Instant;

use botfleet::actors::FleetHandle;
use botfleet::actors::FleetSettings;
use botfleet::actors::Runtime;
use botfleet::memory::AdmitOutcome;
use botfleet::memory::BotId;
use botfleet::memory::BotRecord;
use botfleet::memory::Store;
use botfleet::memory::UserId;
use botfleet::model::Model;
use botfleet::model::Script;
use botfleet::model::ScriptedModel;
use botfleet::tools::ToolRegistry;
use botfleet::tools::Workspace;
use clap::Parser;
use serde_json::json;

/// The host binary's allocator (src/main.rs), so the figures match it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(about = "SendToAgent throughput: durable inter-bot messages/s across many bots")]
struct Args {
    /// Bots.
    #[arg(long, default_value_t = 10_000)]
    bots: usize,
    /// Bots per owner (one ring each; a bot can only message its owner's
    /// bots). Default: all bots have one owner.
    #[arg(long)]
    ring: Option<usize>,
    /// Hop budget per chain (`max_hops`): inter-bot messages per seed.
    #[arg(long, default_value_t = 8)]
    hops: u32,
    /// Rounds: each starts one chain per hops + 1 bots, and ends when the
    /// fleet is quiet.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Data directory, kept after the run (default: a temporary one, removed).
    #[arg(long)]
    data: Option<std::path::PathBuf>,
    /// SQLite synchronous mode: normal or full.
    #[arg(long, value_enum, default_value_t = SyncMode::Normal)]
    sync: SyncMode,
    /// Worker threads of the runtime (default: number of cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Give up waiting for the fleet to go quiet after this many seconds.
    #[arg(long, default_value_t = 3600)]
    timeout_secs: u64,
}

fn main() {
    let args = Args::parse();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(t) = args.threads {
        rt.worker_threads(t);
    }
    rt.enable_all().build().unwrap().block_on(run(args));
}

fn bot_id(i: usize) -> BotId {
    BotId::new(format!("b{i}")).unwrap()
}

/// The next bot of `i`'s ring.
fn next_of(i: usize, ring: usize) -> usize {
    let base = i / ring * ring;
    base + (i - base + 1) % ring
}

/// A one-bot script: a seed (the user's "start" message) sends to the next
/// bot and answers the user; any other input (a bot's message) sends on.
fn script_for(next: &BotId) -> String {
    format!(
        r#"
[[rule]]
match = "start the chain"
steps = [ {{ calls = [
  {{ tool = "SendToAgent", args = {{ agent = "{next}", text = "pass it on" }} }},
  {{ tool = "SendMessage", args = {{ text = "started" }} }},
] }} ]

[[rule]]
steps = [ {{ tool = "SendToAgent", args = {{ agent = "{next}", text = "pass it on" }} }} ]
"#
    )
}

/// Running turns and unclaimed inbox rows, read in one statement.
fn pending(store: &Store) -> (i64, i64) {
    store
        .read_blocking(|c| {
            Ok(c.query_row(
                "SELECT (SELECT count(*) FROM turns WHERE status = 'running'),
                        (SELECT count(*) FROM inbox WHERE turn_id IS NULL)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        })
        .unwrap()
}

fn count(store: &Store, sql: &str) -> i64 {
    store
        .read_blocking(|c| Ok(c.query_row(sql, [], |r| r.get(0))?))
        .unwrap()
}

/// CPU time of this process (user + system), s, from /proc/self/stat.
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0
}

async fn run(args: Args) {
    let ring = args.ring.unwrap_or(args.bots).clamp(2, args.bots.max(2));
    assert!(
        args.bots.is_multiple_of(ring),
        "--bots must be a multiple of --ring"
    );
    let span = args.hops as usize + 1;
    assert!(ring >= span, "--ring must be at least --hops + 1");
    // chains of one round: disjoint runs of `span` bots inside each ring, so
    // no bot gets two inputs at once (a bot's queued inputs of one session
    // fold into one turn, which would merge chains)
    let per_ring = ring / span;
    let chains = args.bots / ring * per_ring;
    let seeds = chains * args.rounds;
    let tmp = std::env::temp_dir().join(format!("botfleet-agent-load-{}", uuid::Uuid::now_v7()));
    let dir = args.data.clone().unwrap_or_else(|| tmp.clone());
    let store = open_store(&dir, args.sync);
    let mut settings = FleetSettings::new(dir.join("workspace"));
    settings.debounce = Duration::ZERO;
    settings.idle_timeout = Duration::from_secs(3600);
    settings.max_hops = args.hops;
    // no after-turn fact extraction on the seed turns: only the chains count
    settings.extract_memory = false;
    let mut models: HashMap<String, Arc<dyn Model>> = HashMap::new();
    let mut bots = Vec::with_capacity(args.bots);
    for i in 0..args.bots {
        let provider = format!("p{i}");
        let script = script_for(&bot_id(next_of(i, ring)));
        models.insert(
            provider.clone(),
            Arc::new(ScriptedModel::new(Script::parse(&script, "bench").unwrap())),
        );
        bots.push(BotRecord {
            id: bot_id(i),
            name: format!("Bot {i}"),
            owner: UserId::new(format!("owner{}", i / ring)).unwrap(),
            role: "Passes every message on to the next bot.".into(),
            provider,
            tools: vec!["SendToAgent".into(), "SendMessage".into()],
            settings: json!({}),
            origin: "bench".into(),
            created_at: 0,
            updated_at: 0,
        });
    }
    let workspace = Workspace::open(&settings.workspace).unwrap();
    let runtime = Runtime::new(
        store.clone(),
        models,
        ToolRegistry::builtin(),
        settings,
        workspace,
    );
    let fleet = FleetHandle::start(runtime, bots.clone()).await.unwrap();

    // 1. warm-up: every bot actor active
    let t = Instant::now();
    for b in &bots {
        fleet.wake(b.id.clone()).unwrap();
    }
    while fleet.active().await.unwrap().len() < bots.len() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let warm = t.elapsed();

    // 2. chains
    let st = store.stats();
    let before = (
        st.commits.load(Relaxed),
        st.batches.load(Relaxed),
        st.mutations.load(Relaxed),
        st.busy_us.load(Relaxed),
        cpu_secs(),
    );
    let t = Instant::now();
    let mut seeding = Duration::ZERO;
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    for round in 0..args.rounds {
        // first bots of this round's chains (shifted each round)
        let starts: Vec<usize> = (0..args.bots / ring)
            .flat_map(|r| (0..per_ring).map(move |c| r * ring + (c * span + round) % ring))
            .collect();
        let ts = Instant::now();
        let senders = 64usize.min(starts.len().max(1));
        let starts = Arc::new(starts);
        let mut handles = Vec::new();
        for s in 0..senders {
            let (fleet, bots, starts) = (fleet.clone(), bots.clone(), starts.clone());
            handles.push(tokio::spawn(async move {
                for &i in starts.iter().skip(s).step_by(senders) {
                    let b = &bots[i];
                    let req = botfleet::actors::user_message(
                        &b.owner,
                        b,
                        "start the chain",
                        Some(&format!("seed-{round}-{i}")),
                    );
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
        seeding += ts.elapsed();
        loop {
            let s = store.clone();
            let (running, unclaimed) = tokio::task::spawn_blocking(move || pending(&s))
                .await
                .unwrap();
            if running == 0 && unclaimed == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "not quiet after {}s: {running} running turns, {unclaimed} unclaimed inputs",
                args.timeout_secs
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let wall = t.elapsed();
    let st = store.stats();
    let (commits, batches, mutations, busy_us, cpu) = (
        (st.commits.load(Relaxed) - before.0) as f64,
        (st.batches.load(Relaxed) - before.1) as f64,
        (st.mutations.load(Relaxed) - before.2) as f64,
        (st.busy_us.load(Relaxed) - before.3) as f64,
        cpu_secs() - before.4,
    );
    fleet.shutdown().await;

    // check the work
    let messages = count(
        &store,
        "SELECT count(*) FROM entries WHERE kind = 'agent_message'",
    );
    let turns = count(&store, "SELECT count(*) FROM turns");
    let open = count(
        &store,
        "SELECT count(*) FROM turns WHERE status = 'running'",
    );
    let refused = count(
        &store,
        "SELECT count(*) FROM entries WHERE kind = 'tool_result' AND body LIKE '%hop budget%'",
    );
    let statuses: Vec<(String, i64)> = store
        .read_blocking(|c| {
            let mut st = c.prepare("SELECT status, count(*) FROM turns GROUP BY status")?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .unwrap();
    let expected = seeds as i64 * i64::from(args.hops);

    let secs = wall.as_secs_f64();
    let msgs_per_s = messages as f64 / secs;
    let turns_per_s = turns as f64 / secs;
    println!(
        "agent-load: {} bots, rings of {ring} (one owner each), {} rounds × {chains} chains × {} hops, synchronous={}",
        args.bots, args.rounds, args.hops, args.sync
    );
    println!(
        "  warm-up (activate {} bots)                   {warm:>10.2?}",
        args.bots
    );
    println!("  seeding ({seeds} admissions, in the wall)     {seeding:>10.2?}");
    println!("  wall, first seed → fleet quiet               {wall:>10.2?}");
    println!("  inter-bot messages persisted                 {messages:>10} (expected {expected})");
    println!("  durable inter-bot messages/s                 {msgs_per_s:>10.0}");
    println!("  turns (seeds included) / turns/s             {turns:>10} / {turns_per_s:.0}");
    println!(
        "  µs per message: wall {:.1}, CPU {:.1} (2 cores)",
        secs * 1e6 / messages.max(1) as f64,
        cpu * 1e6 / messages.max(1) as f64
    );
    println!(
        "  store per message: {:.2} commits, {:.2} batches, {:.1} mutations, writer busy {:.1} µs ({:.0}% of wall)",
        commits / messages.max(1) as f64,
        batches / messages.max(1) as f64,
        mutations / messages.max(1) as f64,
        busy_us / messages.max(1) as f64,
        busy_us / 1e6 / secs * 100.0
    );
    println!("  turn statuses: {statuses:?}; hops refused: {refused} (expected {seeds})");
    println!(
        "{}",
        json!({
            "bench": "agent-load",
            "bots": args.bots,
            "ring": ring,
            "owners": args.bots / ring,
            "seeds": seeds,
            "hops": args.hops,
            "synchronous": args.sync,
            "messages": messages,
            "turns": turns,
            "wall_s": (secs * 1000.0).round() / 1000.0,
            "messages_per_s": msgs_per_s.round(),
            "turns_per_s": turns_per_s.round(),
            "cpu_us_per_message": (cpu * 1e6 / messages.max(1) as f64).round(),
            "commits_per_message": (commits / messages.max(1) as f64 * 100.0).round() / 100.0,
            "writer_busy_us_per_message": (busy_us / messages.max(1) as f64 * 10.0).round() / 10.0,
            "warmup_ms": warm.as_millis(),
            "seeding_ms": seeding.as_millis(),
            "rounds": args.rounds,
            "chains_per_round": chains,
        })
    );
    if args.data.is_none() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    assert_eq!(messages, expected, "every hop persisted exactly once");
    assert_eq!(open, 0, "every turn ended");
    assert_eq!(
        refused, seeds as i64,
        "every chain stopped at the hop budget"
    );
}

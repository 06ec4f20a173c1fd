//! group-load: what a group room's coordination costs per published reply.
//!
//! In one process, through the same calls the HTTP API makes
//! (`group::create_room`, `group::post_message`): rooms of M member bots
//! (default 6) on the scripted model, which answers instantly with one
//! SendMessage, so each user message yields a run of 10 public replies
//! (the reply cap) over two rounds. Every step is persisted: the user
//! message with its run row, each member's input (ledger + entry + inbox),
//! each member's turn steps, each published reply with the run checkpoint,
//! and the run's end.
//!
//! Phases:
//! 0. baseline: plain direct-message turns of the same model and bots, one
//!    at a time (what a member turn costs without any room);
//! 1. one room, runs back to back: µs per published reply, sequential;
//! 2. many rooms at once, each running its runs back to back: µs per
//!    published reply of the whole host (wall / replies);
//! 3. with `--autogen DIR`: AutoGen's RoundRobinGroupChat benchmark
//!    (`DIR/.venv/bin/python group_chat.py`, 6 AssistantAgents with an
//!    instant replay client, MaxMessageTermination(10)), in the same run,
//!    for the ratio.
//!
//! "Coordinator overhead per member turn" = µs per reply (phase 1) − µs per
//! plain turn (phase 0): what the room adds around a member's turn.
//!
//! `cargo run --release --bin group-load -- --help` for options. Prints a
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
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use std::time::Instant;

use botfleet::actors::FleetHandle;
use botfleet::actors::FleetSettings;
use botfleet::actors::Runtime;
use botfleet::actors::group;
use botfleet::actors::group::NewRoom;
use botfleet::memory::AdmitOutcome;
use botfleet::memory::BotId;
use botfleet::memory::BotRecord;
use botfleet::memory::SessionId;
use botfleet::memory::Store;
use botfleet::memory::UserId;
use botfleet::model::Model;
use botfleet::model::Script;
use botfleet::model::ScriptedModel;
use botfleet::tools::ToolRegistry;
use botfleet::tools::Workspace;
use clap::Parser;
use serde_json::Value;
use serde_json::json;
use tokio::sync::oneshot;

/// The host binary's allocator (src/main.rs), so the figures match it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A turn answers with one SendMessage. Plain turns (the baseline phase)
/// are followed by a fact extraction that finds nothing to change: the
/// host asks only a script with an extract rule, so without it the
/// baseline would skip the work a real bot's turn has.
const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]

[[rule]]
purpose = "extract"
steps = [ { text = '{"add": [], "replace": [], "remove": []}' } ]
"#;

#[derive(Debug, Parser)]
#[command(about = "Group room coordination overhead per published reply, vs AutoGen")]
struct Args {
    /// Members per room (2-6).
    #[arg(long, default_value_t = 6)]
    members: usize,
    /// Runs (user messages) in the single-room phase.
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// Rooms in the concurrent phase.
    #[arg(long, default_value_t = 50)]
    rooms: usize,
    /// Runs per room in the concurrent phase.
    #[arg(long, default_value_t = 20)]
    runs_per_room: usize,
    /// Plain turns in the baseline phase.
    #[arg(long, default_value_t = 1000)]
    turns: usize,
    /// SQLite synchronous mode: normal or full.
    #[arg(long, value_enum, default_value_t = SyncMode::Normal)]
    sync: SyncMode,
    /// Worker threads of the runtime (default: number of cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Skip the baseline phases 0 and 0b (for profiling a room phase).
    #[arg(long)]
    no_baseline: bool,
    /// AutoGen peer folder (with .venv and group_chat.py) to run in the same run.
    #[arg(long)]
    autogen: Option<PathBuf>,
    /// Runs of the AutoGen benchmark.
    #[arg(long, default_value_t = 200)]
    autogen_runs: usize,
}

/// Waiters for a session reaching a seq, fed by the store's change signals.
#[derive(Default)]
struct Watch {
    seen: HashMap<SessionId, i64>,
    waiters: HashMap<SessionId, (i64, oneshot::Sender<()>)>,
}

impl Watch {
    fn wait(this: &Arc<Mutex<Watch>>, session: SessionId, target: i64) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut w = this.lock().unwrap();
        if w.seen.get(&session).copied().unwrap_or(0) >= target {
            let _ = tx.send(());
        } else {
            w.waiters.insert(session, (target, tx));
        }
        rx
    }
}

struct Bench {
    rt: Arc<Runtime>,
    fleet: FleetHandle,
    store: Store,
    watch: Arc<Mutex<Watch>>,
    user: UserId,
}

fn main() {
    let args = Args::parse();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(t) = args.threads {
        rt.worker_threads(t);
    }
    rt.enable_all().build().unwrap().block_on(run(args));
}

fn member_id(room: usize, m: usize) -> BotId {
    BotId::new(format!("r{room}m{m}")).unwrap()
}

async fn run(args: Args) {
    assert!((2..=6).contains(&args.members), "--members must be 2-6");
    let dir = std::env::temp_dir().join(format!("botfleet-group-load-{}", uuid::Uuid::now_v7()));
    let store = open_store(&dir, args.sync);
    let model: Arc<dyn Model> =
        Arc::new(ScriptedModel::new(Script::parse(SCRIPT, "bench").unwrap()));
    let mut settings = FleetSettings::new(dir.join("workspace"));
    settings.debounce = Duration::ZERO;
    settings.idle_timeout = Duration::from_secs(3600);
    let user = UserId::new("bench").unwrap();
    // room 0 is the single-room phase; rooms 1..=R the concurrent phase
    let mut bots = Vec::new();
    for room in 0..=args.rooms {
        for m in 0..args.members {
            bots.push(BotRecord {
                id: member_id(room, m),
                name: format!("Member {m} of room {room}"),
                owner: user.clone(),
                role: "Says ok.".into(),
                provider: "scripted".into(),
                tools: vec!["SendMessage".into()],
                settings: json!({}),
                origin: "bench".into(),
                created_at: 0,
                updated_at: 0,
            });
        }
    }
    let workspace = Workspace::open(&settings.workspace).unwrap();
    let runtime = Runtime::new(
        store.clone(),
        HashMap::from([("scripted".to_string(), model)]),
        ToolRegistry::builtin(),
        settings,
        workspace,
    );
    let fleet = FleetHandle::start(runtime, bots).await.unwrap();
    let watch = Arc::new(Mutex::new(Watch::default()));
    let mut changes = store.subscribe();
    let w = watch.clone();
    tokio::spawn(async move {
        loop {
            match changes.recv().await {
                Ok(c) => {
                    let mut w = w.lock().unwrap();
                    let seen = w.seen.entry(c.session).or_insert(0);
                    *seen = (*seen).max(c.seq);
                    let seen = *seen;
                    if w.waiters.get(&c.session).is_some_and(|(t, _)| seen >= *t)
                        && let Some((_, tx)) = w.waiters.remove(&c.session)
                    {
                        let _ = tx.send(());
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    panic!("change signals lagged by {n}")
                }
                Err(_) => return,
            }
        }
    });
    let bench = Arc::new(Bench {
        rt: fleet.runtime().clone(),
        fleet: fleet.clone(),
        store: store.clone(),
        watch,
        user: user.clone(),
    });
    for room in 0..=args.rooms {
        group::create_room(
            &bench.rt,
            &user,
            NewRoom {
                id: None,
                name: format!("room{room}"),
                members: (0..args.members)
                    .map(|m| member_id(room, m).to_string())
                    .collect(),
            },
        )
        .await
        .unwrap();
    }

    // calibration: how many timeline entries a run writes, and how many
    // entries a plain turn writes, measured once (not timed)
    let run_span = calibrate_run(&bench, "room0").await;
    let replies_per_run = run_span - 2; // the replies, then a notice and the turn end
    let turn_span = calibrate_turn(&bench, &member_id(0, 0)).await;

    // 0. baseline: plain turns, one at a time, on one bot
    let mut records = Vec::new();
    for m in 0..args.members {
        records.push(store.get_bot(&member_id(0, m)).await.unwrap().unwrap());
    }
    let stats0 = snapshot(&store);
    let t = Instant::now();
    let turns = if args.no_baseline { 1 } else { args.turns };
    for i in 0..turns {
        plain_turn(&bench, &records[i % args.members], turn_span, i).await;
    }
    let base = t.elapsed();
    let base_us = base.as_secs_f64() * 1e6 / turns as f64;
    let base_stats = delta(&store, stats0, turns as f64);

    // 0b. the same concurrency without rooms: one chain of plain turns per
    // room of phase 2 (a room runs one member turn at a time), as many
    // turns as phase 2 publishes replies
    let mut all = Vec::new();
    for room in 1..=args.rooms {
        all.push(store.get_bot(&member_id(room, 0)).await.unwrap().unwrap());
    }
    let per_bot = if args.no_baseline {
        1
    } else {
        args.runs_per_room * replies_per_run as usize
    };
    let stats0b = snapshot(&store);
    let t = Instant::now();
    let mut handles = Vec::new();
    for (b, record) in all.into_iter().enumerate() {
        let bench = bench.clone();
        handles.push(tokio::spawn(async move {
            for i in 0..per_bot {
                plain_turn(&bench, &record, turn_span, 1_000_000 + b * 10_000 + i).await;
            }
        }));
    }
    let plain_n = (handles.len() * per_bot) as f64;
    for h in handles {
        h.await.unwrap();
    }
    let base_many = t.elapsed();
    let base_many_us = base_many.as_secs_f64() * 1e6 / plain_n;
    let base_many_stats = delta(&store, stats0b, plain_n);

    // 1. one room, runs back to back
    let stats1 = snapshot(&store);
    let t = Instant::now();
    for i in 0..args.runs {
        one_run(&bench, "room0", run_span, &format!("seq-{i}")).await;
    }
    let single = t.elapsed();
    let single_replies = (args.runs as i64 * replies_per_run) as f64;
    let single_us = single.as_secs_f64() * 1e6 / single_replies;
    let single_stats = delta(&store, stats1, single_replies);

    // 2. many rooms at once
    let stats2 = snapshot(&store);
    let t = Instant::now();
    let mut handles = Vec::new();
    for room in 1..=args.rooms {
        let bench = bench.clone();
        let n = args.runs_per_room;
        handles.push(tokio::spawn(async move {
            let name = format!("room{room}");
            for i in 0..n {
                one_run(&bench, &name, run_span, &format!("{name}-par-{i}")).await;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let many = t.elapsed();
    let many_replies = (args.rooms * args.runs_per_room) as f64 * replies_per_run as f64;
    let many_us = many.as_secs_f64() * 1e6 / many_replies;
    let many_stats = delta(&store, stats2, many_replies);

    // check the work: every run of every room ended with the capped replies
    let mut checked_runs = 0;
    for room in 0..=args.rooms {
        let session = botfleet::memory::room_timeline(
            &botfleet::memory::RoomId::new(format!("room{room}")).unwrap(),
        )
        .id();
        let entries = store.entries_after(session, 0, 10_000_000).await.unwrap();
        let users = entries
            .iter()
            .filter(|e| e.kind.name() == "user_message")
            .count();
        let ends = entries
            .iter()
            .filter(|e| e.kind.name() == "turn_end")
            .count();
        let delivered = entries
            .iter()
            .filter(|e| e.kind.name() == "delivery")
            .count() as i64;
        assert_eq!(users, ends, "room{room}: every run ended");
        assert_eq!(
            delivered,
            ends as i64 * replies_per_run,
            "room{room}: replies"
        );
        checked_runs += ends;
    }
    fleet.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);

    // 3. AutoGen, same machine, same run
    let autogen = args
        .autogen
        .as_ref()
        .map(|d| run_autogen(d, args.autogen_runs));
    let autogen_us = autogen
        .as_ref()
        .and_then(|v| v.as_ref().ok())
        .and_then(|v| v["us_per_reply"].as_f64());

    println!(
        "group-load: {} members per room, {replies_per_run} replies per run, sync={}",
        args.members, args.sync
    );
    println!(
        "{:<44} {:>10} {:>10} {:>9} {:>10}",
        "phase (per reply, or per turn)", "wall µs", "CPU µs", "commits", "mutations"
    );
    println!(
        "{:<44} {:>10.1} {:>10.1} {:>9.2} {:>10.2}",
        format!("0. plain turn, sequential ({} turns)", args.turns),
        base_us,
        base_stats.2,
        base_stats.0,
        base_stats.1
    );
    println!(
        "{:<44} {:>10.1} {:>10.1} {:>9.2} {:>10.2}",
        format!("0b. plain turns, {} bots at once", args.rooms),
        base_many_us,
        base_many_stats.2,
        base_many_stats.0,
        base_many_stats.1
    );
    println!(
        "{:<44} {:>10.1} {:>10.1} {:>9.2} {:>10.2}",
        format!("1. one room, sequential ({} runs)", args.runs),
        single_us,
        single_stats.2,
        single_stats.0,
        single_stats.1
    );
    println!(
        "{:<44} {:>10.1} {:>10.1} {:>9.2} {:>10.2}",
        format!(
            "2. {} rooms at once ({} runs each)",
            args.rooms, args.runs_per_room
        ),
        many_us,
        many_stats.2,
        many_stats.0,
        many_stats.1
    );
    println!(
        "coordinator overhead per member turn: wall {:.1} µs sequential (1 − 0), {:.1} µs at once (2 − 0b); CPU {:.1} µs / {:.1} µs",
        single_us - base_us,
        many_us - base_many_us,
        single_stats.2 - base_stats.2,
        many_stats.2 - base_many_stats.2
    );
    match (&autogen, autogen_us) {
        (Some(Ok(_)), Some(a)) => println!(
            "AutoGen RoundRobinGroupChat: {a:.1} µs/reply → {:.1}× (sequential), {:.1}× (many rooms)",
            a / single_us,
            a / many_us
        ),
        (Some(Err(e)), _) => println!("AutoGen: not run ({e})"),
        _ => {}
    }
    let out = json!({
        "bench": "group_load",
        "members": args.members,
        "replies_per_run": replies_per_run,
        "sync": args.sync,
        "plain_turn_us": round1(base_us),
        "single_room_us_per_reply": round1(single_us),
        "single_room_runs": args.runs,
        "many_rooms": args.rooms,
        "many_rooms_runs_each": args.runs_per_room,
        "many_rooms_us_per_reply": round1(many_us),
        "plain_turn_many_us": round1(base_many_us),
        "cpu_us_plain_turn": round1(base_stats.2),
        "cpu_us_plain_turn_many": round1(base_many_stats.2),
        "cpu_us_per_reply_single": round1(single_stats.2),
        "cpu_us_per_reply_many": round1(many_stats.2),
        "coordinator_overhead_cpu_us_single": round1(single_stats.2 - base_stats.2),
        "coordinator_overhead_cpu_us_many": round1(many_stats.2 - base_many_stats.2),
        "coordinator_overhead_us_per_member_turn": round1(single_us - base_us),
        "coordinator_overhead_us_per_member_turn_many": round1(many_us - base_many_us),
        "commits_per_reply_single": round2(single_stats.0),
        "commits_per_reply_many": round2(many_stats.0),
        "mutations_per_reply": round2(single_stats.1),
        "runs_checked": checked_runs,
        "autogen_us_per_reply": autogen_us,
        "ratio_single": autogen_us.map(|a| round1(a / single_us)),
        "ratio_many": autogen_us.map(|a| round1(a / many_us)),
        "autogen": autogen.and_then(Result::ok),
    });
    println!("{out}");
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// CPU time of this process (user + system), µs, from /proc/self/stat
/// (clock ticks of 10 ms: phases last seconds, so this is ±1%).
fn cpu_us() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // fields after the command name (which may hold spaces): state is 3rd
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    ticks * 10_000.0
}

fn snapshot(store: &Store) -> (u64, u64, f64) {
    let s = store.stats();
    (s.commits.load(Relaxed), s.mutations.load(Relaxed), cpu_us())
}

/// Commits, mutations and CPU µs per unit since `before`.
fn delta(store: &Store, before: (u64, u64, f64), units: f64) -> (f64, f64, f64) {
    let now = snapshot(store);
    (
        (now.0 - before.0) as f64 / units,
        (now.1 - before.1) as f64 / units,
        (now.2 - before.2) / units,
    )
}

/// Posts one message to `room` and waits for its run's end (`span`
/// entries after the message).
async fn one_run(bench: &Bench, room: &str, span: i64, key: &str) {
    let posted = group::post_message(&bench.rt, &bench.user, room, "status?", Some(key))
        .await
        .unwrap();
    let AdmitOutcome::Accepted(rec) = posted.outcome else {
        panic!("not accepted: {:?}", posted.outcome);
    };
    Watch::wait(&bench.watch, rec.session, rec.seq + span)
        .await
        .unwrap();
}

async fn plain_turn(bench: &Bench, record: &BotRecord, span: i64, i: usize) {
    let req =
        botfleet::actors::user_message(&bench.user, record, "ping", Some(&format!("plain-{i}")));
    let AdmitOutcome::Accepted(rec) = bench.fleet.admit(req).await.unwrap() else {
        panic!("not accepted");
    };
    Watch::wait(&bench.watch, rec.session, rec.seq + span)
        .await
        .unwrap();
}

/// Runs one room message and returns how many entries after it its run
/// writes (up to its turn end).
async fn calibrate_run(bench: &Bench, room: &str) -> i64 {
    let posted = group::post_message(
        &bench.rt,
        &bench.user,
        room,
        "warm up",
        Some("calibrate-run"),
    )
    .await
    .unwrap();
    let AdmitOutcome::Accepted(rec) = posted.outcome else {
        panic!("not accepted");
    };
    wait_turn_end(&bench.store, rec.session, rec.seq).await - rec.seq
}

async fn calibrate_turn(bench: &Bench, bot: &BotId) -> i64 {
    let record = bench.store.get_bot(bot).await.unwrap().unwrap();
    let req = botfleet::actors::user_message(&bench.user, &record, "ping", Some("calibrate-turn"));
    let AdmitOutcome::Accepted(rec) = bench.fleet.admit(req).await.unwrap() else {
        panic!("not accepted");
    };
    wait_turn_end(&bench.store, rec.session, rec.seq).await - rec.seq
}

/// Polls until a turn_end entry lists `seq`; returns the turn end's seq.
async fn wait_turn_end(store: &Store, session: SessionId, seq: i64) -> i64 {
    for _ in 0..30_000 {
        let entries = store.entries_after(session, seq, 100_000).await.unwrap();
        if let Some(end) = entries.iter().find(|e| {
            matches!(&e.kind, botfleet::memory::EntryKind::TurnEnd { inputs, .. } if inputs.contains(&seq))
        }) {
            return end.seq;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("no turn end for {seq}");
}

fn run_autogen(dir: &std::path::Path, runs: usize) -> Result<Value, String> {
    let python = dir.join(".venv/bin/python");
    let out = std::process::Command::new(&python)
        .arg("group_chat.py")
        .args(["--runs", &runs.to_string()])
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "group_chat.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line).map_err(|e| format!("cannot parse its output ({e}): {line}"))
}

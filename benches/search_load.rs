//! `search-load`: the transcript search load benchmark.
//!
//! Generates N transcript entries of mixed Latin-script and Chinese text
//! from a fixed seed, indexes them with the botfleet index, then runs
//! 1-term, 2-term, phrase and session-restricted queries and reports p50/p99
//! latency. The same corpus and queries then run on SQLite FTS5 with the
//! trigram tokenizer. Recall and precision of both engines are measured
//! against a ground truth computed from the generator, on queries
//! restricted to sessions holding at most 100 true matches (so every match
//! of both engines can be listed).
//!
//! ```text
//! cargo build --release -j2 --bin search-load
//! target/release/search-load                  # 1,000,000 entries
//! target/release/search-load --entries 50000  # quicker
//! ```
//!
//! Prints a table on stdout, then one JSON line starting with `{"bench":"search-load"`.
//! Progress goes to stderr.
// A benchmark's job is to print its figures.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashSet;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use botfleet_memory::IndexOptions;
use botfleet_memory::Indexer;
use botfleet_memory::SearchQuery;
use botfleet_memory::TranscriptIndex;
use clap::Parser;
use rusqlite::Connection;
use rusqlite::params;
use serde_json::json;

use self::corpus::Corpus;
use self::corpus::Kind;
use self::corpus::Query;
use self::corpus::Rng;
use self::corpus::latency_queries;
use self::corpus::recall_query;

#[path = "search_load/corpus.rs"]
mod corpus;

/// The host binary's allocator (src/main.rs), so the figures match it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(about = "Transcript search load benchmark: botfleet index vs SQLite FTS5 trigram")]
struct Args {
    /// Entries to generate and index.
    #[arg(long, default_value_t = 1_000_000)]
    entries: usize,
    /// Queries timed per query kind.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Queries per kind for the recall measurement.
    #[arg(long, default_value_t = 40)]
    recall_queries: usize,
    /// Indexing threads of the tantivy writer.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seed of the generator.
    #[arg(long, default_value_t = 20_240_601)]
    seed: u64,
    /// Work directory (default: a fresh one under the system temp dir,
    /// removed at the end).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print this many slowest queries of each kind and engine (stderr).
    #[arg(long, default_value_t = 0)]
    slowest: usize,
    /// Commit every this many entries, as a live host does (it commits
    /// 300 ms after the first uncommitted entry, so a quiet fleet makes
    /// many small commits); default: every 100,000, as `reindex` does.
    #[arg(long, default_value_t = 100_000)]
    commit_every: usize,
    /// Skip the FTS5 comparison.
    #[arg(long)]
    no_fts5: bool,
}

// ---------------------------------------------------------------- engines

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let k = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[k].as_secs_f64() * 1e3
}

#[derive(Debug, Default, Clone, Copy)]
struct Latency {
    p50_ms: f64,
    p99_ms: f64,
    mean_hits: f64,
}

/// Times every query; `show` prints the slowest few (with `--slowest`).
fn measure(
    mut run: impl FnMut(&Query) -> anyhow::Result<usize>,
    queries: &[Query],
    show: impl Fn(&Query) -> String,
    slowest: usize,
) -> anyhow::Result<Latency> {
    for q in queries.iter().take(10) {
        run(q)?;
    }
    let mut timed = Vec::with_capacity(queries.len());
    let mut hits = 0usize;
    for (k, q) in queries.iter().enumerate() {
        let t = Instant::now();
        hits += run(q)?;
        timed.push((t.elapsed(), k));
    }
    timed.sort();
    for (d, k) in timed.iter().rev().take(slowest) {
        eprintln!(
            "  slow: {:>8.2} ms  {}",
            d.as_secs_f64() * 1e3,
            show(&queries[*k])
        );
    }
    let times: Vec<Duration> = timed.iter().map(|(d, _)| *d).collect();
    Ok(Latency {
        p50_ms: percentile(&times, 0.50),
        p99_ms: percentile(&times, 0.99),
        mean_hits: hits as f64 / queries.len().max(1) as f64,
    })
}

#[derive(Debug, Default, Clone, Copy)]
struct Recall {
    truth: usize,
    found: usize,
    found_true: usize,
}

impl Recall {
    fn add(&mut self, found: &HashSet<i64>, truth: &HashSet<i64>) {
        self.truth += truth.len();
        self.found += found.len();
        self.found_true += found.intersection(truth).count();
    }

    fn recall(&self) -> f64 {
        self.found_true as f64 / self.truth.max(1) as f64
    }

    fn precision(&self) -> f64 {
        self.found_true as f64 / self.found.max(1) as f64
    }
}

struct EngineReport {
    index_secs: f64,
    entries_per_sec: f64,
    bytes: u64,
    /// Segments the searches walked (tantivy only).
    segments: Option<usize>,
    latency: Vec<Latency>,
    recall: Vec<Recall>,
}

fn dir_size(path: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
        let p = entry.path();
        total += if p.is_dir() {
            dir_size(&p)
        } else {
            entry.metadata().map_or(0, |m| m.len())
        };
    }
    total
}

fn run_tantivy(
    args: &Args,
    corpus: &Corpus,
    dir: &Path,
    latency_sets: &[Vec<Query>],
    recall_sets: &[Vec<(Query, HashSet<i64>)>],
) -> anyhow::Result<EngineReport> {
    let index = TranscriptIndex::open(dir)?;
    let options = IndexOptions {
        writer_threads: args.threads,
        writer_memory: (args.threads * 128) << 20,
        commit_batch: args.commit_every.max(1),
        ..IndexOptions::default()
    };
    let mut indexer = Indexer::open(&index, options)?;
    eprintln!("tantivy: indexing {} entries", corpus.entries.len());
    let started = Instant::now();
    for (i, entry) in corpus.entries.iter().enumerate() {
        indexer.add(entry, &corpus.bots[corpus.bot_of[i] as usize])?;
        if indexer.batch_full() {
            indexer.commit()?;
        }
    }
    indexer.commit()?;
    let index_secs = started.elapsed().as_secs_f64();
    drop(indexer);
    index.warm_up();
    let segments = index.num_segments();
    eprintln!("tantivy: indexed in {index_secs:.1} s into {segments} segments; querying");
    let search = |q: &Query, limit: usize| -> anyhow::Result<botfleet_memory::SearchResults> {
        let mut query = SearchQuery::new(corpus.ours(&q.shape)).with_limit(limit);
        if !q.sessions.is_empty() {
            query = query.in_sessions(q.sessions.iter().map(|&s| corpus.sessions[s as usize]));
        }
        Ok(index.search_blocking(&query)?)
    };
    let latency = latency_sets
        .iter()
        .map(|set| {
            measure(
                |q| Ok(search(q, 10)?.hits.len()),
                set,
                |q| corpus.ours(&q.shape),
                args.slowest,
            )
        })
        .collect::<anyhow::Result<_>>()?;
    let mut recall = Vec::new();
    for set in recall_sets {
        let mut r = Recall::default();
        for (q, truth) in set {
            let results = search(q, 100)?;
            let found: HashSet<i64> = results.hits.iter().map(|h| h.gid).collect();
            if results.total > found.len() {
                eprintln!(
                    "tantivy: {} matches for {:?}, only 100 listed",
                    results.total, q.shape
                );
            }
            r.add(&found, truth);
        }
        recall.push(r);
    }
    Ok(EngineReport {
        index_secs,
        entries_per_sec: corpus.entries.len() as f64 / index_secs,
        bytes: dir_size(dir),
        segments: Some(segments),
        latency,
        recall,
    })
}

fn run_fts5(
    slowest: usize,
    corpus: &Corpus,
    dir: &Path,
    latency_sets: &[Vec<Query>],
    recall_sets: &[Vec<(Query, HashSet<i64>)>],
) -> anyhow::Result<EngineReport> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("fts5.db");
    let mut conn = Connection::open(&path)?;
    conn.pragma_update(None, "journal_mode", "OFF")?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    conn.execute_batch(
        "CREATE VIRTUAL TABLE fts USING fts5(text, session UNINDEXED, tokenize='trigram');",
    )
    .context("creating the FTS5 trigram table (is FTS5 compiled into the bundled SQLite?)")?;
    eprintln!("fts5: indexing {} entries", corpus.entries.len());
    let started = Instant::now();
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare("INSERT INTO fts(rowid, text, session) VALUES (?1, ?2, ?3)")?;
        for (i, entry) in corpus.entries.iter().enumerate() {
            insert.execute(params![entry.gid, corpus.text(i), corpus.session_of[i]])?;
        }
    }
    tx.commit()?;
    let index_secs = started.elapsed().as_secs_f64();
    eprintln!("fts5: indexed in {index_secs:.1} s; querying");
    let sessions_json = |q: &Query| serde_json::to_string(&q.sessions).unwrap_or_default();
    let mut top = conn.prepare(
        "SELECT rowid, snippet(fts, 0, '«', '»', '…', 16) FROM fts WHERE fts MATCH ?1 ORDER BY rank LIMIT 10",
    )?;
    let mut top_in = conn.prepare(
        "SELECT rowid, snippet(fts, 0, '«', '»', '…', 16) FROM fts WHERE fts MATCH ?1 \
         AND session IN (SELECT value FROM json_each(?2)) ORDER BY rank LIMIT 10",
    )?;
    let mut latency = Vec::new();
    for set in latency_sets {
        latency.push(measure(
            |q| {
                let m = corpus.fts(&q.shape);
                let rows: Vec<(i64, String)> = if q.sessions.is_empty() {
                    top.query_map(params![m], |r| Ok((r.get(0)?, r.get(1)?)))?
                        .collect::<Result<_, _>>()?
                } else {
                    top_in
                        .query_map(params![m, sessions_json(q)], |r| Ok((r.get(0)?, r.get(1)?)))?
                        .collect::<Result<_, _>>()?
                };
                Ok(rows.len())
            },
            set,
            |q| corpus.fts(&q.shape),
            slowest,
        )?);
    }
    let mut all_in = conn.prepare(
        "SELECT rowid FROM fts WHERE fts MATCH ?1 AND session IN (SELECT value FROM json_each(?2))",
    )?;
    let mut recall = Vec::new();
    for set in recall_sets {
        let mut r = Recall::default();
        for (q, truth) in set {
            let found: HashSet<i64> = all_in
                .query_map(params![corpus.fts(&q.shape), sessions_json(q)], |row| {
                    row.get(0)
                })?
                .collect::<Result<_, _>>()?;
            r.add(&found, truth);
        }
        recall.push(r);
    }
    drop((top, top_in, all_in));
    Ok(EngineReport {
        index_secs,
        entries_per_sec: corpus.entries.len() as f64 / index_secs,
        bytes: std::fs::metadata(&path).map_or(0, |m| m.len()),
        segments: None,
        latency,
        recall,
    })
}

// ---------------------------------------------------------------- report

fn engine_json(r: &EngineReport) -> serde_json::Value {
    let mut latency = serde_json::Map::new();
    for (kind, l) in Kind::ALL.iter().zip(&r.latency) {
        latency.insert(
            kind.key().into(),
            json!({"p50_ms": l.p50_ms, "p99_ms": l.p99_ms, "mean_hits": l.mean_hits}),
        );
    }
    let mut recall = serde_json::Map::new();
    for (kind, q) in Kind::ALL.iter().zip(&r.recall) {
        recall.insert(
            kind.key().into(),
            json!({"recall": q.recall(), "precision": q.precision(), "truth": q.truth, "found": q.found}),
        );
    }
    json!({
        "index_secs": r.index_secs,
        "entries_per_sec": r.entries_per_sec,
        "bytes": r.bytes,
        "segments": r.segments,
        "latency": latency,
        "recall": recall,
    })
}

fn print_table(args: &Args, ours: &EngineReport, fts: Option<&EngineReport>) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "search-load: {} entries, seed {}, {} writer threads, {} CPUs",
        args.entries, args.seed, args.threads, cpus
    );
    println!(
        "{:<34} {:>14} {:>14} {:>12}",
        "", "botfleet", "fts5 trigram", "fts5/ours"
    );
    let row = |name: &str, a: f64, b: Option<f64>, unit: &str| {
        let (b_text, ratio) = match b {
            Some(b) => (format!("{b:.2}{unit}"), format!("{:.2}x", b / a.max(1e-9))),
            None => ("-".into(), "-".into()),
        };
        println!(
            "{name:<34} {:>14} {b_text:>14} {ratio:>12}",
            format!("{a:.2}{unit}")
        );
    };
    row(
        "index entries/s",
        ours.entries_per_sec,
        fts.map(|f| f.entries_per_sec),
        "",
    );
    row(
        "index size MB",
        ours.bytes as f64 / 1e6,
        fts.map(|f| f.bytes as f64 / 1e6),
        "",
    );
    for (k, kind) in Kind::ALL.iter().enumerate() {
        row(
            &format!("{} p50 ms", kind.name()),
            ours.latency[k].p50_ms,
            fts.map(|f| f.latency[k].p50_ms),
            "",
        );
        row(
            &format!("{} p99 ms", kind.name()),
            ours.latency[k].p99_ms,
            fts.map(|f| f.latency[k].p99_ms),
            "",
        );
    }
    for (k, kind) in Kind::ALL[..3].iter().enumerate() {
        row(
            &format!("{} recall", kind.name()),
            ours.recall[k].recall(),
            fts.map(|f| f.recall[k].recall()),
            "",
        );
        row(
            &format!("{} precision", kind.name()),
            ours.recall[k].precision(),
            fts.map(|f| f.recall[k].precision()),
            "",
        );
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = args.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("botfleet-search-load-{}", std::process::id()))
    });
    let cleanup = args.dir.is_none();
    eprintln!("generating {} entries (seed {})", args.entries, args.seed);
    let corpus = Corpus::generate(args.entries, args.seed)?;
    let mut rng = Rng(args.seed ^ 0x5EED);
    let latency_sets: Vec<Vec<Query>> = Kind::ALL
        .iter()
        .map(|&k| latency_queries(&corpus, k, args.queries, &mut rng))
        .collect();
    eprintln!(
        "computing ground truth for {} recall queries per kind",
        args.recall_queries
    );
    // Restricted queries are 1-term queries: their recall is the 1-term row.
    let recall_sets: Vec<Vec<(Query, HashSet<i64>)>> = Kind::ALL[..3]
        .iter()
        .map(|&k| {
            (0..args.recall_queries)
                .map(|_| recall_query(&corpus, k, &mut rng))
                .collect()
        })
        .collect();

    let ours = run_tantivy(
        &args,
        &corpus,
        &dir.join("tantivy"),
        &latency_sets,
        &recall_sets,
    )?;
    let fts = if args.no_fts5 {
        None
    } else {
        Some(run_fts5(
            args.slowest,
            &corpus,
            &dir.join("fts5"),
            &latency_sets,
            &recall_sets,
        )?)
    };
    if cleanup {
        let _ = std::fs::remove_dir_all(&dir);
    }
    print_table(&args, &ours, fts.as_ref());
    let line = json!({
        "bench": "search-load",
        "entries": args.entries,
        "seed": args.seed,
        "writer_threads": args.threads,
        "commit_every": args.commit_every,
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "queries_per_kind": args.queries,
        "recall_queries_per_kind": args.recall_queries,
        "botfleet": engine_json(&ours),
        "fts5_trigram": fts.as_ref().map(engine_json),
    });
    println!("{line}");
    Ok(())
}

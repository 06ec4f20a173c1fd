//! `botfleet search` (over the API) and `botfleet reindex` (offline: the
//! store and the index opened directly, with a progress bar).

use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use botfleet_memory::IndexError;
use botfleet_memory::IndexOptions;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use botfleet_memory::StoreOptions;
use botfleet_memory::TranscriptIndex;
use serde_json::Value;

use super::terminal;
use crate::client::Client;
use crate::host;

/// What `botfleet search` asks for.
#[derive(Debug, Clone)]
pub struct SearchArgs {
    /// The query text.
    pub query: String,
    /// Only what this bot may see.
    pub bot: Option<String>,
    /// Only this session.
    pub session: Option<String>,
    /// Most hits.
    pub limit: Option<u64>,
    /// Best hits to skip (the start of a page).
    pub offset: Option<u64>,
    /// Print the API's JSON.
    pub json: bool,
}

/// Runs a search through `GET /v1/search` and prints the hits.
pub async fn search(client: &Client, args: &SearchArgs) -> anyhow::Result<ExitCode> {
    let limit = args.limit.map(|n| n.to_string());
    let offset = args.offset.map(|n| n.to_string());
    let mut params = vec![("q", args.query.as_str())];
    if let Some(b) = &args.bot {
        params.push(("bot", b));
    }
    if let Some(s) = &args.session {
        params.push(("session", s));
    }
    if let Some(l) = &limit {
        params.push(("limit", l));
    }
    if let Some(o) = &offset {
        params.push(("offset", o));
    }
    let v = client
        .get_query("/v1/search", &params)
        .await
        .map_err(query_named)?;
    let v = client.expect(v, "hits")?;
    if args.json {
        outln!("{}", super::terminal::json_pretty(&v));
        return Ok(ExitCode::SUCCESS);
    }
    let hits = v["hits"].as_array().cloned().unwrap_or_default();
    let total = v["total"].as_u64().unwrap_or(0);
    if hits.is_empty() {
        // the query as typed: `errln!` escapes its controls and bidi
        // characters (terminal::text) and nothing else, where `{:?}`
        // escaped the vowel signs of Hindi, Thai or NFD text too. On
        // stderr, as an empty listing elsewhere (`approvals`, `group
        // list`): a script counting the lines of stdout counted a hit
        if total > 0 {
            // a page past the end: the matches exist, the offset skipped them all
            errln!(
                "{total} match(es) for {}, none after offset {}",
                quoted(&args.query),
                v["offset"]
            );
        } else {
            errln!("no matches for {}", quoted(&args.query));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let first = v["offset"].as_u64().unwrap_or(0) + 1;
    let last = first + hits.len() as u64 - 1;
    if first == 1 {
        outln!("{total} match(es), showing {}:", hits.len());
    } else {
        outln!("{total} match(es), showing {first}-{last}:");
    }
    for h in &hits {
        print_hit(h);
    }
    if let Some(next) = v["next_offset"].as_u64() {
        // a hint, not a hit: on stderr, as the hints under other listings
        errln!("");
        errln!("more: add --offset {next} for the next page");
    }
    Ok(ExitCode::SUCCESS)
}

/// A notice's snippet as `transcript` prints the notice: its API routes
/// as the CLI's commands ([`super::hints::for_cli`]), without the match
/// marks (they split the command a route is paired with), and a route the
/// snippet cut after its command (`` … or `POST /v1/turns/ID…``) dropped.
///
/// A snippet whose matches would all be gone so (`botfleet search OR`
/// matched only the `or` before the route) is printed as the host wrote
/// it, routes and all, so the hit shows why it was found (QA, 2026-12-05:
/// it showed no match at all).
fn notice_snippet(snippet: &str) -> String {
    let plain = snippet.replace(['\u{ab}', '\u{bb}'], "");
    let mut text = super::hints::for_cli(&plain);
    if let Some(at) = text.rfind(" or `")
        && let cut = &text[at + " or `".len()..]
        && ["GET /v1/", "POST /v1/", "PUT /v1/", "DELETE /v1/"]
            .iter()
            .any(|route| cut.starts_with(route))
        && cut.ends_with('\u{2026}')
        && !cut.contains('`')
    {
        text = format!("{}\u{2026}", &text[..at]);
    }
    let shown = text.to_lowercase();
    let matched: Vec<String> = snippet
        .split('\u{ab}')
        .skip(1)
        .filter_map(|s| s.split_once('\u{bb}'))
        .map(|(m, _)| m.to_lowercase())
        .collect();
    if matched.is_empty() || matched.iter().any(|m| shown.contains(m.as_str())) {
        text
    } else {
        plain
    }
}

/// The query as typed, in quotes it does not hold: `"buy milk"` read
/// `""buy milk""` (QA).
fn quoted(query: &str) -> String {
    if query.contains('"') && !query.contains('\'') {
        format!("'{query}'")
    } else {
        format!("\"{query}\"")
    }
}

fn print_hit(h: &Value) {
    let s = |k: &str| h[k].as_str().unwrap_or("").to_owned();
    let when = h["time_ms"]
        .as_i64()
        .and_then(terminal::minute_utc)
        .unwrap_or_default();
    outln!("");
    // an approval's hits, one per status change, say which status each is
    let kind = match h["approval_status"].as_str() {
        Some(status) => format!("{}, {status}", s("kind")),
        None => s("kind"),
    };
    outln!(
        "{} · #{} · {when} · {} ({kind})",
        s("where"),
        h["seq"],
        s("author"),
    );
    let snippet = s("snippet").replace('\n', " ");
    // a notice's hint, written for API clients too, as `transcript`
    // prints it: the CLI's command, not the route (QA)
    if h["kind"] == "notice" {
        outln!("  {}", notice_snippet(&snippet));
    } else {
        outln!("  {snippet}");
    }
    outln!("  session {}", s("session"));
}

/// Rebuilds the search index of a data directory from its store, offline:
/// whatever the index directory holds (a damaged index too) is deleted
/// first. Refuses while a host runs on the directory (it holds the index's
/// writer lock), and refuses a database of an older schema unchanged:
/// upgrading it is the host's start, never this command's.
/// What `reindex` gives for `host.listen`, which it does not use.
const NO_LISTEN: &str = "127.0.0.1:0";

pub async fn reindex(fleet: Option<PathBuf>, data: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let (data_dir, from_fleet) = match data {
        Some(d) => (d, None),
        None => {
            let loaded = host::load_fleet(&host::HostOptions {
                fleet,
                // `reindex` listens nowhere: an address stands in for
                // `host.listen`, so a bad one in the file does not stop
                // the rebuild (QA: it did, and `reindex` has no --listen
                // to override it)
                listen: Some(NO_LISTEN.into()),
                ..Default::default()
            })?;
            (loaded.file.host.data_dir.clone(), Some(loaded.source))
        }
    };
    let db = data_dir.join("fleet.db");
    // a store lost where the directory has history is said so, as the
    // start and check-config say it (it was "no host has run yet": QA,
    // 2026-12-05)
    if let Err(e @ botfleet_memory::StoreError::HistoryGone { .. }) =
        botfleet_memory::peek_store(&db)
    {
        bail!("cannot open the store in {}: {e}", data_dir.display());
    }
    if !db.exists() {
        bail!("{}", no_store(&db, &data_dir, from_fleet.as_deref()));
    }
    let index_dir = data_dir.join("index");
    // The store first: opening it is what finds a running host (its lock)
    // and a store this binary cannot read (a newer schema, a missing
    // database with history); only then is the index emptied, so a
    // refusal leaves the index as it was.
    // never migrated here: a database restored to roll back to an older
    // botfleet would no longer open in it
    let store = Store::open(StoreOptions {
        migrate: false,
        ..StoreOptions::new(&db)
    })
    .map_err(|e| store_refused(e, &db, &data_dir))?;
    // the mirror is rewritten with the index: one that cannot be (a file
    // where its directory goes) is refused before the index is emptied
    // (QA: the index was emptied, then the rebuild failed naming
    // `.mirrored_gid: Not a directory`)
    if let Err(e) =
        botfleet_memory::JsonlMirror::check_root(data_dir.join(botfleet_memory::MIRROR_DIR))
    {
        store.close().await;
        bail!("cannot rebuild the search index: {e}");
    }
    // the rebuild starts from an empty directory, so an index that cannot
    // be read is no obstacle
    let index = match TranscriptIndex::open_empty(&index_dir) {
        Ok(index) => index,
        Err(e) => {
            store.close().await;
            return Err(locked_or(e, &data_dir));
        }
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, 4);
    let options = IndexOptions {
        writer_threads: threads,
        writer_memory: 256 << 20,
        commit_batch: 100_000,
        ..IndexOptions::default()
    };
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} entries ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let progress = bar.clone();
    let result = botfleet_memory::reindex(&index, &store, options, move |done, total| {
        progress.set_length(total);
        progress.set_position(done);
    })
    .await;
    bar.finish_and_clear();
    store.close().await;
    let report = result.map_err(|e| locked_or(e, &data_dir))?;
    outln!(
        "reindexed {} entries ({} searchable documents, up to gid {}) in {:.1} s into {}",
        report.entries,
        report.documents,
        report.last_gid,
        report.elapsed.as_secs_f64(),
        index_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Why there is no store at `db`, and what to do: for a `data_dir` of the
/// fleet file `fleet` (`None`: `--data`) that is relative, that it is read
/// from the current directory, as `botfleet run` reads it (the hint said
/// to pass `--fleet` to one who had).
fn no_store(db: &Path, data_dir: &Path, fleet: Option<&str>) -> String {
    let Some(fleet) = fleet else {
        return format!(
            "no store at {}: --data takes the host's data directory (the one its start banner \
             names: \"data in …\")",
            db.display()
        );
    };
    if data_dir.is_absolute() {
        return format!(
            "no store at {}: host.data_dir of {fleet} is {}, where no host has run yet; pass \
             --data with the directory the host's start banner names (\"data in …\")",
            db.display(),
            data_dir.display()
        );
    }
    let here = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| "unknown".to_owned());
    let folder = Path::new(fleet)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| format!(" ({})", p.display()))
        .unwrap_or_default();
    format!(
        "no store at {}: data_dir = {:?} in {fleet} is read from the current directory \
         ({here}), as `botfleet run` reads it: run reindex from the directory the host was \
         started in (usually the fleet file's{folder}), pass --data with the directory its \
         start banner names (\"data in …\"), or make data_dir absolute",
        db.display(),
        data_dir.display().to_string()
    )
}

/// A held writer lock means a host (or another reindex) runs on the data
/// directory: say so, and what to do.
fn locked_or(e: IndexError, data_dir: &Path) -> anyhow::Error {
    match e {
        IndexError::Locked { .. } => running_on(data_dir, "the search index's writer lock"),
        other => anyhow::Error::new(other).context("rebuilding the search index failed"),
    }
}

/// The store could not be opened: held by a running host (said as for
/// the index's lock), or refused for what it holds (the store's own
/// message: a newer schema, history without a database…).
fn store_refused(e: StoreError, db: &Path, data_dir: &Path) -> anyhow::Error {
    if matches!(e, StoreError::InUse { .. }) {
        return running_on(data_dir, "the store's lock");
    }
    if let StoreError::SchemaOlder { found, supported } = e {
        return anyhow::anyhow!(
            "the store {} is at schema version {found}, written by an older botfleet; this one \
             uses version {supported} and reindex does not upgrade a database (an older botfleet \
             could no longer open it). To keep the older botfleet, run its own `botfleet reindex`; \
             to upgrade, start the host with this version once (`botfleet run`), which migrates \
             the database and rebuilds the index itself. Nothing was changed",
            db.display()
        );
    }
    anyhow::Error::new(e).context(format!(
        "cannot open the store {} (the search index was left as it was)",
        db.display()
    ))
}

/// A host (or another reindex) holds `what` on the data directory.
fn running_on(data_dir: &Path, what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "a botfleet host (or another reindex) is running on {} — it holds {what}; stop it (Ctrl-C), then run `botfleet reindex` again",
        data_dir.display()
    )
}

/// The host's refusal of a query as the CLI's user typed it: `q: …` names
/// the API's parameter, where the CLI took the words (QA).
fn query_named(e: anyhow::Error) -> anyhow::Error {
    match e.downcast::<crate::client::HostAnswered>() {
        Ok(mut answered) => {
            if let Some(rest) = answered.message.strip_prefix("q: ") {
                // a refusal that names the query itself says so once (QA:
                // "the query: the query only excludes terms")
                answered.message =
                    if rest.starts_with("the query") || rest.starts_with("the search query") {
                        rest.to_owned()
                    } else {
                        format!("the query: {rest}")
                    };
            }
            // the host's words for its parameters, said as this command's
            // flags (QA: "search without `session`")
            answered.message = answered
                .message
                .replace("`session` of a hit", "session of a hit (--session)")
                .replace("without `session`", "without --session");
            anyhow::Error::new(answered)
        }
        Err(e) => e,
    }
}

//! What a started host runs beside its bots: the transcript index and its
//! indexer (with the warm-up of what the first search and the first turn
//! would otherwise wait for), and the hourly pruning of the idempotency
//! ledger and of the counts of chains of bot-to-bot messages that ended.

use std::time::Duration;

use anyhow::Context;
use botfleet_actors::FleetHandle;
use botfleet_actors::Runtime;

/// Sets up transcript recall: the index at `<data_dir>/index` (searched by
/// the recall tools and `GET /v1/search`) and the indexer the fleet
/// supervisor runs over it, which also writes the JSONL mirror at
/// `<data_dir>/transcripts` and catches up from the store on start. The
/// index is derived from the store: a damaged one does not stop the host,
/// it is moved aside (kept for inspection) and rebuilt.
pub(super) fn start_recall(rt: &Runtime, data_dir: &std::path::Path) -> anyhow::Result<()> {
    let dir = data_dir.join("index");
    // a damaged index set aside is said once, by the move itself (its
    // `WARN` names the directories and the cause; this said it again, QA)
    let (index, _set_aside) = botfleet_memory::TranscriptIndex::open_or_set_aside(&dir)
        .with_context(|| format!("cannot open the search index in {}", dir.display()))?;
    // a mirror that cannot be written would keep the indexer from starting
    // while searches answered from an index that no longer grows
    let mirror_root = data_dir.join(botfleet_memory::MIRROR_DIR);
    botfleet_memory::JsonlMirror::check_root(&mirror_root)?;
    let warm = index.clone();
    // loads the jieba dictionary off the first Chinese search
    tokio::task::spawn_blocking(move || warm.warm_up());
    // builds the providers' token encodings off the first turn, which
    // counts its context's tokens (a first message after each start waited
    // for them); beside the dictionary, not behind it, and neither holds
    // up the start
    let encodings = provider_encodings(rt);
    tokio::task::spawn_blocking(move || {
        for encoding in encodings {
            encoding.warm_up();
        }
    });
    rt.set_indexer(botfleet_memory::IndexerArgs {
        index,
        store: rt.store.clone(),
        options: botfleet_memory::IndexOptions::default(),
        mirror_root: Some(mirror_root),
    });
    Ok(())
}

/// The token encodings of the fleet's providers (the default's first),
/// each once.
fn provider_encodings(rt: &Runtime) -> Vec<botfleet_memory::Encoding> {
    let settings = &rt.settings;
    let mut encodings = vec![settings.default_context.encoding];
    for context in settings.context.values() {
        if !encodings.contains(&context.encoding) {
            encodings.push(context.encoding);
        }
    }
    encodings
}

/// Chains' rows read per page of the walk that finds the silent ones (on
/// a reader), and so at most dropped per write: the writer is held for a
/// few hundred deletes by key at a time, and other writes go in between.
const CHAIN_ROWS_PER_PAGE: usize = 500;

/// Prunes the idempotency ledger past its retention now (so the ledger's
/// horizon holds from the first request on), then hourly; with it the
/// rows of chains (`chains`) silent for as long (`prune_chains`).
pub(super) async fn start_ledger_pruning(
    fleet: FleetHandle,
    retention: Duration,
) -> anyhow::Result<()> {
    prune_ledger(&fleet, retention).await?;
    tokio::spawn(async move {
        let hour = Duration::from_secs(3600);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + hour, hour);
        loop {
            tick.tick().await;
            match prune_ledger(&fleet, retention).await {
                Ok(()) => {}
                Err(botfleet_memory::StoreError::WriterGone) => return,
                Err(e) => tracing::warn!(error = %e, "ledger or chain pruning failed"),
            }
        }
    });
    Ok(())
}

async fn prune_ledger(
    fleet: &FleetHandle,
    retention: Duration,
) -> Result<(), botfleet_memory::StoreError> {
    let before = chrono::Utc::now().timestamp_millis() - retention.as_millis() as i64;
    fleet
        .store()
        .write(vec![botfleet_memory::Mutation::PruneLedger {
            before_ms: before,
        }])
        .await?;
    prune_chains(fleet, before).await
}

/// Drops the rows of chains last written before `before_ms`: a reader
/// walks the table a page at a time in key order, and the writer drops the
/// silent rows of each page by key (a chain that sent in between stays).
/// Each message of a chain writes its row, so a chain still sending is not
/// among them: one silent for the ledger's whole retention (a day at
/// least) has ended, or, if a message of it still waits (a paused bot),
/// counts again from 0, at worst `runtime.max_chain_messages` more
/// messages (memory/src/store/chains.rs).
async fn prune_chains(
    fleet: &FleetHandle,
    before_ms: i64,
) -> Result<(), botfleet_memory::StoreError> {
    let store = fleet.store();
    let mut after = None;
    loop {
        let page = store
            .silent_chains(after.as_ref(), before_ms, CHAIN_ROWS_PER_PAGE)
            .await?;
        if !page.silent.is_empty() {
            store
                .write(vec![botfleet_memory::Mutation::PruneChains {
                    before_ms,
                    origins: page.silent,
                }])
                .await?;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
}

//! Wiring of a host: config → store → models → fleet → HTTP server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use botfleet_actors::FleetHandle;
use botfleet_actors::FleetSettings;
use botfleet_actors::Runtime;
use botfleet_actors::tools::ShellRegistry;
use botfleet_actors::tools::ToolLimits;
use botfleet_actors::tools::ToolRegistry;
use botfleet_actors::tools::Workspace;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreOptions;
use botfleet_memory::UserId;
use tokio_util::sync::CancellationToken;

use crate::api;
use crate::http_server;

/// How long running fact extractions get at a stop (docs/operations.md),
/// waited for beside the API's drain rather than after it.
const EXTRACTION_STOP_WAIT: Duration = Duration::from_secs(5);

/// What a started host runs beside its bots: transcript recall, ledger
/// pruning.
#[path = "host_background.rs"]
mod background;
use background::start_ledger_pruning;
use background::start_recall;

/// The fleet file checked as a start needs it.
#[path = "host_bots.rs"]
mod bots;
pub use bots::check_store_bots;
#[path = "host_check.rs"]
mod check;
pub use check::CheckedFleet;
pub use check::check;
pub use check::load_fleet;

#[path = "host_file_size.rs"]
mod file_size;
#[path = "host_notes.rs"]
mod notes;
pub use notes::check_notes;
use notes::holds_files;

/// How to start a host.
#[derive(Debug, Clone, Default)]
pub struct HostOptions {
    /// Fleet file; `None` uses `./fleet.toml` if present, else the embedded example.
    pub fleet: Option<PathBuf>,
    /// Data directory, overriding the file's `host.data_dir`.
    pub data_dir: Option<PathBuf>,
    /// Listen address, overriding the file's `host.listen`.
    pub listen: Option<String>,
    /// Environment lookup (tests pass their own instead of mutating the
    /// process environment).
    pub env: Option<HashMap<String, String>>,
    /// The `botfleet` binary, the Shell sandbox's launcher (src/sandbox.rs);
    /// none: no sandbox (and no Shell if it is required).
    pub shell_launcher: Option<PathBuf>,
    /// The store's wall clock (stored times, the day a daily budget
    /// counts): none, the system's. Tests give one that cannot cross a
    /// UTC midnight under them.
    pub clock: Option<WallClock>,
}

/// A wall clock for [`HostOptions::clock`].
#[derive(Clone)]
pub struct WallClock(pub Arc<dyn botfleet_memory::Clock>);

impl std::fmt::Debug for WallClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WallClock({} ms)", self.0.now_ms())
    }
}

impl HostOptions {
    /// As `std::env::var` answers: a value that is not UTF-8 is reported
    /// as such, not as unset.
    fn env_var(&self, name: &str) -> Result<String, std::env::VarError> {
        match &self.env {
            Some(map) => map.get(name).cloned().ok_or(std::env::VarError::NotPresent),
            None => std::env::var(name),
        }
    }
}

/// Locks the workspace `root` for this host: an advisory `flock` of the
/// directory itself (no file is made in it, where bots' files are), held
/// as long as the returned file is, dropped by the system when the
/// process dies. A second host on the same workspace, from another data
/// directory (whose store lock it does not meet), is refused: both would
/// run their bots' commands in the same files (audit: two such hosts both
/// started). A file system that takes no such lock is told in the log,
/// and the start goes on.
fn lock_workspace(
    root: &std::path::Path,
    db: &std::path::Path,
) -> anyhow::Result<Option<std::fs::File>> {
    let dir = std::fs::File::open(root)
        .with_context(|| format!("cannot open the workspace {}", root.display()))?;
    match dir.try_lock() {
        Ok(()) => Ok(Some(dir)),
        // a second host on the same data directory (and so, by default,
        // the same workspace) is told of the store, as before the lock
        Err(std::fs::TryLockError::WouldBlock)
            if let Some(e) = botfleet_memory::peek_store_in_use(db) =>
        {
            let data_dir = db.parent().unwrap_or(std::path::Path::new("."));
            anyhow::bail!(store_open_error(data_dir, &e))
        }
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "the workspace {} is in use by another botfleet host (on another data directory): \
             two hosts on one workspace would run their bots' commands in the same files; \
             stop the other host, or give each its own `host.workspace` (in [host] of fleet.toml)",
            root.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            tracing::warn!(workspace = %root.display(), error = %e, "cannot lock the workspace: a second host started on it would not be refused");
            Ok(None)
        }
    }
}

/// A running host.
pub struct RunningHost {
    /// The fleet.
    pub fleet: FleetHandle,
    /// The address the API listens on.
    pub addr: SocketAddr,
    /// Lines to tell the operator at start (what runs, offline fallbacks).
    pub banner: Vec<String>,
    /// The routines scheduler.
    pub scheduler: botfleet_actors::scheduler::SchedulerHandle,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<()>,
    /// The lock on the workspace, held while the host runs
    /// ([`lock_workspace`]).
    _workspace_lock: Option<std::fs::File>,
}

impl RunningHost {
    /// Begins the stop, at once and all together: the API answers new
    /// requests `503 unavailable` ("the host is stopping") and its listener
    /// closes, and the fleet starts no turn and drops its running ones
    /// where they wait (they resume at the next start:
    /// `Runtime::stop_turns`). Calling it again does nothing;
    /// [`RunningHost::shutdown`] does the rest.
    pub fn begin_stop(&self) {
        self.fleet.runtime().stop_turns();
        self.stop.cancel();
    }

    /// Stops the host ([`RunningHost::begin_stop`] if not begun): requests
    /// in flight get up to [`api::STOP_DRAIN`] while, beside them, the
    /// scheduler stops and running fact extractions get up to their 5 s;
    /// then the fleet stops and the store closes. (Before, these ran one
    /// after the other, after the drain, while turns went on starting.)
    pub async fn shutdown(mut self) {
        self.begin_stop();
        let server = async {
            // the API answers what is still in flight once the drain is
            // over; a connection still open past it (a client that reads
            // nothing) holds nothing the stop needs
            let margin = Duration::from_millis(500);
            if tokio::time::timeout(api::STOP_DRAIN + margin, &mut self.server)
                .await
                .is_err()
            {
                self.server.abort();
            }
        };
        let extractions = self.fleet.runtime().extractions.wait(EXTRACTION_STOP_WAIT);
        tokio::join!(server, self.scheduler.stop(), extractions);
        self.fleet.shutdown().await;
    }

    /// Base URL of the API.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// The store's options at `path`, on `clock` if one is given.
fn store_options(path: PathBuf, clock: Option<&WallClock>) -> StoreOptions {
    let options = StoreOptions::new(path);
    match clock {
        Some(WallClock(clock)) => StoreOptions {
            clock: clock.clone(),
            ..options
        },
        None => options,
    }
}

/// The address the CLI talks to when given no `--host`.
const CLI_DEFAULT_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 7878);

/// The line `botfleet run` ends its banner with: how to send a message
/// to the host listening on `addr`, with `--host` unless that is the
/// CLI's default address (an unspecified address such as `0.0.0.0` is
/// reached through loopback).
pub fn send_hint(addr: SocketAddr) -> String {
    let mut target = addr;
    if target.ip().is_unspecified() {
        target.set_ip(match target {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let host = if target == CLI_DEFAULT_ADDR {
        String::new()
    } else {
        format!(" --host http://{target}")
    };
    format!(
        "send a message:  BOTFLEET_TOKEN=<token> botfleet{host} send <bot> \"hello\"   (Ctrl-C stops)"
    )
}

/// Starts a host: checks the fleet ([`check`]), opens the store, registers
/// the bots, starts the fleet and serves the API.
pub async fn start(opts: HostOptions) -> anyhow::Result<RunningHost> {
    let CheckedFleet {
        fleet: fleet_file,
        notes: mut banner,
        listen,
        users,
        hooks,
        vault,
        models,
    } = check(&opts)?;
    let f = &fleet_file.file;
    // the socket before the data directory: a port in use stops the start
    // before anything is created or locked
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| listen_error(listen, &e))?;
    // before the store's first write
    file_size::survive_file_size_limit();
    let data_dir = f.host.data_dir.clone();
    // its own: the store holds every transcript and the secrets people
    // saved, unencrypted, and files made in it are readable by all
    // (umask 022) when the directory is (QA: a new one was 0755)
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&data_dir)
            .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
    }

    // workspace, store, runtime
    let (_, workspace_dir) = notes::data_and_workspace(&f.host);
    let r = &f.runtime;
    // the error names the directory and what to do: one the host may not
    // write stops the start (its bots' file tools and Shell failed at
    // every call)
    let workspace =
        Workspace::open(&workspace_dir)?.with_min_free_disk_mb(r.tools_min_free_disk_mb);
    // before the store's open, which uses up what it finds once (a
    // restore, a new database: review, a start refused after it kept an
    // index of another history for good)
    let workspace_lock = lock_workspace(workspace.root(), &data_dir.join(notes::STORE_FILE))?;
    let store = Store::open(StoreOptions {
        synchronous: f.host.synchronous,
        // remembered only while it holds files: a move to an empty one is
        // told at every start until the files follow
        workspace: holds_files(&workspace_dir)
            .then(|| workspace_dir.canonicalize().ok())
            .flatten()
            .map(|p| p.display().to_string()),
        ..store_options(data_dir.join(notes::STORE_FILE), opts.clock.as_ref())
    })
    .map_err(|e| anyhow::anyhow!(store_open_error(&data_dir, &e)))?;
    if store.was_restored() {
        banner.push("WARNING: the database is older than this data directory (restored from a snapshot); idempotency keys from before now answer `unknown`".into());
    }
    // a new data directory, a workspace moved without its files (as
    // `check-config` says them)
    let history = store.history();
    for note in notes::data_dir_notes(&data_dir, &workspace_dir, &history) {
        // `run` logs the banner's warnings itself (src/cli_run.rs)
        if !note.starts_with("WARNING: ") {
            tracing::info!("{note}");
        }
        banner.push(note);
    }
    let mut settings = FleetSettings::new(workspace.root().to_path_buf());
    settings.debounce = Duration::from_millis(r.debounce_ms);
    settings.debounce_max = Duration::from_millis(r.debounce_max_ms);
    settings.idle_timeout = Duration::from_secs(r.idle_timeout_s);
    settings.max_steps = r.max_steps;
    settings.review = f.review.to_config();
    settings.max_hops = r.max_hops;
    settings.max_chain_messages = r.max_chain_messages;
    settings.context = fleet_file.context_settings();
    settings.max_subagents = r.max_subagents;
    settings.max_created_agents = r.max_created_agents;
    settings.max_turn_attempts = r.max_turn_attempts;
    settings.context_entries = r.context_entries;
    settings.extract_memory = r.extract_memory;
    // a bot made or renamed by a bot may not be named like a user
    settings.user_ids = users.iter().map(|(user, _)| user.clone()).collect();
    fleet_file.set_user_timezones(&mut settings);
    // nor given the name a fleet.toml bot gets back at the next start
    fleet_file.set_fleet_names(&mut settings);
    settings.tool_limits = ToolLimits {
        shell_default_timeout: Duration::from_secs(r.shell_timeout_s),
        shell_max_timeout: Duration::from_secs(r.shell_max_timeout_s),
        ..ToolLimits::default()
    };
    // the store is ours (its lock is held): what a host killed on this data
    // directory left running is killed before any of its turns resumes
    let shells = ShellRegistry::open(data_dir.join("shell"))?;
    let reaped = shells.reap();
    if reaped > 0 {
        banner.push(format!(
            "killed {reaped} shell command(s) left running by the previous host (it was killed; their calls report `outcome unknown`)"
        ));
    }
    settings.shell_registry = Some(shells);
    // what Shell commands may not read (the fleet file, if any)
    let fleet_path = fleet_file.base_dir.as_ref().map(|_| opts.fleet.clone());
    let hidden = crate::sandbox::hidden_paths(&data_dir, workspace.root(), fleet_path);
    let launcher = opts.shell_launcher.as_deref();
    let (sandbox, notes, isolated) =
        crate::sandbox::shell_sandbox(r.shell_sandbox, launcher, hidden).await;
    settings.shell_sandbox = sandbox;
    settings.shell_open_files = crate::sandbox::starting_open_files();
    banner.extend(notes);
    let now = chrono::Utc::now().timestamp_millis();
    let bots: Vec<BotRecord> = bots::config_bots(f, now)?;
    let bot_count = bots.len();
    let rt = Runtime::new(store, models, ToolRegistry::builtin(), settings, workspace);
    // memory in the prompt: the bot's snapshot is the state block of its
    // context, bounded by its provider's compact_at_tokens
    rt.set_state_provider(Arc::new(
        botfleet_actors::MemoryState::new(rt.store.clone()).bounded_by(&rt.settings),
    ));
    start_recall(&rt, &data_dir)?;
    // commands that see neither the host's secrets nor each other's
    // arguments: each bot's results scrubbed of its owner's secrets only
    rt.set_vault(vault.with_isolated_commands(isolated));
    let fleet = FleetHandle::start(rt, bots).await?;
    // what the start found wrong with the store (its indexer compares it
    // with the search index and the mirror as it starts): damaged, which
    // stops the start, or behind what it had committed (QA: a log line
    // only, `/healthz` ok, and a damaged one took messages it then lost)
    // (only damage: a failed write of another kind, a full disk, is
    // answered as it is while the host runs)
    if let Some(damaged) = fleet.store().stats().health.damaged() {
        fleet.shutdown().await;
        anyhow::bail!("the store cannot be used: {damaged}");
    }
    banner.extend(
        fleet
            .store()
            .stats()
            .health
            .report()
            .reasons
            .into_iter()
            .map(|reason| format!("WARNING: {reason}")),
    );
    // each owner's bots work in `<workspace>/<owner id>/`: what an older
    // version left at the root, shared by all bots, no bot sees any more;
    // say so (docs/operations.md, Upgrading), moving nothing
    // configured users only: a stored bot (removed, or made by a bot)
    // whose owner was taken out of the config hid that owner's directory
    // from the warning (QA, 2026-12-04)
    let owners: Vec<&UserId> = users.iter().map(|(user, _)| user).collect();
    if let Some(warning) = fleet.runtime().workspaces.stray_warning(owners) {
        banner.push(warning);
    }
    let routines = f
        .bots
        .iter()
        .flat_map(|b| b.routines.iter().map(move |r| (b, r)))
        .map(|(b, r)| Ok((BotId::new(b.id.clone())?, r.spec())))
        .collect::<Result<Vec<_>, botfleet_memory::IdError>>()?;
    let routine_count = routines.len();
    let scheduler = botfleet_actors::scheduler::SchedulerHandle::start(
        fleet.runtime().clone(),
        fleet.store().clock().clone(),
        routines,
    )
    .await
    .context("cannot start the routines scheduler")?;
    banner.extend(
        scheduler
            .start_notes()
            .iter()
            .map(|n| format!("WARNING: {n}")),
    );
    if routine_count > 0 || !hooks.is_empty() {
        banner.push(format!(
            "{routine_count} routine(s) from the fleet file, {} webhook(s)",
            hooks.len()
        ));
    }
    let retention = Duration::from_secs(r.ledger_retention_days * 86_400);
    start_ledger_pruning(fleet.clone(), retention)
        .await
        .context("cannot prune the idempotency ledger")?;

    // API
    let state = api::ApiState {
        fleet: fleet.clone(),
        tokens: api::Tokens::new(users),
        limits: api::ApiLimits {
            max_body_bytes: f.host.max_body_bytes,
            max_text_chars: f.host.max_text_chars,
            streams: api::EventStreams::for_host(
                f.host.max_streams_per_user,
                f.host.max_connections,
            ),
            messages: api::MessageRate::new(f.host.user_messages_per_minute),
            guesses: api::TokenGuesses::new(f.host.unknown_tokens_per_minute),
            bodies: api::BodyBudget::new(f.host.body_bytes_per_user, f.host.max_body_bytes),
        },
        scheduler: scheduler.clone(),
        hooks: api::Hooks::new(hooks),
    };
    let addr = listener.local_addr()?;
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    // `/v1/events` streams end when `stop` is cancelled: the graceful
    // shutdown below waits for every open response, and a change stream
    // would otherwise keep it waiting until its timeout
    let app = api::router(state).layer(axum::Extension(stop.clone()));
    // from the stop on, a new request is answered 503 at once and one in
    // flight is answered so after the drain (src/api/mod.rs)
    let app = api::refuse_while_stopping(app, stop.clone());
    // a body declared over host.max_body_bytes is refused from the headers
    let app = http_server::with_declared_length_limit(app, f.host.max_body_bytes);
    let app = http_server::with_host_required(app);
    let app = http_server::with_request_timeout(app, Duration::from_secs(f.host.request_timeout_s));
    let limits = http_server::ConnectionLimits {
        header_timeout: Duration::from_secs(f.host.header_timeout_s),
        max_connections: f.host.max_connections,
    };
    if let Some(warning) = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| http_server::fd_warning(&text, limits.max_connections))
    {
        banner.push(warning);
    }
    let server = tokio::spawn(http_server::serve(listener, app, limits, stopped));
    banner.insert(
        0,
        format!(
            "botfleet listening on http://{addr} — fleet {}, {bot_count} bot(s), data in {}",
            fleet_file.source,
            // relative paths are read from the current directory: say which
            std::path::absolute(&data_dir)
                .unwrap_or_else(|_| data_dir.clone())
                .display()
        ),
    );
    // damage the start did not read (its newest entry reads right) is
    // found by a check of every page, in the background: it reads the
    // whole file (QA: found only by the first write that met it). Begun
    // once the start's own writes are done: damage latched while they
    // ran failed the start at one of them (the ledger's first prune),
    // where a start it does not read should come up and answer 503
    fleet.store().check_in_background();
    Ok(RunningHost {
        fleet,
        addr,
        banner,
        scheduler,
        stop,
        server,
        _workspace_lock: workspace_lock,
    })
}

/// Why the host cannot listen on `addr`, with what to do: only a port in
/// use suggests another host (a denied low port or an address this machine
/// does not have does not).
fn listen_error(addr: SocketAddr, e: &std::io::Error) -> anyhow::Error {
    use std::io::ErrorKind;
    let hint = match e.kind() {
        ErrorKind::AddrInUse => " (is another host running? pass --listen)",
        ErrorKind::AddrNotAvailable => {
            " (this machine has no such address; listen on 127.0.0.1 or 0.0.0.0)"
        }
        ErrorKind::PermissionDenied => " (ports below 1024 need privileges; use a higher port)",
        _ => "",
    };
    anyhow::anyhow!("cannot listen on {addr}: {e}{hint}")
}

/// Why the store in `data_dir` did not open, for the start's error: the
/// store's own words, less "(nothing was saved)", which is said of a
/// refused request and read oddly of a start (QA, 2026-12-05).
fn store_open_error(data_dir: &std::path::Path, e: &botfleet_memory::StoreError) -> String {
    let said = e.to_string();
    let said = said.strip_suffix(" (nothing was saved)").unwrap_or(&said);
    format!("cannot open the store in {}: {said}", data_dir.display())
}

#[cfg(test)]
mod store_open_tests {
    use super::store_open_error;

    #[test]
    fn a_start_on_a_full_disk_says_what_to_do_and_nothing_of_saving() {
        let e = botfleet_memory::StoreError::DiskFull {
            detail: "database or disk is full".into(),
        };
        assert_eq!(
            store_open_error(std::path::Path::new("/d"), &e),
            "cannot open the store in /d: the disk holding the store is full (database or disk is full); free disk space in the host's data directory, then retry"
        );
    }
}

//! Wiring of a host: config → store → models → fleet → HTTP server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use anyhow::bail;
use botfleet_actors::FleetHandle;
use botfleet_actors::FleetSettings;
use botfleet_actors::Runtime;
use botfleet_actors::model::Model;
use botfleet_actors::model::OpenAiModel;
use botfleet_actors::model::OpenAiOptions;
use botfleet_actors::model::ScriptedModel;
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
use crate::config::LoadedFleet;
use crate::config::Overrides;
use crate::config::ProviderConfig;
use crate::http_server;

/// How long running fact extractions get at a stop (docs/operations.md),
/// waited for beside the API's drain rather than after it.
const EXTRACTION_STOP_WAIT: Duration = Duration::from_secs(5);

/// Routes whose responses are open-ended streams, exempt from
/// `host.request_timeout_s`: `GET /v1/events` (src/api/events.rs).
const LONG_LIVED_ROUTES: &[&str] = &["/v1/events"];

/// What a started host runs beside its bots: transcript recall, ledger
/// pruning.
#[path = "host_background.rs"]
mod background;
use background::start_ledger_pruning;
use background::start_recall;

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

/// Loads the fleet file the options point at, with `--listen` and
/// `--data` replacing `host.listen` and `host.data_dir` before the file is
/// checked (a bad `host.listen` does not stop `run --listen …`).
pub fn load_fleet(opts: &HostOptions) -> anyhow::Result<LoadedFleet> {
    let overrides = Overrides {
        listen: opts.listen.clone(),
        data_dir: opts.data_dir.clone(),
    };
    let default = std::path::Path::new("fleet.toml");
    let fleet = match &opts.fleet {
        Some(path) => LoadedFleet::from_path_with(path, &overrides)?,
        // the embedded example only when nothing is there: a broken link, a
        // directory or an unreadable file is read (and its error reported),
        // never taken for "no fleet file" (`exists()` follows links, so a
        // dangling `fleet.toml` started the example fleet with its known token)
        None => match std::fs::symlink_metadata(default) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                LoadedFleet::embedded_with(&overrides)?
            }
            _ => LoadedFleet::from_path_with(default, &overrides)?,
        },
    };
    Ok(fleet)
}

/// A fleet checked as a start needs it: the file loaded and validated,
/// what it refers to outside itself resolved (tokens, webhook and tool
/// secrets, scripts, API keys), its models built. `start` begins with
/// [`check`] and `botfleet check-config` is [`check`], so what one refuses
/// the other refuses too.
pub struct CheckedFleet {
    /// The fleet file.
    pub fleet: LoadedFleet,
    /// What to tell the operator: what each provider is, offline fallbacks.
    pub notes: Vec<String>,
    listen: SocketAddr,
    users: Vec<(UserId, String)>,
    hooks: Vec<(String, String, api::HookSecret)>,
    vault: botfleet_actors::Vault,
    models: HashMap<String, Arc<dyn Model>>,
}

/// Loads the fleet file the options point at and checks everything a
/// start needs from it except the listening socket: the file itself, that
/// its data directory and workspace can be directories (nothing is
/// created), the environment variables it names, its scripts, its models.
/// Every error names the file and the key (or the flag).
pub fn check(opts: &HostOptions) -> anyhow::Result<CheckedFleet> {
    // the flag first: it replaces host.listen, whose check then passes
    if let Some(flag) = &opts.listen
        && flag.parse::<SocketAddr>().is_err()
    {
        bail!("--listen {flag:?} is not an address; expected IP:PORT such as 127.0.0.1:7878");
    }
    // and --data, which replaces host.data_dir
    if let Some(flag) = &opts.data_dir {
        if flag.as_os_str().is_empty() {
            bail!("--data must not be empty: name a directory (it is created if missing)");
        }
        if let Some(problem) = crate::config::dir_problem(flag) {
            bail!("--data: {problem}");
        }
    }
    let fleet_file = load_fleet(opts)?;
    if let Some(flag) = &opts.data_dir
        && fleet_file.file.host.workspace.is_none()
        && let Some(problem) = crate::config::dir_problem(&flag.join("workspace"))
    {
        bail!("--data: its workspace (host.workspace is not set): {problem}");
    }
    fleet_file.check_dirs()?;
    let resolved = fleet_file.resolve_external(|var| opts.env_var(var))?;
    // the host's credentials: no bot is given them, every tool result is
    // scrubbed of them (a command could read them from the host's
    // environment, actors/src/vault.rs, or the fleet file: a base URL's
    // password, as written and decoded, and its basic-auth value)
    let mut url_credentials: Vec<String> = Vec::new();
    for p in fleet_file.file.providers.values() {
        if let ProviderConfig::Openai { base_url, .. } = p {
            url_credentials.extend(OpenAiOptions::new(base_url, "").credentials());
        }
    }
    let host_secrets: Vec<botfleet_actors::safety::Secret> = resolved
        .tokens
        .iter()
        .map(|(_, token)| token.as_str())
        .chain(resolved.hooks.iter().map(|h| h.secret.as_str()))
        .chain(resolved.api_keys.values().flatten().map(String::as_str))
        .chain(
            resolved
                .provider_headers
                .values()
                .flatten()
                .map(|(_, v)| v.as_str()),
        )
        .chain(url_credentials.iter().map(String::as_str))
        .map(botfleet_actors::safety::Secret::from)
        .collect();
    let mut notes = fleet_file.warnings();
    let f = &fleet_file.file;
    let listen: SocketAddr = f
        .host
        .listen
        .parse()
        .with_context(|| "the listen address must be IP:PORT, e.g. 127.0.0.1:7878")?;
    let users = resolved
        .tokens
        .into_iter()
        .map(|(id, token)| Ok((UserId::new(id)?, token)))
        .collect::<Result<Vec<_>, botfleet_memory::IdError>>()?;
    let hooks = resolved
        .hooks
        .into_iter()
        .map(|h| {
            let secret = api::HookSecret::new(h.secret, h.max_payload_bytes);
            // its timestamp tolerance and rate (src/api/hooks.rs)
            let secret = match f.hook(&h.bot, &h.name) {
                Some(config) => secret.with_config(config),
                None => secret,
            };
            (h.bot, h.name, secret)
        })
        .collect();
    let vault = botfleet_actors::Vault::new(
        resolved
            .secrets
            .into_iter()
            .map(|(name, value)| (name, botfleet_actors::safety::Secret::new(value))),
    )
    .with_host_secrets(host_secrets);

    // models
    let mut models: HashMap<String, Arc<dyn Model>> = HashMap::new();
    let mut scripted: HashMap<String, Arc<dyn Model>> = HashMap::new();
    for (name, script) in resolved.scripts {
        let model: Arc<dyn Model> = Arc::new(ScriptedModel::new(script));
        scripted.insert(name.clone(), model.clone());
        models.insert(name, model);
    }
    for (name, p) in &f.providers {
        if let ProviderConfig::Openai {
            base_url,
            model,
            api_key_env,
            timeout_s,
            call_timeout_s,
            max_response_bytes,
            stream,
            stream_usage,
            max_retries,
            max_tokens_field,
            fallback,
            headers,
            ..
        } = p
        {
            let key = resolved.api_keys.get(name).cloned().flatten();
            if let (Some(env), None) = (api_key_env, &key) {
                match fallback
                    .as_ref()
                    .and_then(|fb| scripted.get(fb).map(|m| (fb, m)))
                {
                    Some((fb, m)) => {
                        notes.push(format!(
                            "OFFLINE: provider {name:?} has no API key ({env} is not set); its bots use the scripted model {fb:?}"
                        ));
                        models.insert(name.clone(), m.clone());
                        continue;
                    }
                    None => bail!(
                        "{}: providers.{name}.api_key_env: environment variable {env} is not set; set it, or remove api_key_env for a server without keys",
                        fleet_file.source
                    ),
                }
            }
            let mut o = OpenAiOptions::new(base_url.clone(), model.clone());
            o.api_key = key;
            o.provider = Some(name.clone());
            // named in the advice of a refused key (`model/openai/advice.rs`)
            o.api_key_env = api_key_env.clone();
            // `headers_env`'s values were read (and trimmed) at start
            let from_env = resolved.provider_headers.get(name).into_iter().flatten();
            o.extra_headers = headers
                .iter()
                .map(|(n, v)| (n.clone(), v.trim().to_owned()))
                .chain(from_env.cloned())
                .collect();
            if let Some(t) = timeout_s {
                o.timeout = Duration::from_secs(*t);
            }
            // default: 300 s, or twice the silence allowed when that is more
            o.call_timeout = match call_timeout_s {
                Some(t) => Duration::from_secs(*t),
                None => o.call_timeout.max(o.timeout.saturating_mul(2)),
            };
            if let Some(n) = max_response_bytes {
                o.max_response_bytes = usize::try_from(*n).unwrap_or(usize::MAX);
            }
            if let Some(s) = stream {
                o.stream = *s;
            }
            if let Some(u) = stream_usage {
                o.stream_usage = *u;
            }
            if let Some(r) = max_retries {
                o.max_retries = *r;
            }
            if let Some(field) = max_tokens_field {
                // checked when fleet.toml was read (config_provider.rs)
                o.max_tokens_field = botfleet_actors::model::MaxTokensField::parse(field)
                    .map_err(|e| anyhow::anyhow!("providers.{name}.max_tokens_field: {e}"))?;
            }
            let m = OpenAiModel::new(o).with_context(|| format!("provider {name:?}"))?;
            // the endpoint without its userinfo: notes reach the log
            notes.push(format!(
                "provider {name:?}: {} at {}",
                m.describe(),
                m.endpoint()
            ));
            models.insert(name.clone(), Arc::new(m));
        }
    }
    for (name, m) in &scripted {
        if f.bots.iter().any(|b| &b.provider == name) {
            notes.push(format!(
                "OFFLINE: provider {name:?} is the scripted model ({})",
                m.describe()
            ));
        }
    }
    Ok(CheckedFleet {
        fleet: fleet_file,
        notes,
        listen,
        users,
        hooks,
        vault,
        models,
    })
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
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;

    // store, workspace, runtime
    let (_, workspace_dir) = notes::data_and_workspace(&f.host);
    let store = Store::open(StoreOptions {
        synchronous: f.host.synchronous,
        // remembered only while it holds files: a move to an empty one is
        // told at every start until the files follow
        workspace: holds_files(&workspace_dir)
            .then(|| workspace_dir.canonicalize().ok())
            .flatten()
            .map(|p| p.display().to_string()),
        ..StoreOptions::new(data_dir.join(notes::STORE_FILE))
    })
    .with_context(|| format!("cannot open the store in {}", data_dir.display()))?;
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
    // the error names the directory and what to do: one the host may not
    // write stops the start (its bots' file tools and Shell failed at
    // every call)
    let r = &f.runtime;
    let workspace =
        Workspace::open(&workspace_dir)?.with_min_free_disk_mb(r.tools_min_free_disk_mb);
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
    settings.tool_limits = ToolLimits {
        shell_default_timeout: Duration::from_secs(r.shell_timeout_s),
        shell_max_timeout: Duration::from_secs(r.shell_max_timeout_s),
        ..ToolLimits::default()
    };
    // the store is ours (its lock is held): what a host killed on this data
    // directory left running is killed before any of its turns resumes
    let shells = ShellRegistry::new(data_dir.join("shell"));
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
    banner.extend(notes);
    let now = chrono::Utc::now().timestamp_millis();
    let bots: Vec<BotRecord> = f
        .bots
        .iter()
        .map(|b| {
            Ok(BotRecord {
                id: BotId::new(b.id.clone())?,
                name: b.name.clone(),
                owner: UserId::new(b.owner.clone())?,
                role: b.role.clone(),
                provider: b.provider.clone(),
                tools: b.tools.clone(),
                // `shareable`: other users may add it to their rooms (actors/src/group/room.rs);
                // `projects`: the project memory scopes it reaches (botfleet_memory::bot_scopes)
                settings: {
                    let mut s = serde_json::Map::new();
                    if b.shareable {
                        s.insert("shareable".into(), true.into());
                    }
                    if !b.projects.is_empty() {
                        s.insert("projects".into(), serde_json::json!(b.projects));
                    }
                    // `secrets`: names its tools may use (actors/src/vault.rs)
                    if !b.secrets.is_empty() {
                        s.insert("secrets".into(), serde_json::json!(b.secrets));
                    }
                    // `daily_token_budget`: the engine pauses the bot when spent
                    if let Some(n) = b.daily_token_budget {
                        s.insert("daily_token_budget".into(), n.into());
                    }
                    serde_json::Value::Object(s)
                },
                origin: "config".into(),
                created_at: now,
                updated_at: now,
            })
        })
        .collect::<Result<_, botfleet_memory::IdError>>()?;
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
    // each owner's bots work in `<workspace>/<owner id>/`: what an older
    // version left at the root, shared by all bots, no bot sees any more;
    // say so (docs/operations.md, Upgrading), moving nothing
    let stored = fleet.store().list_bots(None).await?;
    let owners: Vec<&UserId> = users
        .iter()
        .map(|(user, _)| user)
        .chain(stored.iter().map(|b| &b.owner))
        .collect();
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
    let app = http_server::with_request_timeout(
        app,
        Duration::from_secs(f.host.request_timeout_s),
        LONG_LIVED_ROUTES,
    );
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
    Ok(RunningHost {
        fleet,
        addr,
        banner,
        scheduler,
        stop,
        server,
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

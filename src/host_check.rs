//! The fleet file checked as a start needs it ([`check`]), which is also
//! all `botfleet check-config` does: the file loaded with the command
//! line's overrides, what it refers to outside itself resolved, the
//! host's credentials gathered for scrubbing, its models built.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use anyhow::bail;
use botfleet_actors::model::Model;
use botfleet_actors::model::OpenAiModel;
use botfleet_actors::model::OpenAiOptions;
use botfleet_actors::model::ScriptedModel;
use botfleet_memory::UserId;

use super::HostOptions;
use crate::api;
use crate::config::LoadedFleet;
use crate::config::Overrides;
use crate::config::ProviderConfig;

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
    /// Where the host listens (`--listen`, or `host.listen`).
    pub listen: SocketAddr,
    pub(super) users: Vec<(UserId, String)>,
    pub(super) hooks: Vec<(String, String, api::HookSecret)>,
    pub(super) vault: botfleet_actors::Vault,
    pub(super) models: HashMap<String, Arc<dyn Model>>,
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
    notes.extend(shared_hook_secrets(&fleet_file.source, &resolved.hooks));
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
            // its timestamp tolerance and rate (src/api/hooks.rs), and
            // whether its payload limit is the host's body limit
            let secret = match f.hook(&h.bot, &h.name) {
                Some(config) => secret
                    .with_config(config)
                    .limited_by_host(config.payload_limited_by_host(f.host.max_body_bytes)),
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
            // the advice on a request past the model's window starts from it
            o.compact_at_tokens = p.context_keys().1;
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
    // a reviewer model gone offline (no key: its scripted fallback) cannot
    // judge, and sends every action the rules allow to a person: said at
    // the start, not first in an approval's reason (QA). A `scripted`
    // reviewer is a test's, which answers as its script says.
    if let Some(reviewer) = &f.review.reviewer
        && let Some(ProviderConfig::Openai { fallback, .. }) = f.providers.get(reviewer)
        && let Some(m) = models.get(reviewer)
        && scripted.values().any(|s| Arc::ptr_eq(s, m))
    {
        let fallback = fallback.as_deref().unwrap_or_default();
        notes.push(format!(
            "OFFLINE: the reviewer (review.reviewer = {reviewer:?}) is the scripted model \
             {fallback:?}, which cannot judge: the Shell commands and file writes the rules allow \
             wait for your approval (`botfleet approvals`)"
        ));
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

/// A warning per group of webhooks that share a secret: each accepts a
/// delivery signed for another (the signature covers the body, and the
/// timestamp, not the URL), and each remembers only its own signatures,
/// so a request captured on one is admitted when replayed to another.
/// Names the hooks (`bot/hook`, in the file's order), never the secret.
fn shared_hook_secrets(source: &str, hooks: &[crate::config::ResolvedHook]) -> Vec<String> {
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    for h in hooks {
        let name = format!("{}/{}", h.bot, h.name);
        match groups.iter_mut().find(|(secret, _)| *secret == h.secret) {
            Some((_, names)) => names.push(name),
            None => groups.push((&h.secret, vec![name])),
        }
    }
    groups
        .into_iter()
        .filter(|(_, names)| names.len() > 1)
        .map(|(_, mut names)| {
            let last = names.pop().unwrap_or_default();
            format!(
                "WARNING: {source}: webhooks {} and {last} share a secret: each accepts a \
                 delivery signed for another, and a request captured on one can be replayed \
                 to another (each remembers only its own deliveries); give each hook its own \
                 secret",
                names.join(", ")
            )
        })
        .collect()
}

//! The bounds of `[host]` and `[runtime]`: each number must leave a host
//! that works. Zero, where it would refuse every message or connection,
//! kill every command at once or forget every idempotency key within the
//! hour, is refused, and so are values past any use; every error names
//! its key. And the paths of `[host]`: not empty, and directories where
//! something already exists ([`LoadedFleet::check_dirs`]). What is
//! accepted but most likely not meant is a warning instead
//! ([`LoadedFleet::warnings`]).
//! `impl LoadedFleet`, split from `config_load.rs`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use super::ConfigError;
use super::LoadedFleet;
use super::RuntimeConfig;

/// Shortest `host.max_text_chars`: below it ordinary messages (a
/// paragraph, a pasted error line) would be refused.
pub(super) const MIN_TEXT_CHARS: usize = 100;
/// Fewest `host.max_body_bytes`.
pub(super) const MIN_BODY_BYTES: usize = 1024;
/// Fewest `runtime.context_entries`.
pub(super) const MIN_CONTEXT_ENTRIES: usize = 4;
/// Longest `runtime.debounce_max_ms`: a person waits that long for the
/// first reply to a burst of messages.
const MAX_DEBOUNCE_MS: u64 = 60_000;
/// Longest `runtime.ledger_retention_days` (ten years).
const MAX_LEDGER_DAYS: u64 = 3650;
/// Longest `host.header_timeout_s`: a client that sends nothing holds its
/// connection (a file descriptor) that long.
const MAX_HEADER_TIMEOUT_S: u64 = 600;
/// Longest `host.request_timeout_s`.
const MAX_REQUEST_TIMEOUT_S: u64 = 3600;
/// Fewest `host.max_connections`: the web page holds a `/v1/events`
/// stream open and makes its requests beside it.
pub(super) const MIN_CONNECTIONS: u32 = 4;
/// Most `host.max_connections`: each is a file descriptor, past any
/// process's usual limit.
const MAX_CONNECTIONS: u32 = 65_536;
/// Most `host.max_streams_per_user`: past any number of tabs a person
/// keeps open; each stream holds a connection.
const MAX_STREAMS_PER_USER: u32 = 1024;
/// Most `host.user_messages_per_minute`: a thousand a second, past what
/// any person types or a script of theirs needs; more would not limit a
/// flood at all.
const MAX_USER_MESSAGES_PER_MINUTE: u32 = 60_000;
/// Most `host.unknown_tokens_per_minute`: more would hardly slow a
/// guesser down.
const MAX_UNKNOWN_TOKENS_PER_MINUTE: u32 = 10_000;

impl LoadedFleet {
    /// What in `[runtime]` a host starts with but most likely does not do
    /// what the operator meant, one line each naming the key: printed by
    /// `botfleet check-config` and in the banner of `botfleet run`.
    pub fn warnings(&self) -> Vec<String> {
        let r = &self.file.runtime;
        let mut out = Vec::new();
        // a Task (or MessageSubagent) and its report are two hops, so a
        // budget of 1 refuses every one (`actors/src/tools/subagents.rs`)
        if r.max_hops < 2 {
            let delegating = self.bots_with_any(&["Task", "MessageSubagent"]);
            if !delegating.is_empty() {
                out.push(format!(
                    "WARNING: {}: key `runtime.max_hops` is {} but a subagent's task and its \
                     report need 2 hops: every Task of {} will be refused; set max_hops to at \
                     least 2, or take Task away from these bots",
                    self.source,
                    r.max_hops,
                    delegating.join(", ")
                ));
            }
        }
        // nothing to wait for nor stop: every call is refused (QA: the
        // host started without a word of it)
        for (key, max, tools, what) in [
            (
                "max_subagents",
                r.max_subagents,
                &["Task", "MessageSubagent"][..],
                "Task",
            ),
            (
                "max_created_agents",
                r.max_created_agents,
                &["CreateAgent"][..],
                "CreateAgent",
            ),
        ] {
            let users = self.bots_with_any(tools);
            if max == 0 && !users.is_empty() {
                out.push(format!(
                    "WARNING: {}: key `runtime.{key}` is 0: every {what} of {} will be \
                     refused; set {key} to at least 1, or take {what} away from these bots",
                    self.source,
                    users.join(", ")
                ));
            }
        }
        out.extend(self.project_case_warnings());
        out.extend(self.user_case_warnings());
        out
    }

    /// The ids of the fleet file's bots with any of `tools`.
    fn bots_with_any(&self, tools: &[&str]) -> Vec<&str> {
        self.file
            .bots
            .iter()
            .filter(|b| b.tools.iter().any(|t| tools.contains(&t.as_str())))
            .map(|b| b.id.as_str())
            .collect()
    }

    /// Users whose ids differ only in case, one line each pair. A warning,
    /// not a refusal: a fleet of an earlier version may hold them, and
    /// renaming a user orphans their conversations, memory and workspace
    /// (QA, 2026-12-05: a refusal stopped an upgrade). A room labels
    /// people by id (`bob (person)`), and a user's workspace is a
    /// directory named by it.
    fn user_case_warnings(&self) -> Vec<String> {
        let users = &self.file.users;
        let mut out = Vec::new();
        for (i, u) in users.iter().enumerate() {
            if let Some(j) = users[..i]
                .iter()
                .position(|o| o.id != u.id && o.id.eq_ignore_ascii_case(&u.id))
            {
                out.push(format!(
                    "WARNING: {}: key `users[{i}].id`: user {:?} differs from user {:?} \
                     (users[{j}].id) only in case: in a room one may pass for the other, and on \
                     a file system that ignores case (macOS, Windows) their workspaces are one \
                     directory; give new users ids that differ in more than case (renaming a \
                     user leaves their history under the old id)",
                    self.source, u.id, users[j].id
                ));
            }
        }
        out
    }

    /// Project names written in more than one case (`Apollo`, `apollo`):
    /// they are separate projects, whose bots share no memory, and most
    /// likely one project mistyped (bot and user ids must differ in more
    /// than case; project names are compared as written).
    fn project_case_warnings(&self) -> Vec<String> {
        // lowercase name -> spelling -> bots
        let mut names: BTreeMap<String, BTreeMap<&str, Vec<&str>>> = BTreeMap::new();
        for b in &self.file.bots {
            for p in &b.projects {
                names
                    .entry(p.to_lowercase())
                    .or_default()
                    .entry(p.as_str())
                    .or_default()
                    .push(b.id.as_str());
            }
        }
        names
            .values()
            .filter(|spellings| spellings.len() > 1)
            .map(|spellings| {
                let listed: Vec<String> = spellings
                    .iter()
                    .map(|(p, bots)| format!("{p:?} ({})", bots.join(", ")))
                    .collect();
                format!(
                    "WARNING: {}: the projects {} differ only in case: they are separate \
                     projects whose bots share no memory; write the name the same way in each \
                     bot's `projects`",
                    self.source,
                    listed.join(" and ")
                )
            })
            .collect()
    }

    /// Refuses `value` of `key` outside `lo..=hi` (`unit` after the
    /// bounds), saying why with `below` under the range, `above` over it.
    fn in_range(
        &self,
        key: &str,
        value: u64,
        (lo, hi): (u64, u64),
        unit: &str,
        below: &str,
        above: &str,
    ) -> Result<(), ConfigError> {
        if (lo..=hi).contains(&value) {
            return Ok(());
        }
        let why = if value < lo { below } else { above };
        Err(self.invalid(
            key,
            format!("is {value} but must be {lo} to {hi}{unit}{why}"),
        ))
    }

    /// Checks `[host]` and `[runtime]`.
    pub(super) fn validate_host_and_runtime(&self) -> Result<(), ConfigError> {
        let (h, r) = (&self.file.host, &self.file.runtime);
        if h.data_dir.as_os_str().is_empty() {
            return Err(self.invalid(
                "host.data_dir",
                "must not be empty: name a directory (it is created if missing), or leave the \
                 key out for ./botfleet-data",
            ));
        }
        if h.workspace
            .as_ref()
            .is_some_and(|w| w.as_os_str().is_empty())
        {
            return Err(self.invalid(
                "host.workspace",
                "must not be empty: name a directory (it is created if missing), or leave the \
                 key out for <data_dir>/workspace",
            ));
        }
        if h.listen.parse::<SocketAddr>().is_err() {
            return Err(self.invalid(
                "host.listen",
                format!(
                    "{:?} is not an address; expected IP:PORT such as \"127.0.0.1:7878\"",
                    h.listen
                ),
            ));
        }
        if h.max_body_bytes < MIN_BODY_BYTES {
            return Err(self.invalid(
                "host.max_body_bytes",
                format!("must be at least {MIN_BODY_BYTES}"),
            ));
        }
        if h.body_bytes_per_user < h.max_body_bytes {
            return Err(self.invalid(
                "host.body_bytes_per_user",
                format!(
                    "is {} but must be at least host.max_body_bytes ({}): a body that large \
                     could never arrive",
                    h.body_bytes_per_user, h.max_body_bytes
                ),
            ));
        }
        if h.max_text_chars < MIN_TEXT_CHARS {
            return Err(self.invalid(
                "host.max_text_chars",
                format!(
                    "is {} but must be at least {MIN_TEXT_CHARS}: shorter would refuse ordinary messages",
                    h.max_text_chars
                ),
            ));
        }
        self.in_range(
            "host.header_timeout_s",
            h.header_timeout_s,
            (1, MAX_HEADER_TIMEOUT_S),
            " seconds",
            ": with 0 every connection would be closed before its request",
            ": a client that sends nothing would hold its connection that long",
        )?;
        self.in_range(
            "host.request_timeout_s",
            h.request_timeout_s,
            (1, MAX_REQUEST_TIMEOUT_S),
            " seconds",
            ": with 0 every request would time out",
            " (an hour)",
        )?;
        self.in_range(
            "host.max_connections",
            h.max_connections.into(),
            (MIN_CONNECTIONS.into(), MAX_CONNECTIONS.into()),
            "",
            ": the web page holds one connection open for its event stream and needs more for \
             its requests",
            ": each connection is a file descriptor; keep it well under `ulimit -n`",
        )?;
        self.in_range(
            "host.max_streams_per_user",
            h.max_streams_per_user.into(),
            (1, MAX_STREAMS_PER_USER.into()),
            "",
            ": with 0 neither the web page nor a waiting `botfleet send` could follow changes",
            ": each stream holds a connection; a person needs one per open tab of the web page",
        )?;
        self.in_range(
            "host.user_messages_per_minute",
            h.user_messages_per_minute.into(),
            (1, MAX_USER_MESSAGES_PER_MINUTE.into()),
            "",
            ": with 0 every message of every user would be refused",
            ": more would not hold back one user's flood of messages, which every other \
             user's messages wait behind",
        )?;
        self.in_range(
            "host.unknown_tokens_per_minute",
            h.unknown_tokens_per_minute.into(),
            (1, MAX_UNKNOWN_TOKENS_PER_MINUTE.into()),
            "",
            ": with 0 a client would be shut out by its first mistyped token",
            ": more would hardly slow down a client guessing tokens",
        )?;
        if r.max_steps == 0 {
            return Err(self.invalid("runtime.max_steps", "must be at least 1"));
        }
        // a hop is one bot-to-bot message (a Task and its report are two);
        // the first is hop 1, so 0 refused every one
        if r.max_hops == 0 {
            return Err(self.invalid(
                "runtime.max_hops",
                "must be at least 1: 0 would refuse every message between bots \
                 (a subagent's task and its report need 2)",
            ));
        }
        if r.max_chain_messages == 0 {
            return Err(self.invalid(
                "runtime.max_chain_messages",
                "must be at least 1: 0 would refuse every message between bots",
            ));
        }
        if r.max_turn_attempts < 1 {
            return Err(self.invalid("runtime.max_turn_attempts", "must be at least 1"));
        }
        if r.context_entries < MIN_CONTEXT_ENTRIES {
            return Err(self.invalid(
                "runtime.context_entries",
                format!("must be at least {MIN_CONTEXT_ENTRIES}"),
            ));
        }
        if r.idle_timeout_s == 0 {
            return Err(self.invalid(
                "runtime.idle_timeout_s",
                "must be at least 1: 0 would put every bot to sleep as soon as it is idle",
            ));
        }
        if r.debounce_max_ms < r.debounce_ms {
            // named with both values: a file that raised only debounce_ms
            // was told of a key it never wrote (docs audit)
            let default = if r.debounce_max_ms == RuntimeConfig::default().debounce_max_ms {
                " (its default value)"
            } else {
                ""
            };
            return Err(self.invalid(
                "runtime.debounce_max_ms",
                format!(
                    "is {} ms{default} but must be at least runtime.debounce_ms ({} ms): raise runtime.debounce_max_ms too, or lower runtime.debounce_ms",
                    r.debounce_max_ms, r.debounce_ms
                ),
            ));
        }
        if r.debounce_max_ms > MAX_DEBOUNCE_MS {
            return Err(self.invalid(
                "runtime.debounce_max_ms",
                format!(
                    "is {} ms but must be at most {MAX_DEBOUNCE_MS} ms: a person would wait that long for a reply",
                    r.debounce_max_ms
                ),
            ));
        }
        if r.shell_max_timeout_s == 0 {
            return Err(self.invalid("runtime.shell_max_timeout_s", "must be at least 1"));
        }
        if r.shell_timeout_s == 0 {
            return Err(self.invalid(
                "runtime.shell_timeout_s",
                "must be at least 1: 0 would stop every Shell command that gives no timeout at once",
            ));
        }
        if r.shell_timeout_s > r.shell_max_timeout_s {
            return Err(self.invalid(
                "runtime.shell_timeout_s",
                format!(
                    "is {} s but must be at most runtime.shell_max_timeout_s ({} s)",
                    r.shell_timeout_s, r.shell_max_timeout_s
                ),
            ));
        }
        if !(1..=MAX_LEDGER_DAYS).contains(&r.ledger_retention_days) {
            return Err(self.invalid(
                "runtime.ledger_retention_days",
                format!(
                    "is {} but must be 1 to {MAX_LEDGER_DAYS}{}",
                    r.ledger_retention_days,
                    if r.ledger_retention_days == 0 {
                        ": with 0 a retried message would be answered `unknown` within the hour"
                    } else {
                        " (ten years)"
                    }
                ),
            ));
        }
        Ok(())
    }
}

impl LoadedFleet {
    /// Checks that `host.data_dir` and the workspace (`host.workspace`, or
    /// `<data_dir>/workspace`) can be directories: neither, nor the nearest
    /// part of its path that exists, is a file. A start would fail there
    /// (`File exists`, `Not a directory`) without naming the key.
    pub fn check_dirs(&self) -> Result<(), ConfigError> {
        let h = &self.file.host;
        if let Some(problem) = dir_problem(&h.data_dir) {
            return Err(self.invalid("host.data_dir", problem));
        }
        match &h.workspace {
            Some(w) => match dir_problem(w) {
                Some(problem) => Err(self.invalid("host.workspace", problem)),
                None => match self.workspace_overlap(w) {
                    Some(problem) => Err(self.invalid("host.workspace", problem)),
                    None => Ok(()),
                },
            },
            None => match dir_problem(&h.data_dir.join("workspace")) {
                Some(problem) => Err(self.invalid(
                    "host.data_dir",
                    format!("its workspace (host.workspace is not set): {problem}"),
                )),
                None => Ok(()),
            },
        }
    }
}

/// The entries of a data directory the host writes itself: a user's
/// workspace there would be the host's own files (the search index, the
/// transcript mirror, the Shell registry; and the store's files, named
/// from `fleet.db`).
const HOST_ENTRIES: [&str; 3] = ["index", botfleet_memory::MIRROR_DIR, "shell"];

impl LoadedFleet {
    /// Why `workspace` (`host.workspace`) may not be used with
    /// `host.data_dir`: each user works in `<workspace>/<user id>`, so a
    /// workspace that is the data directory, or inside one of the host's
    /// own directories in it, gives a user named `transcripts` the
    /// transcript mirror of every user, `index` the search index, `shell`
    /// the Shell registry (QA: a user `transcripts` read alice's
    /// transcripts with `cat`); and one that holds the data directory as a
    /// user's workspace gives that user the store.
    fn workspace_overlap(&self, workspace: &Path) -> Option<String> {
        let data = resolved(&self.file.host.data_dir);
        let ws = resolved(workspace);
        let fix = "name a directory apart from it, or leave the key out for <data_dir>/workspace";
        if ws == data {
            return Some(format!(
                "{} is the data directory (host.data_dir): each user works in \
                 <workspace>/<user id>, so a user named `transcripts`, `index` or `shell` would \
                 work in the host's own files; {fix}",
                workspace.display()
            ));
        }
        if let Ok(below) = ws.strip_prefix(&data)
            && let Some(first) = below.components().next()
        {
            let first = first.as_os_str().to_string_lossy();
            if HOST_ENTRIES.contains(&first.as_ref()) || first.starts_with("fleet.db") {
                return Some(format!(
                    "{} is inside the host's own `{first}` in the data directory \
                     (host.data_dir): a user's workspace there would be the host's files; {fix}",
                    workspace.display()
                ));
            }
        }
        if let Ok(below) = data.strip_prefix(&ws)
            && let Some(first) = below.components().next()
        {
            let first = first.as_os_str().to_string_lossy();
            if let Some(user) = self
                .file
                .users
                .iter()
                // as the file system names it: a user `data` is not
                // `/srv/Data`'s (review)
                .find(|u| u.id == first)
            {
                return Some(format!(
                    "{} holds the data directory (host.data_dir) as the workspace of user {:?} \
                     (<workspace>/<user id>): their bots would work in the host's store; {fix}",
                    workspace.display(),
                    user.id
                ));
            }
        }
        None
    }
}

/// `path` absolute, its `.` and `..` taken out, and the part of it that
/// exists with its links followed (a link to the data directory is it).
fn resolved(path: &Path) -> std::path::PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut clean = std::path::PathBuf::new();
    for c in absolute.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    // the longest existing ancestor, canonical, and the rest as written
    clean
        .ancestors()
        .find_map(|part| {
            let real = part.canonicalize().ok()?;
            Some(real.join(clean.strip_prefix(part).ok()?))
        })
        .unwrap_or(clean)
}

/// Why this user may not write in `dir`, the nearest existing part of
/// `path` (or `path` itself): to make `path` there, or its files.
fn not_writable(dir: &Path, path: &Path) -> Option<String> {
    use rustix::fs::Access;
    let refused = match rustix::fs::access(dir, Access::WRITE_OK | Access::EXEC_OK) {
        Err(e) => Some(e.to_string()),
        // allowed by its mode, but the file system may still refuse (a
        // read-only or virtual one, where root's access check passes): a
        // directory made and removed at once tells
        Ok(()) => {
            let probe = dir.join(format!(".botfleet-check-{}", std::process::id()));
            match std::fs::create_dir(&probe) {
                Ok(()) => {
                    let _ = std::fs::remove_dir(&probe);
                    None
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => None,
                Err(e) => Some(e.to_string()),
            }
        }
    };
    let why = refused?;
    Some(if dir == path {
        format!(
            "{} cannot be written by the host ({why}); it must be a directory the user running \
             botfleet can write: fix its owner and permissions (e.g. `chown -R $(id -un) {}` \
             and `chmod u+rwx {}`; remount a read-only disk read-write), or choose another \
             directory",
            path.display(),
            path.display(),
            path.display()
        )
    } else {
        format!(
            "{} cannot be made: {} is not writable by the user running botfleet ({why}); \
             make it and give it to this user, or choose another directory",
            path.display(),
            dir.display()
        )
    })
}

/// Why a directory could not be made at `path`, if it is plain: the path
/// or the nearest part of it that exists is not a directory (or is a
/// broken symbolic link), or this user may not write in it. Other errors
/// are left to the start, which reports them. (`check-config` passed a
/// data directory the start could neither make nor write, QA.)
pub fn dir_problem(path: &Path) -> Option<String> {
    use std::io::ErrorKind;
    for part in path.ancestors() {
        // a relative path ends in "": the current directory
        if part.as_os_str().is_empty() {
            return None;
        }
        match std::fs::metadata(part) {
            Ok(m) if m.is_dir() => return not_writable(part, path),
            Ok(_) if part == path => {
                return Some(format!("{} exists and is not a directory", path.display()));
            }
            Ok(_) => {
                return Some(format!(
                    "{} is not a directory, so {} cannot be made in it",
                    part.display(),
                    path.display()
                ));
            }
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                if std::fs::symlink_metadata(part).is_ok_and(|m| m.is_symlink()) {
                    return Some(format!(
                        "{} is a symbolic link to something that does not exist",
                        part.display()
                    ));
                }
            }
            // a part this user may not enter (another user's 0700 home):
            // nothing below it can be made (QA: said ok, and run failed)
            Err(e) if e.kind() == ErrorKind::PermissionDenied => {
                return Some(format!(
                    "{} cannot be made: the user running botfleet cannot reach {} ({e}), a \
                     directory above it being closed to that user; choose a directory this \
                     user can reach",
                    path.display(),
                    part.display()
                ));
            }
            Err(_) => return None,
        }
    }
    None
}

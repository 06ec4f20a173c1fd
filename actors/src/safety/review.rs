//! Auto-review: a reviewer of the *exact* action a tool call would take,
//! before it takes it (DESIGN.md §8, seed 002 §2, seed 000 §4.1).
//!
//! A reviewed call falls on one [`ReviewSurface`] (workspace shell, file
//! writes outside the bot's notes area, MCP/script tools, subagent launch,
//! delivery to third parties, automation writes), each with a
//! [`ReviewMode`]: `off`, `shadow` (decide and log, never block) or
//! `enforce`. The reviewer sees an [`Action`]: the tool, its canonical
//! arguments and — for `npm run X`, `make X`, `./script.sh`, `bash x.sh`,
//! `python x.py` and the like — the text of the scripts the command would
//! run, with their hashes ([`ResolvedScript`]).
//!
//! Two reviewers, the stricter wins:
//! - **rules** ([`review_rules`]): destructive commands, reading
//!   credentials, sending data to paste sites / anonymous file hosts /
//!   hosts not on the allowlist, piping downloads into a shell. Pure and
//!   synchronous: microseconds.
//! - an optional **reviewer model** ([`review_with_model`]) through the same
//!   [`Model`] trait (`Purpose::Review`), asked only when the rules allow;
//!   it answers strict JSON and fails closed to [`ReviewDecision::Ask`].

use std::fmt::Write as _;
use std::time::Duration;

use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;
use sha2::Digest;
use sha2::Sha256;

use super::patterns;
use super::patterns::HostAllowlist;
use super::shell_rules;

#[path = "review_model.rs"]
mod model;

pub use model::Reviewer;
#[cfg(test)]
pub(crate) use model::parse_verdict;
pub use model::review_with_model;

/// How a surface is reviewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ReviewMode {
    /// Not reviewed.
    Off,
    /// Reviewed and logged; never blocks.
    Shadow,
    /// Reviewed; `ask` waits for a person, `deny` refuses.
    #[default]
    Enforce,
}

impl ReviewMode {
    /// Stable text form (as in fleet.toml).
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewMode::Off => "off",
            ReviewMode::Shadow => "shadow",
            ReviewMode::Enforce => "enforce",
        }
    }
}

/// Where a side effect happens; each has its own mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewSurface {
    /// Shell commands in the workspace.
    Shell,
    /// Write/Edit outside the bot's notes area.
    FileWrite,
    /// MCP and script tools (and any tool the host does not know).
    Extension,
    /// Starting a subagent (Task).
    SubagentLaunch,
    /// Delivery to third parties: other bots (SendToAgent), rooms shared
    /// with other users.
    Delivery,
    /// Creating or changing agents and automations.
    Automation,
}

impl ReviewSurface {
    /// Every surface.
    pub const ALL: [ReviewSurface; 6] = [
        ReviewSurface::Shell,
        ReviewSurface::FileWrite,
        ReviewSurface::Extension,
        ReviewSurface::SubagentLaunch,
        ReviewSurface::Delivery,
        ReviewSurface::Automation,
    ];

    /// Stable text form (the fleet.toml key under `[review]`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewSurface::Shell => "shell",
            ReviewSurface::FileWrite => "file_write",
            ReviewSurface::Extension => "extension",
            ReviewSurface::SubagentLaunch => "subagent",
            ReviewSurface::Delivery => "delivery",
            ReviewSurface::Automation => "automation",
        }
    }
}

/// The mode of each surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReviewModes {
    /// Shell.
    pub shell: ReviewMode,
    /// Write/Edit outside the notes area.
    pub file_write: ReviewMode,
    /// MCP and script tools.
    pub extension: ReviewMode,
    /// Task.
    pub subagent: ReviewMode,
    /// Delivery to third parties.
    pub delivery: ReviewMode,
    /// Agent and automation writes.
    pub automation: ReviewMode,
}

impl ReviewModes {
    /// Every surface in one mode.
    pub fn all(mode: ReviewMode) -> Self {
        Self {
            shell: mode,
            file_write: mode,
            extension: mode,
            subagent: mode,
            delivery: mode,
            automation: mode,
        }
    }

    /// The mode of a surface.
    pub fn get(&self, surface: ReviewSurface) -> ReviewMode {
        match surface {
            ReviewSurface::Shell => self.shell,
            ReviewSurface::FileWrite => self.file_write,
            ReviewSurface::Extension => self.extension,
            ReviewSurface::SubagentLaunch => self.subagent,
            ReviewSurface::Delivery => self.delivery,
            ReviewSurface::Automation => self.automation,
        }
    }
}

/// Review settings of a fleet (`[review]` in fleet.toml).
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewConfig {
    /// Mode per surface (default: enforce everywhere).
    pub modes: ReviewModes,
    /// Hosts that may receive data without asking (loopback always may).
    pub allow_hosts: HostAllowlist,
    /// Provider name of the reviewer model, if any.
    pub reviewer: Option<String>,
    /// Longest a reviewer model call may take before it counts as a
    /// failure (then the action is asked about).
    pub reviewer_timeout: Duration,
    /// Time to live of a pending approval, and the use window of an
    /// approved one.
    pub approval_ttl: Duration,
    /// Most pending approvals per bot.
    pub max_pending: u32,
    /// The workspace folder holding each bot's notes area
    /// (`<notes_dir>/<bot id>/`): writes there are not reviewed.
    pub notes_dir: String,
}

impl Default for ReviewConfig {
    fn default() -> Self {
        Self {
            modes: ReviewModes::default(),
            allow_hosts: HostAllowlist::default(),
            reviewer: None,
            reviewer_timeout: Duration::from_secs(30),
            approval_ttl: Duration::from_secs(10 * 60),
            max_pending: 4,
            notes_dir: "notes".into(),
        }
    }
}

/// The outcome of a review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ReviewDecision {
    /// Nothing of concern: run it.
    Allow,
    /// A person must approve this exact action first.
    Ask {
        /// What the reviewer is concerned about, for the person and the
        /// model.
        reason: String,
    },
    /// Refused outright (no legitimate use in a workspace); not offered
    /// for approval.
    Deny {
        /// Why.
        reason: String,
    },
}

impl ReviewDecision {
    fn rank(&self) -> u8 {
        match self {
            ReviewDecision::Allow => 0,
            ReviewDecision::Ask { .. } => 1,
            ReviewDecision::Deny { .. } => 2,
        }
    }

    /// The stricter of two decisions (the first on a tie).
    pub fn stricter(self, other: ReviewDecision) -> ReviewDecision {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }

    /// Short name: `allow`, `ask`, `deny`.
    pub fn name(&self) -> &'static str {
        match self {
            ReviewDecision::Allow => "allow",
            ReviewDecision::Ask { .. } => "ask",
            ReviewDecision::Deny { .. } => "deny",
        }
    }

    /// The reason, if not allowed.
    pub fn reason(&self) -> Option<&str> {
        match self {
            ReviewDecision::Allow => None,
            ReviewDecision::Ask { reason } | ReviewDecision::Deny { reason } => Some(reason),
        }
    }
}

/// What a resolved script is, for review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptKind {
    /// Shell text (a shell script, a package.json script, a Makefile
    /// recipe): reviewed like a command.
    Shell,
    /// Source of another interpreter (Python, Node, ...): scanned as text.
    Program,
    /// Not text (a compiled program): only its hash is bound.
    Binary,
    /// Named by the command but absent (it may be created by the command).
    Missing,
    /// Too large to review.
    TooLarge,
}

/// A script a command would run, as read when reviewed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedScript {
    /// What runs it (`npm run deploy`, `make release`, `./deploy.sh`).
    pub origin: String,
    /// The file it came from, relative to the workspace.
    pub path: String,
    /// What it is.
    pub kind: ScriptKind,
    /// The reviewed text (the script, the package.json scripts, the
    /// recipe); empty for binaries and missing files. An approval's
    /// action shows it, scrubbed of the bot's secrets and then cut to
    /// [`SHOWN_SCRIPT_CHARS`] characters ([`shown_script`]), so the person
    /// deciding reads what would run (it showed only the path and hash:
    /// QA); it is never read back.
    #[serde(skip_deserializing)]
    pub text: String,
    /// Hex SHA-256 of the bound content (the whole file; for npm, the
    /// scripts that run). An approval binds this.
    pub sha256: String,
}

/// Characters of a script's text an approval's action shows.
pub const SHOWN_SCRIPT_CHARS: usize = 4000;

/// A script's text as an approval shows it, already scrubbed of secrets
/// (a secret the cut went through would show its start): its first
/// [`SHOWN_SCRIPT_CHARS`] characters, and a line saying how much is left
/// out (the approval binds the whole file by its hash).
pub fn shown_script(text: &str) -> String {
    match text.char_indices().nth(SHOWN_SCRIPT_CHARS) {
        None => text.to_owned(),
        Some((at, _)) => format!(
            "{}\n… ({} more characters, not shown; the approval binds the whole file by its \
             sha256)",
            &text[..at],
            text[at..].chars().count()
        ),
    }
}

/// The exact action a tool call would take.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Action {
    /// The tool.
    pub tool: String,
    /// The surface it falls on.
    pub surface: ReviewSurface,
    /// Its arguments (without those that do not change the effect, e.g. a
    /// Shell timeout).
    pub args: Value,
    /// One line for people.
    pub summary: String,
    /// Scripts the action runs, resolved at review time.
    pub scripts: Vec<ResolvedScript>,
    /// The names of the bot's own secrets, which every command gets as
    /// environment variables: secret names to the rules whatever they
    /// look like. Not part of the action's identity ([`Action::fingerprint`]).
    pub secret_names: Vec<String>,
}

impl Action {
    /// Hex SHA-256 of the tool, the canonical arguments and the hashes of
    /// the resolved scripts: equal fingerprints are the same action.
    pub fn fingerprint(&self) -> String {
        let mut text = String::with_capacity(256);
        text.push_str(&self.tool);
        text.push('\0');
        canonical_json(&self.args, &mut text);
        for s in &self.scripts {
            let _ = write!(text, "\0{}\0{}\0{}", s.origin, s.path, s.sha256);
        }
        hex::encode(Sha256::digest(text.as_bytes()))
    }

    /// The card's details: arguments and scripts (path, kind, hash).
    pub fn details(&self) -> Value {
        serde_json::json!({
            "tool": self.tool,
            "surface": self.surface,
            "args": self.args,
            "scripts": self.scripts,
        })
    }
}

/// JSON with object keys sorted at every level, whatever serde_json's map
/// order is.
pub fn canonical_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(k) {
                    canonical_json(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(v, out);
            }
            out.push(']');
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
            out.push_str(&value.to_string());
        }
    }
}

/// Concerns found by the rules; the decision is the most severe, with the
/// first reason of that severity.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    deny: Vec<String>,
    ask: Vec<String>,
}

impl Findings {
    pub(crate) fn ask(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if !self.ask.contains(&reason) {
            self.ask.push(reason);
        }
    }

    pub(crate) fn deny(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if !self.deny.contains(&reason) {
            self.deny.push(reason);
        }
    }

    /// Takes the concerns of a script `origin` runs, naming it.
    pub(crate) fn absorb(&mut self, inner: Findings, origin: &str) {
        for r in inner.deny {
            self.deny(format!("{origin} runs a script that {r}"));
        }
        for r in inner.ask {
            self.ask(format!("{origin} runs a script that {r}"));
        }
    }

    pub(crate) fn decision(self) -> ReviewDecision {
        fn join(mut reasons: Vec<String>) -> String {
            match reasons.len() {
                0 | 1 => reasons.pop().unwrap_or_default(),
                n => format!("{}; and {} more concern(s)", reasons.remove(0), n - 1),
            }
        }
        if !self.deny.is_empty() {
            ReviewDecision::Deny {
                reason: join(self.deny),
            }
        } else if !self.ask.is_empty() {
            ReviewDecision::Ask {
                reason: join(self.ask),
            }
        } else {
            ReviewDecision::Allow
        }
    }
}

/// The rules' decision on an action (pure; microseconds).
pub fn review_rules(action: &Action, config: &ReviewConfig) -> ReviewDecision {
    patterns::with_secret_names(&action.secret_names, || rules_of(action, config))
}

/// [`review_rules`] with the bot's secret names in place.
fn rules_of(action: &Action, config: &ReviewConfig) -> ReviewDecision {
    let mut findings = Findings::default();
    let text_of = |key: &str| action.args.get(key).and_then(Value::as_str).unwrap_or("");
    match action.surface {
        // a Read of credentials (`gate::review_surface`): the rule of
        // `cat` on the same file
        ReviewSurface::Shell if action.tool == "Read" => {
            let path = text_of("path");
            if let Some(what) = patterns::credential_in(path) {
                findings.ask(format!("reads {what} ({path})"));
            } else {
                findings.ask(format!("reads credentials through a link ({path})"));
            }
        }
        ReviewSurface::Shell => {
            shell_rules::review_command(
                text_of("command"),
                &action.scripts,
                &config.allow_hosts,
                &mut findings,
            );
        }
        ReviewSurface::FileWrite => {
            let path = text_of("path");
            if let Some(what) = patterns::credential_in(path) {
                findings.ask(format!("writes {what} ({path})"));
            }
            if let Some(what) = sensitive_write_target(path) {
                findings.ask(format!("changes {what} ({path})"));
            }
            let content = format!("{}{}", text_of("content"), text_of("new_text"));
            if let Some(what) = patterns::secret_material_in(&content) {
                findings.ask(format!("writes {what} into the workspace"));
            }
        }
        ReviewSurface::Extension => {
            let mut strings = Vec::new();
            collect_strings(&action.args, &mut strings);
            for s in strings {
                scan_text(s, &config.allow_hosts, true, &mut findings);
            }
        }
        ReviewSurface::SubagentLaunch | ReviewSurface::Delivery | ReviewSurface::Automation => {
            let mut strings = Vec::new();
            collect_strings(&action.args, &mut strings);
            for s in strings {
                if let Some(what) = patterns::secret_material_in(s) {
                    findings.ask(format!("passes on {what}"));
                }
            }
        }
    }
    findings.decision()
}

/// What credentials `path` names, if it names any (the paths the Shell
/// rules ask about reading: `.ssh/`, `id_rsa`, `.env`…).
pub fn credential_path(path: &str) -> Option<&'static str> {
    patterns::credential_in(path)
}

/// Files whose change makes something run later (git internals — hooks
/// and config run commands on git commands, in any repository of the
/// workspace —, CI pipelines, shell start-up files: the workspace is HOME
/// for Shell), wherever they are in the workspace: what they are, if the
/// path is one.
pub fn sensitive_write_target(path: &str) -> Option<&'static str> {
    let parts: Vec<&str> = path
        .split(['/', '\\'])
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let name = parts.last().copied().unwrap_or("");
    let is = |part: &str, want: &str| part.eq_ignore_ascii_case(want);
    if parts.iter().any(|p| is(p, ".git")) {
        Some("git internals (hooks and config run commands on git commands)")
    } else if parts
        .windows(2)
        .any(|w| is(w[0], ".github") && is(w[1], "workflows"))
        || is(name, ".gitlab-ci.yml")
    {
        Some("a CI pipeline")
    } else if is(name, ".gitconfig")
        || is(name, ".gitmodules")
        || parts
            .windows(2)
            .any(|w| is(w[0], ".config") && is(w[1], "git"))
    {
        // git reads ~/.gitconfig and ~/.config/git/config (the workspace is
        // HOME): core.fsmonitor, core.pager, aliases… run commands on the
        // git commands review allows (QA)
        Some("git configuration (its settings run commands on git commands)")
    } else if matches!(
        name,
        ".bashrc"
            | ".bash_profile"
            | ".bash_login"
            | ".profile"
            | ".zshrc"
            | ".zshenv"
            | ".zprofile"
            | ".zlogin"
            | ".bash_logout"
            | ".cshrc"
            | ".tcshrc"
            | ".kshrc"
            | ".envrc"
    ) || parts
        .windows(2)
        .any(|w| is(w[0], ".config") && is(w[1], "fish"))
    {
        Some("a shell start-up file")
    } else if [
        ".curlrc",
        ".wgetrc",
        ".netrc",
        ".npmrc",
        ".yarnrc",
        ".yarnrc.yml",
        ".pypirc",
        "pip.conf",
        "pip.ini",
    ]
    .iter()
    .any(|rc| is(name, rc))
    {
        // read by every run of the tool: `data = "@file"` in .curlrc
        // uploads a file with a plain `curl URL` (QA), .npmrc and pip.conf
        // change where packages come from, .yarnrc.yml's yarnPath runs code
        Some("a tool's configuration file (read by every run of curl, wget, npm, pip…)")
    } else {
        None
    }
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Scans text that is not shell (a Python script, an MCP argument): credentials named or
/// contained, paste-site URLs (when `hosts`), `rm -rf /`.
pub(crate) fn scan_text(text: &str, allow: &HostAllowlist, hosts: bool, findings: &mut Findings) {
    for word in text
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '(' | ')' | ',' | '=' | '`'))
    {
        if let Some(what) = patterns::credential_in(word) {
            findings.ask(format!("reads {what} ({word})"));
        }
    }
    if let Some(what) = patterns::secret_material_in(text) {
        findings.ask(format!("contains {what}"));
    }
    if hosts {
        for host in patterns::url_hosts(text) {
            if patterns::is_paste_host(&host) && !allow.allows(&host) {
                findings.ask(format!(
                    "sends to {host}, a paste site or anonymous file host"
                ));
            }
        }
    }
    if text.contains("rm -rf / ") || text.ends_with("rm -rf /") || text.contains("rm -rf /\"") {
        findings.deny("deletes the whole file system (rm -rf /)");
    }
}

#[cfg(test)]
#[path = "review_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "review_wrappers_tests.rs"]
mod wrappers_tests;

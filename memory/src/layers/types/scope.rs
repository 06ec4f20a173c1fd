//! Scopes: whose memory a fact is (`agent:<bot>`, `user:<user>`,
//! `project:<name>`) and which scopes a bot reaches.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;
use serde::Serialize;

use crate::ids::BotId;
use crate::ids::IdError;
use crate::ids::ProjectId;
use crate::ids::UserId;
use crate::record::BotRecord;

/// What kind of scope instance a fact belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeKind {
    /// One bot.
    Agent,
    /// All bots of one user.
    User,
    /// The bots that joined one project.
    Project,
}

impl ScopeKind {
    /// Stable text form (stored).
    pub fn as_str(self) -> &'static str {
        match self {
            ScopeKind::Agent => "agent",
            ScopeKind::User => "user",
            ScopeKind::Project => "project",
        }
    }

    /// Parses the stored text form.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "agent" => ScopeKind::Agent,
            "user" => ScopeKind::User,
            "project" => ScopeKind::Project,
            _ => return None,
        })
    }
}

/// One scope instance: whose memory a fact is. Written `agent:<bot>`,
/// `user:<user>` or `project:<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryScope {
    /// One bot's own memory (its work log, what it learned for itself).
    Agent(BotId),
    /// What every bot of a user knows about that user.
    User(UserId),
    /// What the bots of a project share.
    Project(ProjectId),
}

impl MemoryScope {
    /// The kind of scope.
    pub fn kind(&self) -> ScopeKind {
        match self {
            MemoryScope::Agent(_) => ScopeKind::Agent,
            MemoryScope::User(_) => ScopeKind::User,
            MemoryScope::Project(_) => ScopeKind::Project,
        }
    }

    /// The bot, user or project name.
    pub fn key(&self) -> &str {
        match self {
            MemoryScope::Agent(b) => b.as_str(),
            MemoryScope::User(u) => u.as_str(),
            MemoryScope::Project(p) => p.as_str(),
        }
    }

    /// From the stored kind and key.
    pub fn from_parts(kind: ScopeKind, key: &str) -> Result<Self, IdError> {
        Ok(match kind {
            ScopeKind::Agent => MemoryScope::Agent(BotId::new(key)?),
            ScopeKind::User => MemoryScope::User(UserId::new(key)?),
            ScopeKind::Project => MemoryScope::Project(ProjectId::new(key)?),
        })
    }
}

impl fmt::Display for MemoryScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind().as_str(), self.key())
    }
}

impl FromStr for MemoryScope {
    type Err = IdError;

    fn from_str(s: &str) -> Result<Self, IdError> {
        let bad = || IdError {
            what: "memory scope",
            value: s.to_owned(),
            why: "expected agent:<bot>, user:<user> or project:<name>",
        };
        let (kind, key) = s.split_once(':').ok_or_else(bad)?;
        let kind = ScopeKind::parse(kind).ok_or_else(bad)?;
        Self::from_parts(kind, key)
    }
}

impl Serialize for MemoryScope {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MemoryScope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The scopes a bot reaches, in the fixed order the prompt shows them:
/// its own (agent), its owner's (user), then its projects by name. The
/// projects come from `settings.projects` (fleet.toml `projects = [...]`);
/// names that do not validate are skipped with a warning.
pub fn bot_scopes(bot: &BotRecord) -> Vec<MemoryScope> {
    let mut scopes = vec![
        MemoryScope::Agent(bot.id.clone()),
        MemoryScope::User(bot.owner.clone()),
    ];
    scopes.extend(bot_projects(bot).into_iter().map(MemoryScope::Project));
    scopes
}

/// The projects a bot joined (`settings.projects`), sorted, without
/// duplicates. A removed bot (taken out of fleet.toml, or deleted) is in
/// none: its owner reads and forgets nothing of a project through it
/// (QA: bob, whose only apollo bot was removed, still listed and forgot
/// what apollo's members remembered after it left).
pub fn bot_projects(bot: &BotRecord) -> Vec<ProjectId> {
    if bot.removed_at().is_some() {
        return Vec::new();
    }
    let mut out: Vec<ProjectId> = bot
        .settings
        .get("projects")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| match v.as_str().map(ProjectId::new) {
            Some(Ok(p)) => Some(p),
            Some(Err(e)) => {
                tracing::warn!(bot = %bot.id, error = %e, "ignoring an invalid project name");
                None
            }
            None => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

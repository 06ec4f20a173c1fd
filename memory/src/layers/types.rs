//! The vocabulary of memory: scopes, layers, ids, items, the operations a
//! scope accepts and what they answer.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;
use serde::Serialize;
use sha2::Digest;
use sha2::Sha256;

use crate::ids::BotId;
use crate::ids::IdError;
use crate::ids::ProjectId;
use crate::ids::UserId;
use crate::record::BotRecord;

/// Most facts in the profile of one scope instance.
pub const MAX_PROFILE_FACTS: usize = 100;
/// Most characters (Unicode scalar values) in the profile of one scope
/// instance, all facts together.
pub const MAX_PROFILE_CHARS: usize = 4000;
/// Longest single profile fact, in characters.
pub const MAX_FACT_CHARS: usize = 500;
/// Longest log entry or note, in characters.
pub const MAX_ENTRY_CHARS: usize = 1000;
/// Most log entries kept per scope instance.
pub const MAX_LOG_ENTRIES: usize = 1000;
/// Most live (unexpired) notes per scope instance.
pub const MAX_LIVE_NOTES: usize = 50;
/// Lifetime of a note when none is given, in hours.
pub const DEFAULT_NOTE_HOURS: u32 = 24;
/// Longest lifetime of a note, in hours (30 days).
pub const MAX_NOTE_HOURS: u32 = 24 * 30;
/// How many facts a refusal suggests replacing.
pub const SUGGESTIONS: usize = 5;

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
/// duplicates.
pub fn bot_projects(bot: &BotRecord) -> Vec<ProjectId> {
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

/// A layer of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// Stable facts, always in the prompt (≤100 facts, ≤4000 characters).
    Profile,
    /// Dated entries; the prompt takes the most relevant ones.
    Log,
    /// Short-lived working facts with an expiry.
    Notes,
}

impl Layer {
    /// Stable text form (stored).
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Profile => "profile",
            Layer::Log => "log",
            Layer::Notes => "notes",
        }
    }

    /// Parses the stored text form (`note` is accepted for `notes`).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "profile" => Layer::Profile,
            "log" => Layer::Log,
            "notes" | "note" => Layer::Notes,
            _ => return None,
        })
    }

    /// Longest text of one item of this layer, in characters.
    pub fn max_item_chars(self) -> usize {
        match self {
            Layer::Profile => MAX_FACT_CHARS,
            Layer::Log | Layer::Notes => MAX_ENTRY_CHARS,
        }
    }

    /// The scope kind a write goes to when the writer names none: facts
    /// about the person are shared by all their bots (user), a bot's work
    /// log and working notes are its own (agent).
    pub fn default_scope_kind(self) -> ScopeKind {
        match self {
            Layer::Profile => ScopeKind::User,
            Layer::Log | Layer::Notes => ScopeKind::Agent,
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much an item matters, 1 (trivia) to 5 (critical); 3 by default.
/// Weighs log entries in recall and orders replacement suggestions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub struct Importance(u8);

impl Importance {
    /// The default, 3.
    pub const NORMAL: Importance = Importance(3);

    /// Validates 1..=5.
    pub fn new(value: u8) -> Result<Self, IdError> {
        if (1..=5).contains(&value) {
            Ok(Self(value))
        } else {
            Err(IdError {
                what: "importance",
                value: value.to_string(),
                why: "use an integer from 1 (trivia) to 5 (critical)",
            })
        }
    }

    /// The value, 1..=5.
    pub fn get(self) -> u8 {
        self.0
    }

    /// Recall weight: 0.5, 0.75, 1, 1.5, 2 for importance 1..=5.
    pub fn weight(self) -> f64 {
        match self.0 {
            1 => 0.5,
            2 => 0.75,
            4 => 1.5,
            5 => 2.0,
            _ => 1.0,
        }
    }
}

impl Default for Importance {
    fn default() -> Self {
        Self::NORMAL
    }
}

impl TryFrom<u8> for Importance {
    type Error = IdError;
    fn try_from(v: u8) -> Result<Self, IdError> {
        Self::new(v)
    }
}

impl From<Importance> for u8 {
    fn from(i: Importance) -> u8 {
        i.0
    }
}

/// Alphabet of memory ids (RFC 4648 base32, lowercase).
const ID_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// Characters after the `m-` prefix.
const ID_CHARS: usize = 12;

/// The id of a memory item: `m-` and 12 base32 characters (60 bits),
/// short so that the prompt can show it beside every fact.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MemoryId(String);

impl MemoryId {
    /// The id derived from `seed`: the same seed always gives the same id,
    /// so a write retried after a crash finds its own earlier result.
    pub fn derive(seed: &str) -> Self {
        let digest = Sha256::digest(seed.as_bytes());
        let mut bits: u64 = 0;
        for b in &digest[..8] {
            bits = (bits << 8) | u64::from(*b);
        }
        let mut s = String::with_capacity(2 + ID_CHARS);
        s.push_str("m-");
        for i in 0..ID_CHARS {
            let v = (bits >> (64 - 5 * (i + 1))) & 31;
            s.push(char::from(ID_ALPHABET[v as usize]));
        }
        Self(s)
    }

    /// A fresh random id.
    pub fn random() -> Self {
        Self::derive(&uuid::Uuid::new_v4().to_string())
    }

    /// Validates an id. Brackets, quotes and spaces a model may copy around
    /// it are tolerated.
    pub fn parse(s: &str) -> Result<Self, IdError> {
        let t = s
            .trim()
            .trim_matches(|c| matches!(c, '[' | ']' | '"' | '\'' | '`'));
        let ok = t.len() == 2 + ID_CHARS
            && t.starts_with("m-")
            && t.bytes().skip(2).all(|b| ID_ALPHABET.contains(&b));
        if ok {
            Ok(Self(t.to_owned()))
        } else {
            Err(IdError {
                what: "memory id",
                value: s.to_owned(),
                why: "expected m- and 12 characters a-z or 2-7, e.g. m-abcdefgh2345",
            })
        }
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for MemoryId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        Self::parse(s)
    }
}

impl TryFrom<String> for MemoryId {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        Self::parse(&s)
    }
}

impl From<MemoryId> for String {
    fn from(id: MemoryId) -> String {
        id.0
    }
}

/// A stored memory item (a profile fact, a log entry or a note).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryItem {
    /// Id.
    pub id: MemoryId,
    /// Whose memory it is.
    pub scope: MemoryScope,
    /// Which layer.
    pub layer: Layer,
    /// The fact, whitespace collapsed to single spaces.
    pub text: String,
    /// How much it matters.
    pub importance: Importance,
    /// Who wrote it, and where when that decides who may see it:
    /// `tool:<bot>` (Remember), `tool:<bot>@room:<room>` (Remember in a
    /// room shared with other people's bots: only that room's prompts
    /// show it there), `extract:<bot>`, `api:<user>`. A replace sets the
    /// replacing writer's.
    pub source: String,
    /// When it was written (ms); the date of a log entry.
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
    /// When a note expires (ms); `None` for profile and log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// Marks a `source` written in a shared room: `tool:<bot>@room:<room>`.
const ROOM_SOURCE: &str = "@room:";

/// Whether an item written by `source` is shown where items of `reader`
/// are: a shared room's items only in that room (the same source), every
/// other item wherever its scope is shown.
pub(crate) fn visible_from(source: &str, reader: &str) -> bool {
    !reader.contains(ROOM_SOURCE) || source == reader
}

impl MemoryItem {
    /// Characters of the text.
    pub fn chars(&self) -> usize {
        self.text.chars().count()
    }

    /// Whether the item is a note whose expiry has passed at `now_ms`.
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.expires_at.is_some_and(|t| t <= now_ms)
    }
}

/// A new item to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMemory {
    /// Id (derive it from the call that writes it, so a retry is a no-op).
    pub id: MemoryId,
    /// Scope.
    pub scope: MemoryScope,
    /// Layer.
    pub layer: Layer,
    /// Text (whitespace is collapsed when stored).
    pub text: String,
    /// Importance.
    pub importance: Importance,
    /// Expiry (ms) — required for notes, refused for other layers.
    pub expires_at: Option<i64>,
    /// Who writes it.
    pub source: String,
}

/// One write to one scope instance, applied by the store writer (limits
/// are checked inside the transaction, so no two writers can both take the
/// last slot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryOp {
    /// Add an item. An item with the same id and text, or with the same
    /// text in the same scope and layer, answers `Unchanged`.
    Add(NewMemory),
    /// Replace the text (and optionally the importance) of an item.
    Replace {
        /// The item.
        id: MemoryId,
        /// The scope the caller believes it is in (refused if it is not).
        scope: MemoryScope,
        /// New text.
        text: String,
        /// New importance, or keep.
        importance: Option<Importance>,
        /// Who writes it.
        source: String,
    },
    /// Delete an item for good (its text is overwritten in the database
    /// pages, only its id is kept to answer a repeated forget).
    Remove {
        /// The item.
        id: MemoryId,
        /// The scope the caller believes it is in (refused if it is not).
        scope: MemoryScope,
    },
    /// Like `Remove`, and keeps which tool call forgot the item: a call
    /// run again after a crash finds what it already forgot
    /// ([`Store::memory_forgotten_by`](crate::Store::memory_forgotten_by))
    /// and answers as the first run did.
    RemoveByCall {
        /// The item.
        id: MemoryId,
        /// The scope the caller believes it is in (refused if it is not).
        scope: MemoryScope,
        /// The call, e.g. `<turn>/<call id>`.
        call: String,
    },
    /// Delete the notes of a scope that expired before `before_ms`.
    PurgeExpired {
        /// The scope.
        scope: MemoryScope,
        /// Cut-off (ms).
        before_ms: i64,
    },
}

impl MemoryOp {
    /// The scope instance the op writes to.
    pub fn scope(&self) -> &MemoryScope {
        match self {
            MemoryOp::Add(n) => &n.scope,
            MemoryOp::Replace { scope, .. }
            | MemoryOp::Remove { scope, .. }
            | MemoryOp::RemoveByCall { scope, .. }
            | MemoryOp::PurgeExpired { scope, .. } => scope,
        }
    }
}

/// What a memory op did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryOpResult {
    /// The item was added.
    Added(MemoryItem),
    /// Nothing changed: the item already says this (a retried write, or
    /// the same text already in that scope and layer).
    Unchanged(MemoryItem),
    /// The item's text changed.
    Replaced {
        /// As it was.
        before: MemoryItem,
        /// As it is now.
        after: MemoryItem,
    },
    /// The item was deleted.
    Removed(MemoryItem),
    /// The item had already been forgotten.
    AlreadyForgotten(MemoryId),
    /// Expired notes deleted.
    Purged(usize),
    /// Refused; nothing changed. The refusal says what to do.
    Refused(MemoryRefusal),
}

/// Why a write was refused. Each message says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryRefusal {
    /// The text is empty after trimming.
    #[error("the text is empty; give the fact to remember")]
    Empty,
    /// The text is longer than one item of its layer may be.
    #[error(
        "the text has {chars} characters, more than the {max} one {layer} item may have; shorten it or split it into several"
    )]
    TooLong {
        /// Layer.
        layer: Layer,
        /// Characters given.
        chars: usize,
        /// Limit.
        max: usize,
    },
    /// The profile has no room.
    #[error(
        "the profile of {scope} is full ({count}/{max_facts} facts, {chars}/{max_chars} characters; this needs {needed} characters); replace one of the suggested facts or forget one first"
    )]
    ProfileFull {
        /// Scope.
        scope: MemoryScope,
        /// Facts in it.
        count: usize,
        /// Characters in it.
        chars: usize,
        /// Fact limit.
        max_facts: usize,
        /// Character limit.
        max_chars: usize,
        /// Characters the write needs.
        needed: usize,
        /// Facts worth replacing: lowest importance, then least recently
        /// changed.
        suggestion: Vec<(MemoryId, String)>,
    },
    /// The log has no room.
    #[error(
        "the log of {scope} is full ({count}/{max} entries); forget old entries first (suggested: the least important and oldest)"
    )]
    LogFull {
        /// Scope.
        scope: MemoryScope,
        /// Entries in it.
        count: usize,
        /// Limit.
        max: usize,
        /// Entries worth forgetting.
        suggestion: Vec<(MemoryId, String)>,
    },
    /// Too many live notes.
    #[error(
        "{scope} has {count}/{max} live notes; forget a note that is done, or wait for notes to expire"
    )]
    NotesFull {
        /// Scope.
        scope: MemoryScope,
        /// Live notes.
        count: usize,
        /// Limit.
        max: usize,
        /// Notes that expire first.
        suggestion: Vec<(MemoryId, String)>,
    },
    /// Notes need an expiry in the future; other layers take none.
    #[error("{0}")]
    BadExpiry(String),
    /// No item has this id.
    #[error("no memory item {0}; list what is remembered (the ids are shown beside each fact)")]
    UnknownId(MemoryId),
    /// The item exists in another scope than the caller named.
    #[error("memory item {id} belongs to {actual}, not to the scope named")]
    WrongScope {
        /// The item.
        id: MemoryId,
        /// Its scope.
        actual: MemoryScope,
    },
    /// The id is used by another item.
    #[error("the id {0} is already used by another item; write with a new id")]
    IdTaken(MemoryId),
}

impl MemoryRefusal {
    /// Items the refusal suggests replacing or forgetting.
    pub fn suggestion(&self) -> &[(MemoryId, String)] {
        match self {
            MemoryRefusal::ProfileFull { suggestion, .. }
            | MemoryRefusal::LogFull { suggestion, .. }
            | MemoryRefusal::NotesFull { suggestion, .. } => suggestion,
            MemoryRefusal::Empty
            | MemoryRefusal::TooLong { .. }
            | MemoryRefusal::BadExpiry(_)
            | MemoryRefusal::UnknownId(_)
            | MemoryRefusal::WrongScope { .. }
            | MemoryRefusal::IdTaken(_) => &[],
        }
    }
}

/// Collapses every run of whitespace (newlines included) to one space and
/// trims: a stored fact is one line, so it cannot fake a heading or an
/// instruction block when rendered.
pub fn normalize_text(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The comparison key of a text: normalized and lowercased.
pub(crate) fn comparison_key(text: &str) -> String {
    normalize_text(text).to_lowercase()
}

//! Bots as stored.

use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use crate::ids::BotId;
use crate::ids::UserId;

/// A registered bot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BotRecord {
    /// Stable id.
    pub id: BotId,
    /// Display name.
    pub name: String,
    /// The user who owns the bot.
    pub owner: UserId,
    /// Role text: who the bot is and what it does.
    pub role: String,
    /// Name of the model provider in the fleet config.
    pub provider: String,
    /// Names of the tools the bot may use.
    pub tools: Vec<String>,
    /// Further settings (free-form JSON, owned by the runtime).
    #[serde(default)]
    pub settings: Value,
    /// Where the bot came from: `config`, `api` or `agent:<id>`.
    pub origin: String,
    /// Creation time (ms since epoch).
    pub created_at: i64,
    /// Last change (ms since epoch).
    pub updated_at: i64,
}

/// Key of [`BotRecord::settings`] set on a bot of the fleet's config that
/// the config no longer lists: when it was found missing (ms since epoch).
pub const REMOVED_AT: &str = "removed_at";

impl BotRecord {
    /// Whether the bot came from the fleet's config file.
    pub fn from_config(&self) -> bool {
        self.origin == "config"
    }

    /// Whether another bot made it with CreateAgent (origin
    /// `agent:<maker>`): removed, it was removed by its owner and does not
    /// come back.
    pub fn made_by_agent(&self) -> bool {
        self.origin.starts_with("agent:")
    }

    /// When the fleet's config stopped listing the bot, if it did: such a
    /// bot takes no more messages and runs no turns, and its sessions are
    /// kept; listing it again in the config brings it back.
    pub fn removed_at(&self) -> Option<i64> {
        self.settings.get(REMOVED_AT).and_then(Value::as_i64)
    }

    /// The record marked as no longer in the config since `now_ms`.
    pub fn mark_removed(mut self, now_ms: i64) -> Self {
        if !self.settings.is_object() {
            self.settings = Value::Object(serde_json::Map::new());
        }
        if let Value::Object(map) = &mut self.settings {
            map.insert(REMOVED_AT.into(), now_ms.into());
        }
        self.updated_at = now_ms;
        self
    }
}

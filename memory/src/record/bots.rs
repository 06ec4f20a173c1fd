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

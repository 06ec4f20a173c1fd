//! A runtime for tool unit tests: a store and a workspace in a temp dir,
//! one bot, and a DM scope.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreOptions;
use botfleet_memory::TurnId;
use botfleet_memory::UserId;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Runner;
use super::ToolContext;
use super::ToolRegistry;
use super::TurnScope;
use super::Workspace;
use crate::runtime::Runtime;
use crate::settings::FleetSettings;

/// Everything a tool call needs, owned.
pub(crate) struct ToolFixture {
    pub _dir: tempfile::TempDir,
    pub rt: Runtime,
    pub bot: BotRecord,
    pub scope: TurnScope,
    pub turn: TurnId,
    pub cancel: CancellationToken,
    pub secrets: crate::vault::BotSecrets,
}

impl ToolFixture {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(&dir.path().join("ws")).unwrap();
        let store = Store::open(StoreOptions::new(dir.path().join("db.sqlite"))).unwrap();
        let settings = FleetSettings::new(ws.root().to_path_buf());
        let rt = Runtime::new(store, HashMap::new(), ToolRegistry::builtin(), settings, ws);
        let bot = BotRecord {
            id: BotId::new("b").unwrap(),
            name: "B".into(),
            owner: UserId::new("u").unwrap(),
            role: String::new(),
            provider: "p".into(),
            tools: vec![],
            settings: json!({}),
            origin: "test".into(),
            created_at: 0,
            updated_at: 0,
        };
        let key = SessionKey {
            bot: bot.id.clone(),
            kind: SessionKind::Dm,
            peer: "u".into(),
        };
        let scope = TurnScope {
            session: SessionRecord {
                id: key.id(),
                key,
                owner: bot.owner.clone(),
                epoch: 0,
                last_seq: 0,
                created_at: 0,
            },
            runner: Runner::Main,
            hop: 0,
            reply_to: None,
        };
        Self {
            _dir: dir,
            rt,
            bot,
            scope,
            turn: TurnId::new_v7(),
            cancel: CancellationToken::new(),
            secrets: crate::vault::BotSecrets::default(),
        }
    }

    /// A context for call `call_id`.
    pub(crate) fn ctx<'a>(&'a self, call_id: &'a str) -> ToolContext<'a> {
        ToolContext {
            rt: &self.rt,
            bot: &self.bot,
            scope: &self.scope,
            turn: self.turn,
            call_id,
            cancel: &self.cancel,
            interrupt: &self.cancel,
            secrets: &self.secrets,
            step_effects: &[],
        }
    }

    /// The workspace.
    pub(crate) fn ws(&self) -> &Workspace {
        &self.rt.workspace
    }
}

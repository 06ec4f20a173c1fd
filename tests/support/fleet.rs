//! A test fleet: writes a fleet.toml (and scripts) into a temp dir and
//! starts a host in-process on a free loopback port.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use botfleet::host::HostOptions;
use botfleet::host::RunningHost;
use botfleet::host::WallClock;
use futures::StreamExt;
use serde_json::Value;
use serde_json::json;

pub const TOKEN: &str = "alice-secret-token";
pub const BOB_TOKEN: &str = "bob-secret-token";

/// Builder of a fleet.toml for tests.
pub struct TestFleet {
    dir: tempfile::TempDir,
    providers: Vec<String>,
    bots: Vec<String>,
    runtime: String,
    host_extra: String,
    tables: String,
    /// Of alice and bob, those `[[users]]` leaves out.
    gone_users: Vec<String>,
    /// The store's clock; none: the system's.
    clock: Option<WallClock>,
}

impl TestFleet {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            providers: Vec::new(),
            bots: Vec::new(),
            // no fact extraction after turns: its model calls would mix
            // with the ones tests count (tests of extraction turn it on)
            runtime: "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\n".into(),
            host_extra: String::new(),
            tables: String::new(),
            gone_users: Vec::new(),
            clock: None,
        }
    }

    /// Runs the host on a clock that reads 12:00 UTC of today as the
    /// fleet is made, and goes on at the system's pace: a test of a daily
    /// budget then cannot see the day change under it (one across a real
    /// UTC midnight saw its bot's pause end).
    pub fn midday(mut self) -> Self {
        self.clock = Some(WallClock(std::sync::Arc::new(
            super::clocked::MiddayClock::new(),
        )));
        self
    }

    /// Now by the host's clock, in ms since the epoch.
    pub fn now_ms(&self) -> i64 {
        match &self.clock {
            Some(WallClock(clock)) => clock.now_ms(),
            None => chrono::Utc::now().timestamp_millis(),
        }
    }

    /// How the host starts on the fleet.toml at `path`.
    fn options(&self, path: PathBuf) -> HostOptions {
        HostOptions {
            fleet: Some(path),
            data_dir: None,
            listen: None,
            env: Some(HashMap::new()),
            // the Shell sandbox's launcher, as `botfleet run` has it
            shell_launcher: Some(env!("CARGO_BIN_EXE_botfleet").into()),
            clock: self.clock.clone(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// A scripted provider named `name` with this script.
    pub fn script(mut self, name: &str, script: &str) -> Self {
        std::fs::create_dir_all(self.dir.path().join("scripts")).unwrap();
        std::fs::write(self.dir.path().join(format!("scripts/{name}.toml")), script).unwrap();
        self.providers.push(format!(
            "[providers.{name}]\nkind = \"scripted\"\nscript = \"scripts/{name}.toml\"\n"
        ));
        self
    }

    /// An OpenAI-compatible provider.
    pub fn openai(mut self, name: &str, base_url: &str, extra: &str) -> Self {
        self.providers.push(format!(
            "[providers.{name}]\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodel = \"test-model\"\n{extra}\n"
        ));
        self
    }

    pub fn bot(self, id: &str, provider: &str, tools: &[&str]) -> Self {
        self.bot_of(id, provider, tools, "alice")
    }

    pub fn bot_of(mut self, id: &str, provider: &str, tools: &[&str], owner: &str) -> Self {
        let tools: Vec<String> = tools.iter().map(|t| format!("\"{t}\"")).collect();
        self.bots.push(format!(
            "[[bots]]\nid = \"{id}\"\nname = \"{id}-name\"\nrole = \"Test bot {id}.\"\nowner = \"{owner}\"\nprovider = \"{provider}\"\ntools = [{}]\n",
            tools.join(", ")
        ));
        self
    }

    /// Gives the last bot the display name `name` (its own is `{id}-name`).
    pub fn named(mut self, name: &str) -> Self {
        if let Some(last) = self.bots.last_mut() {
            let id_line = last.lines().nth(1).unwrap_or_default().to_owned();
            let id = id_line
                .trim_start_matches("id = \"")
                .trim_end_matches('"')
                .to_owned();
            *last = last.replacen(
                &format!("name = \"{id}-name\""),
                &format!("name = {name:?}"),
                1,
            );
        }
        self
    }

    /// The fleet without user `id` (alice or bob) in `[[users]]`.
    pub fn without_user(mut self, id: &str) -> Self {
        self.gone_users.push(id.to_owned());
        self
    }

    /// Drops bot `id` from the fleet (write it again to take effect).
    pub fn without_bot(mut self, id: &str) -> Self {
        let head = format!("[[bots]]\nid = \"{id}\"\n");
        self.bots.retain(|b| !b.starts_with(&head));
        self
    }

    /// Extra lines at the end of the last bot's table, e.g. its
    /// `[[bots.routines]]` or `[[bots.hooks]]`.
    pub fn bot_lines(mut self, lines: &str) -> Self {
        if let Some(last) = self.bots.last_mut() {
            last.push_str(lines);
            last.push('\n');
        }
        self
    }

    /// Replaces the `[runtime]` body.
    pub fn runtime(mut self, body: &str) -> Self {
        self.runtime = body.into();
        self
    }

    /// Extra lines under `[host]`.
    pub fn host(mut self, lines: &str) -> Self {
        self.host_extra = lines.into();
        self
    }

    /// More top-level tables at the end of the file, e.g. `[review]`.
    pub fn tables(mut self, toml: &str) -> Self {
        self.tables.push_str(toml);
        self.tables.push('\n');
        self
    }

    /// Drops the tables [`TestFleet::tables`] added (write it again to
    /// take effect).
    pub fn without_tables(mut self) -> Self {
        self.tables.clear();
        self
    }

    /// Writes fleet.toml and returns its path.
    pub fn write(&self) -> PathBuf {
        let data = self.dir.path().join("data");
        let users: String = [("alice", TOKEN), ("bob", BOB_TOKEN)]
            .into_iter()
            .filter(|(id, _)| !self.gone_users.iter().any(|g| g == id))
            .map(|(id, token)| format!("[[users]]\nid = \"{id}\"\ntoken = \"{token}\"\n\n"))
            .collect();
        let text = format!(
            "[host]\ndata_dir = \"{}\"\nlisten = \"127.0.0.1:0\"\n{}\n[runtime]\n{}\n{users}{}\n{}\n{}",
            data.display(),
            self.host_extra,
            self.runtime,
            self.providers.join("\n"),
            self.bots.join("\n"),
            self.tables
        );
        let path = self.dir.path().join("fleet.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    pub async fn start(self) -> TestHost {
        let fleet = self.write();
        let host = botfleet::host::start(self.options(fleet)).await.unwrap();
        TestHost {
            url: host.url(),
            host: Some(host),
            fleet: self,
            http: reqwest::Client::new(),
        }
    }
}

/// A running in-process host.
pub struct TestHost {
    pub url: String,
    pub host: Option<RunningHost>,
    pub fleet: TestFleet,
    pub http: reqwest::Client,
}

impl TestHost {
    pub fn client(&self) -> botfleet::client::Client {
        botfleet::client::Client::new(&self.url, TOKEN).unwrap()
    }

    /// `POST /v1/turns/{turn}/retry` as alice: the status and the body.
    pub async fn retry(&self, turn: &str) -> (u16, Value) {
        self.post_raw(&format!("/v1/turns/{turn}/retry"), Some(TOKEN), None, "{}")
            .await
    }

    pub async fn post_raw(
        &self,
        path: &str,
        token: Option<&str>,
        key: Option<&str>,
        body: impl Into<reqwest::Body>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Sends `method path` as the user of `token`, with a JSON body if
    /// any; the status and the body (`null` when it is not JSON).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Posts `body` as JSON to the webhook route `path` with the delivery
    /// id and signature headers given (`None`: left out): the status and
    /// the answer.
    pub async fn post_hook(
        &self,
        path: &str,
        delivery: Option<&str>,
        signature: Option<&str>,
        body: &str,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(d) = delivery {
            req = req.header("X-Botfleet-Delivery", d);
        }
        if let Some(s) = signature {
            req = req.header("X-Botfleet-Signature", s);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        let resp = self
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Sends a message; returns the HTTP status and the body.
    pub async fn send(&self, bot: &str, text: &str, key: Option<&str>) -> (u16, Value) {
        self.post_raw(
            &format!("/v1/bots/{bot}/messages"),
            Some(TOKEN),
            key,
            json!({ "text": text }).to_string(),
        )
        .await
    }

    /// Posts `{"text": text}` to `path` as the user of `token` (a message
    /// to a bot or a room) and checks it was accepted (202); returns the
    /// answer.
    pub async fn post_text(&self, path: &str, token: &str, text: &str) -> Value {
        let (status, answer) = self
            .post_raw(path, Some(token), None, json!({ "text": text }).to_string())
            .await;
        assert_eq!(status, 202, "{path}: {answer}");
        answer
    }

    /// `POST /v1/groups` as the user of `token`: a room `name` of
    /// `members`; the status and the answer.
    pub async fn create_room(&self, token: &str, name: &str, members: &[&str]) -> (u16, Value) {
        self.call(
            reqwest::Method::POST,
            "/v1/groups",
            token,
            Some(json!({ "name": name, "members": members })),
        )
        .await
    }

    /// Sends `text` to `bot` as alice and waits until the turn answering
    /// it ended; returns the DM's session id and the `turn_end` entry.
    pub async fn end_turn(&self, bot: &str, text: &str) -> (String, Value) {
        let (status, sent) = self.send(bot, text, None).await;
        assert_eq!(status, 202, "{sent}");
        let session = sent["session"].as_str().unwrap().to_owned();
        let end = self
            .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
            .await;
        (session, end)
    }

    /// [`TestHost::end_turn`] as the user of `token`; returns the
    /// `turn_end` entry and the session's entries as that user reads them.
    pub async fn end_turn_as(&self, bot: &str, token: &str, text: &str) -> (Value, Vec<Value>) {
        let sent = self
            .post_text(&format!("/v1/bots/{bot}/messages"), token, text)
            .await;
        let session = sent["session"].as_str().unwrap().to_owned();
        let seq = json!(sent["seq"].as_i64().unwrap());
        let client = botfleet::client::Client::new(&self.url, token).unwrap();
        let mut entries = Vec::new();
        let end = until_signalled(&client, async || {
            entries = client.entries_after(&session, 0).await.unwrap();
            entries
                .iter()
                .find(|e| {
                    e["kind"] == "turn_end"
                        && e["status"] != "interrupted"
                        && e["inputs"].as_array().is_some_and(|a| a.contains(&seq))
                })
                .cloned()
                .ok_or_else(|| format!("{bot}'s turn on {text:?} never ended: {entries:#?}"))
        })
        .await;
        (end, entries)
    }

    /// [`TestHost::end_turn`], checking the turn completed; returns the
    /// DM's session id.
    pub async fn complete_turn(&self, bot: &str, text: &str) -> String {
        let (session, end) = self.end_turn(bot, text).await;
        assert_eq!(end["status"], "completed", "{end}");
        session
    }

    /// Posts `text` to `room` as the user of `token` and waits until the
    /// discussion it starts ended; returns the answer and the
    /// discussion's entries as that user reads them.
    pub async fn discuss(&self, token: &str, room: &str, text: &str) -> (Value, Vec<Value>) {
        let answer = self
            .post_text(&format!("/v1/groups/{room}/messages"), token, text)
            .await;
        let seq = answer["seq"].as_i64().unwrap();
        let session = answer["session"].as_str().unwrap();
        let end = self.wait_turn_end(session, seq).await["seq"]
            .as_i64()
            .unwrap();
        let (status, page) = self
            .get(&format!("/v1/groups/{room}/entries?after={seq}"), token)
            .await;
        assert_eq!(status, 200, "{page}");
        let run = page["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["seq"].as_i64().unwrap() <= end)
            .cloned()
            .collect();
        (answer, run)
    }

    /// All entries of a session.
    pub async fn entries(&self, session: &str) -> Vec<Value> {
        self.client().entries_after(session, 0).await.unwrap()
    }

    /// The DM session of alice with `bot`, begun with a "hello" (a DM's
    /// session starts so) whose turn has ended.
    pub async fn dm_after_hello(&self, bot: &str) -> String {
        let (_, dm) = self.get(&format!("/v1/bots/{bot}/session"), TOKEN).await;
        let session = dm["session"].as_str().unwrap().to_owned();
        self.send(bot, "hello", None).await;
        self.wait_turn_end(&session, 1).await;
        session
    }

    /// Waits (on change signals, with a deadline) until the turn answering
    /// input `seq` of `session` ended (not interrupted); returns its
    /// turn_end entry.
    pub async fn wait_turn_end(&self, session: &str, seq: i64) -> Value {
        self.wait_for(session, |entries| {
            entries
                .iter()
                .find(|e| {
                    e["kind"] == "turn_end"
                        && e["status"] != "interrupted"
                        && e["inputs"]
                            .as_array()
                            .is_some_and(|a| a.contains(&json!(seq)))
                })
                .cloned()
        })
        .await
    }

    /// Waits until `pick` finds something in the session's entries.
    pub async fn wait_for(&self, session: &str, pick: impl Fn(&[Value]) -> Option<Value>) -> Value {
        let client = self.client();
        self.until_signalled(async || {
            let entries = client.entries_after(session, 0).await.unwrap();
            pick(&entries).ok_or_else(|| format!("entries: {entries:#?}"))
        })
        .await
    }

    /// Waits for the first message a bot delivered in the session whose
    /// text starts with `prefix`; its text.
    pub async fn wait_delivery(&self, session: &str, prefix: &str) -> String {
        let found = self
            .wait_for(session, |es| {
                es.iter().find_map(|e| {
                    let text = e["text"].as_str()?;
                    (e["kind"] == "delivery" && text.starts_with(prefix)).then(|| json!(text))
                })
            })
            .await;
        found.as_str().unwrap_or_default().to_owned()
    }

    /// Sends `text` to `bot` and waits until that session holds `reports`
    /// messages from its subagents (their reports).
    pub async fn send_until_reports(&self, bot: &str, text: &str, reports: usize) {
        let (status, sent) = self.send(bot, text, None).await;
        assert_eq!(status, 202, "{sent}");
        let session = sent["session"].as_str().unwrap().to_owned();
        self.wait_for(&session, |es| {
            (es.iter().filter(|e| e["kind"] == "agent_message").count() >= reports)
                .then_some(json!(true))
        })
        .await;
    }

    /// Waits until `parent` has a subagent in `GET /v1/bots`; its id.
    pub async fn wait_subagent_of(&self, parent: &str) -> String {
        let origin = format!("subagent:{parent}");
        self.wait_get("/v1/bots", |v| {
            v["bots"]
                .as_array()?
                .iter()
                .find(|b| b["origin"] == origin.as_str())
                .map(|b| b["id"].clone())
        })
        .await
        .as_str()
        .unwrap()
        .to_owned()
    }

    /// Waits until `pick` finds something in what `GET path` answers.
    pub async fn wait_get(&self, path: &str, pick: impl Fn(&Value) -> Option<Value>) -> Value {
        self.until_signalled(async || {
            let (_, v) = self.get(path, TOKEN).await;
            pick(&v).ok_or_else(|| format!("{path}: {v:#}"))
        })
        .await
    }

    /// Re-runs `check` at each change signal of the host (at least every
    /// 2 s) until it succeeds; fails with its last error after 30 s.
    async fn until_signalled(&self, check: impl AsyncFnMut() -> Result<Value, String>) -> Value {
        until_signalled(&self.client(), check).await
    }

    /// Waits until `bot` has a running turn ([`wait_running`]).
    pub async fn wait_running(&self, bot: &str) {
        wait_running(&self.url, bot).await;
    }

    pub async fn shutdown(mut self) -> TestFleet {
        if let Some(h) = self.host.take() {
            h.shutdown().await;
        }
        self.fleet
    }
}

/// Runs `check` until it finds something: again whenever `client`'s
/// change stream signals (or every 2 s), for at most 30 s.
pub async fn until_signalled(
    client: &botfleet::client::Client,
    mut check: impl AsyncFnMut() -> Result<Value, String>,
) -> Value {
    let mut events = client.events().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let last = match check().await {
            Ok(found) => return found,
            Err(last) => last,
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        assert!(!left.is_zero(), "timed out waiting; {last}");
        let _ = tokio::time::timeout(left.min(Duration::from_secs(2)), events.next()).await;
    }
}

/// The id of `bot`'s session of `kind` with `peer` (derived from its key:
/// the session need not exist yet).
pub fn session_of(bot: &str, kind: botfleet::memory::SessionKind, peer: &str) -> String {
    botfleet::memory::SessionKey {
        bot: botfleet::memory::BotId::new(bot).unwrap(),
        kind,
        peer: peer.into(),
    }
    .id()
    .to_string()
}

/// Texts of the deliveries in `entries`.
pub fn deliveries(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e["kind"] == "delivery")
        .map(|e| e["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Starts a host again on a fleet written before (its fleet.toml may have
/// been edited), keeping its data directory.
pub async fn restart(fleet: TestFleet) -> TestHost {
    let path = fleet.path().join("fleet.toml");
    let host = botfleet::host::start(fleet.options(path)).await.unwrap();
    TestHost {
        url: host.url(),
        host: Some(host),
        fleet,
        http: reqwest::Client::new(),
    }
}

/// Waits until `bot` of the host at `url` has a running turn. A turn's start
/// is not signalled (its record is written with its first step), so this
/// polls, every 10 ms for at most 20 s.
pub async fn wait_running(url: &str, bot: &str) {
    let c = botfleet::client::Client::new(url, TOKEN).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < deadline {
        let v = c.get("/v1/bots").await.unwrap();
        let running = v["bots"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|b| b["id"] == bot && b["running_turn"].is_string());
        if running {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{bot} never started a turn");
}

/// The start of the host `fleet` describes, which must be refused: its
/// error, whole (`{:#}`). `what` names the case in the panic otherwise.
pub async fn start_refused(fleet: &TestFleet, what: &str) -> String {
    let started = botfleet::host::start(HostOptions {
        fleet: Some(fleet.write()),
        data_dir: None,
        listen: None,
        env: Some(HashMap::new()),
        ..Default::default()
    })
    .await;
    match started {
        Ok(_) => panic!("{what}: the host started"),
        Err(e) => format!("{e:#}"),
    }
}

/// An answer's status, `Retry-After` header and JSON body (`Null` when it
/// has none).
pub async fn status_wait_body(resp: reqwest::Response) -> (u16, Option<String>, Value) {
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (
        status,
        retry_after,
        resp.json().await.unwrap_or(Value::Null),
    )
}

//! The HTTP API (`/v1`, JSON, bearer auth) and the web page.
//! docs/api.md documents every route; docs/openapi.yaml is its schema.

mod approvals;
mod auth;
mod body_budget;
mod bots;
mod error;
mod event_slots;
mod events;
mod extract;
mod groups;
mod health;
mod hooks;
mod memory;
mod message_rate;
mod query_text;
mod routines;
mod search;
mod secrets;
mod sessions;
mod token_guesses;
mod ui;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::routing::MethodRouter;
use botfleet_actors::FleetHandle;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;

pub use auth::AuthUser;
pub use auth::Tokens;
pub use body_budget::BodyBudget;
pub use error::ApiError;
pub use event_slots::EventStreams;
pub(crate) use extract::KEY_RULE;
pub(crate) use extract::MAX_KEY_LEN;
pub(crate) use hooks::HOOKS_PREFIX;
pub use hooks::HookSecret;
pub use hooks::Hooks;
pub use hooks::sign as sign_hook;
pub use message_rate::MessageRate;
pub use token_guesses::TokenGuesses;
pub use ui::ASSETS as UI_ASSETS;

/// Limits the API enforces.
#[derive(Debug, Clone)]
pub struct ApiLimits {
    /// Largest request body in bytes.
    pub max_body_bytes: usize,
    /// Longest message text in characters.
    pub max_text_chars: usize,
    /// The caps on open `/v1/events` streams and their counts, shared by
    /// every clone of the state.
    pub streams: EventStreams,
    /// Each user's messages per minute (`host.user_messages_per_minute`),
    /// shared by every clone of the state.
    pub messages: MessageRate,
    /// Each client address's unknown tokens per minute
    /// (`host.unknown_tokens_per_minute`), shared by every clone of the
    /// state.
    pub guesses: TokenGuesses,
    /// Each user's bytes of request bodies arriving at once
    /// (`host.body_bytes_per_user`), shared by every clone of the state.
    pub bodies: BodyBudget,
}

/// What every handler shares.
#[derive(Clone)]
pub struct ApiState {
    /// The running fleet.
    pub fleet: FleetHandle,
    /// Bearer tokens.
    pub tokens: Tokens,
    /// Limits.
    pub limits: ApiLimits,
    /// The routines scheduler.
    pub scheduler: botfleet_actors::scheduler::SchedulerHandle,
    /// Webhooks and their secrets.
    pub hooks: Hooks,
}

/// Every route of the HTTP surface as `(method, path)`, paths in axum's
/// syntax (`/v1/bots/{bot}`). The router is built from the same table, so
/// the list is complete by construction; docs/openapi.yaml documents every
/// `/v1` route (tests/suite/ui.rs checks both ways).
pub fn routes() -> Vec<(&'static str, &'static str)> {
    table().list
}

/// The refusal of a request no route takes: the method and path asked
/// (at most 200 characters of it), and, when `/v1/` comes after a prefix,
/// that the API starts at the host's root (QA: `--host http://HOST/foo`
/// got "no such route", which said nothing of the `/foo` it had added).
fn no_route(method: &axum::http::Method, path: &str) -> String {
    let shown: String = path.chars().take(200).collect();
    let more = if shown.len() < path.len() { "…" } else { "" };
    let prefixed = match path.find("/v1/") {
        Some(at) if at > 0 => format!(
            " (the API starts at the host's root, /v1/: drop {} from the host's address)",
            &shown[..at.min(shown.len())]
        ),
        _ => String::new(),
    };
    format!("no such route: {method} {shown}{more}{prefixed}; see docs/api.md")
}

/// The whole HTTP surface.
pub fn router(state: ApiState) -> Router {
    let limit = state.limits.max_body_bytes;
    table()
        .router
        .fallback(|method: axum::http::Method, uri: axum::http::Uri| async move {
            ApiError::NotFound(no_route(&method, uri.path()))
        })
        .method_not_allowed_fallback(|method: axum::http::Method, uri: axum::http::Uri| async move {
            ApiError::MethodNotAllowed(format!(
                "{method} is not allowed on {}; the allow header lists the methods that are (docs/api.md)",
                uri.path()
            ))
        })
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            body_budget::limit_bodies,
        ))
        .layer(axum::middleware::from_fn(extract::known_transfer_coding))
        .layer(axum::middleware::map_response(api_headers))
        .with_state(state)
}

/// Marks an answer as one no cache may keep and no browser may read as
/// another type than it says (`Cache-Control: no-store`,
/// `X-Content-Type-Options: nosniff`): the API's answers hold transcripts,
/// secret names and approvals. An answer that sets its own cache rule (the
/// page's files revalidate, an event stream is `no-cache`) keeps it.
pub(crate) fn mark_answer(response: &mut axum::response::Response) {
    use axum::http::HeaderValue;
    use axum::http::header;
    let headers = response.headers_mut();
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
}

/// [`mark_answer`] as a layer: every route's answer, the fallback's and
/// the refusals of the extractors and body limit.
async fn api_headers(mut response: axum::response::Response) -> axum::response::Response {
    mark_answer(&mut response);
    response
}

/// How long a request in flight when the host begins to stop may take to
/// finish (docs/operations.md); then it is answered `503 unavailable` and
/// the stop goes on.
pub const STOP_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Refuses requests while the host stops (`stop` cancelled): one that
/// arrives then is answered `503 unavailable` at once, saying the host is
/// stopping, and one in flight gets [`STOP_DRAIN`] to finish, then is
/// answered the same way. (Before, requests kept being served, and
/// messages admitted, until the server's last connection closed, seconds
/// past the documented 5 s.)
pub fn refuse_while_stopping(app: Router, stop: tokio_util::sync::CancellationToken) -> Router {
    app.layer(axum::middleware::from_fn_with_state(stop, while_running))
}

/// [`refuse_while_stopping`]'s middleware.
async fn while_running(
    axum::extract::State(stop): axum::extract::State<tokio_util::sync::CancellationToken>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if stop.is_cancelled() {
        // expected while the host stops, which it logs itself: not an
        // error of the host's (QA: logged at ERROR)
        tracing::debug!(path = %request.uri().path(), "request refused: the host is stopping");
        let mut refused = ApiError::Unavailable(
            "the host is stopping; send the request again once it is back (a message with \
             the same Idempotency-Key is not admitted twice)"
                .into(),
        )
        .unlogged_response();
        mark_answer(&mut refused);
        return refused;
    }
    let drained = async {
        stop.cancelled().await;
        tokio::time::sleep(STOP_DRAIN).await;
    };
    tokio::select! {
        response = next.run(request) => response,
        () = drained => {
            let mut refused = ApiError::Unavailable(format!(
                "the host stopped before this request was done (requests in flight get {} s); \
                 send it again once the host is back (a message with the same Idempotency-Key \
                 is not admitted twice)",
                STOP_DRAIN.as_secs()
            ))
            .into_response();
            mark_answer(&mut refused);
            refused
        }
    }
}

/// The route table. A new route goes here, in docs/api.md and in
/// docs/openapi.yaml.
fn table() -> Table {
    Table::default()
        .get("/", ui::page)
        .get("/ui/{asset}", ui::file)
        .get("/healthz", health::healthz)
        .get("/v1/bots", bots::list)
        .get("/v1/bots/{bot}", bots::get_one)
        .delete("/v1/bots/{bot}", bots::remove)
        .post("/v1/bots/{bot}/messages", bots::post_message)
        .get("/v1/bots/{bot}/session", bots::dm_session)
        .post_bare("/v1/bots/{bot}/cancel", bots::cancel)
        .get("/v1/bots/{bot}/turns", sessions::turns_of_bot)
        .get("/v1/bots/{bot}/memory", memory::of_bot)
        .get("/v1/bots/{bot}/reviews", approvals::reviews_of_bot)
        .delete("/v1/memory/{id}", memory::forget)
        .get("/v1/bots/{bot}/hooks", hooks::list)
        .get("/v1/bots/{bot}/routines", routines::list)
        .put("/v1/bots/{bot}/routines/{name}", routines::put)
        .delete("/v1/bots/{bot}/routines/{name}", routines::delete)
        .post_signed("/v1/hooks/{bot}/{hook}", hooks::deliver)
        .get("/v1/sessions/{session}/entries", sessions::entries)
        .get("/v1/turns/{turn}", sessions::turn)
        .post_bare("/v1/turns/{turn}/retry", sessions::retry)
        .get("/v1/approvals", approvals::list)
        .get("/v1/approvals/{id}", approvals::get_one)
        .post("/v1/approvals/{id}", approvals::decide)
        .get("/v1/groups", groups::list)
        .post("/v1/groups", groups::create)
        .get("/v1/groups/{group}", groups::get_one)
        .delete("/v1/groups/{group}", groups::close)
        .put("/v1/groups/{group}/members", groups::set_members)
        .post("/v1/groups/{group}/messages", groups::post_message)
        .get("/v1/groups/{group}/entries", groups::entries)
        .get("/v1/search", search::search)
        .get("/v1/events", events::stream)
        .get("/v1/secrets", secrets::list)
        .put("/v1/secrets/{name}", secrets::put)
        .delete("/v1/secrets/{name}", secrets::delete)
}

/// Routes and the list of their methods and paths, built together (two
/// methods on one path merge into one route).
#[derive(Default)]
struct Table {
    router: Router<ApiState>,
    list: Vec<(&'static str, &'static str)>,
}

impl Table {
    fn add(
        mut self,
        method: &'static str,
        path: &'static str,
        route: MethodRouter<ApiState>,
    ) -> Self {
        self.list.push((method, path));
        self.router = self.router.route(path, route);
        self
    }

    /// A route that takes no body: [`extract::no_body`] refuses one.
    fn bare(route: MethodRouter<ApiState>) -> MethodRouter<ApiState> {
        route.route_layer(axum::middleware::from_fn(extract::no_body))
    }

    fn get<H: Handler<T, ApiState>, T: 'static>(self, path: &'static str, h: H) -> Self {
        self.add("GET", path, Self::bare(axum::routing::get(h)))
    }

    /// A route whose body is JSON: [`extract::uncompressed`] refuses a
    /// `Content-Encoding`.
    fn json(route: MethodRouter<ApiState>) -> MethodRouter<ApiState> {
        route.route_layer(axum::middleware::from_fn(extract::uncompressed))
    }

    fn post<H: Handler<T, ApiState>, T: 'static>(self, path: &'static str, h: H) -> Self {
        self.add("POST", path, Self::json(axum::routing::post(h)))
    }

    /// A `POST` whose handler reads the body's encoding itself (a webhook:
    /// its refusal speaks of the signature).
    fn post_signed<H: Handler<T, ApiState>, T: 'static>(self, path: &'static str, h: H) -> Self {
        self.add("POST", path, axum::routing::post(h))
    }

    /// A `POST` that takes no body (an action on the path's thing).
    fn post_bare<H: Handler<T, ApiState>, T: 'static>(self, path: &'static str, h: H) -> Self {
        self.add("POST", path, Self::bare(axum::routing::post(h)))
    }

    fn put<H: Handler<T, ApiState>, T: 'static>(self, path: &'static str, h: H) -> Self {
        self.add("PUT", path, Self::json(axum::routing::put(h)))
    }

    fn delete<H: Handler<T, ApiState>, T: 'static>(self, path: &'static str, h: H) -> Self {
        self.add("DELETE", path, Self::bare(axum::routing::delete(h)))
    }
}

/// A bot that takes no more work is refused a message rather than sent
/// one that nobody would answer: a subagent that was stopped (its turns
/// are cancelled as they start), a bot the fleet's config no longer lists
/// (it runs no turns until a config lists it again), and a bot made by
/// CreateAgent that its owner removed (for good).
pub(crate) async fn refuse_retired(state: &ApiState, bot: &BotRecord) -> Result<(), ApiError> {
    if let Some(parent) = bot.origin.strip_prefix("subagent:")
        && bot.removed_at().is_some()
    {
        // removed with its parent (it is in no config of its own); how
        // the parent went says whether it can come back (QA: both ways
        // were named, api.md says the message says which)
        let parent_record = match BotId::new(parent) {
            Ok(id) => state.fleet.store().get_bot(&id).await?,
            Err(_) => None,
        };
        let how = match parent_record {
            Some(p) if p.made_by_agent() => format!(
                "its parent {parent} was removed by its owner (a bot made by CreateAgent: it \
                 does not come back); its conversations are kept and readable"
            ),
            Some(p) if p.from_config() => format!(
                "its parent {parent} is no longer in the fleet's config; its conversations are \
                 kept and readable. List {parent} in fleet.toml again and restart the host to \
                 talk to it"
            ),
            _ => format!(
                "its parent {parent} was removed (taken out of the fleet's config, or, made by \
                 CreateAgent, removed by its owner); its conversations are kept and readable. \
                 If {parent} was in fleet.toml, list it there again and restart the host to \
                 talk to it"
            ),
        };
        return Err(ApiError::Conflict(format!(
            "subagent {} takes no more messages: {how}",
            bot.id
        )));
    }
    if bot.made_by_agent() && bot.removed_at().is_some() {
        // a made bot its owner removed (`DELETE /v1/bots/{bot}`): no
        // config lists it, so it cannot come back
        return Err(ApiError::Conflict(format!(
            "bot {} was removed by its owner and takes no more messages; its conversations \
             are kept and readable. Talk to another of your bots, or have one make a new \
             bot with CreateAgent",
            bot.id
        )));
    }
    if bot.removed_at().is_some() {
        return Err(ApiError::Conflict(format!(
            "bot {} is no longer in the fleet's config and takes no more messages; its \
             conversations are kept and readable. List it in fleet.toml again and restart \
             the host to talk to it",
            bot.id
        )));
    }
    if !bot.origin.starts_with("subagent:") {
        return Ok(());
    }
    match state.fleet.store().get_subagent(&bot.id).await? {
        Some(sub) if sub.status == botfleet_memory::SubagentStatus::Stopped => {
            Err(ApiError::Conflict(format!(
                "subagent {} was stopped and takes no more work; ask {} to start a new task",
                sub.id, sub.parent
            )))
        }
        Some(_) | None => Ok(()),
    }
}

/// A bot the user may use: it exists and the user owns it. Other users'
/// bots are reported as missing, so ids do not leak across users.
pub(crate) async fn owned_bot(
    state: &ApiState,
    user: &AuthUser,
    bot: &str,
) -> Result<BotRecord, ApiError> {
    let id = match BotId::new(bot) {
        Ok(id) => id,
        // not an id at all, but perhaps a display name (`小明`, `Research
        // Bot`: QA, a Chinese name got only "invalid bot id")
        Err(e) => {
            return Err(match meant_bot(state, user, bot).await {
                Some(meant) => meant,
                None => ApiError::BadRequest(e.to_string()),
            });
        }
    };
    match state.fleet.store().get_bot(&id).await? {
        Some(b) if b.owner == user.0 => Ok(b),
        _ => Err(match meant_bot(state, user, bot).await {
            Some(meant) => meant,
            // a room of the user's, named where a bot goes (QA: `botfleet
            // cancel standup` said only "no bot"; `send` and `transcript`
            // name the room)
            None => {
                bots::named_room(
                    state,
                    user,
                    bot,
                    ApiError::no_such_bot_text(bot),
                    "a room takes no bot's commands: send to it with POST \
                     /v1/groups/{}/messages, read it with GET /v1/groups/{}/entries",
                )
                .await
            }
        }),
    }
}

/// The refusal of `bot`, no bot of `user`, when one of the user's bots
/// answers to it ignoring case, width and spaces, by id or display name
/// (`botfleet send Assistant`, as `botfleet bots` shows the name, where
/// the id is `assistant`: QA): it names that bot, and says so when it was
/// removed (a removed one only when no other answers: QA, `Helper` for a
/// removed `helper` got a bare "no bot"). Only the user's own bots are
/// named: another user's is answered as an unknown one (`None`).
async fn meant_bot(state: &ApiState, user: &AuthUser, bot: &str) -> Option<ApiError> {
    let key = botfleet_memory::name_key(bot);
    let mine: Vec<botfleet_memory::BotRecord> = state
        .fleet
        .store()
        .bots_answering_to(&[key])
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|b| b.owner == user.0)
        .collect();
    let meant = mine
        .iter()
        .find(|b| b.removed_at().is_none())
        .or_else(|| mine.first())?;
    let gone = match (meant.removed_at().is_some(), meant.made_by_agent()) {
        (false, _) => "",
        (true, true) => ", which its owner removed (it takes no more messages)",
        (true, false) => ", which is no longer in the fleet's config (it takes no more messages)",
    };
    Some(ApiError::NotFound(format!(
        "no bot {bot:?} for you; did you mean {} ({:?}){gone}? Bot ids are matched exactly; \
         list your bots with GET /v1/bots or `botfleet bots`",
        meant.id, meant.name
    )))
}

/// The id of `bot`'s direct-message session with `user` (derived from its
/// key: the session need not exist yet).
pub(crate) fn dm_of(bot: &BotId, user: &AuthUser) -> botfleet_memory::SessionId {
    botfleet_memory::SessionKey {
        bot: bot.clone(),
        kind: botfleet_memory::SessionKind::Dm,
        peer: user.0.to_string(),
    }
    .id()
}

#[cfg(test)]
#[path = "stopping_tests.rs"]
mod stopping_tests;

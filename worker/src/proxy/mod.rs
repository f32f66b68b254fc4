//! The drop-in proxy: an OpenAI-compatible endpoint in front of a model
//! provider. Point an SDK's base URL at it, name the conversation in a
//! header, and every request reaches the provider as compactor's context
//! (the summary, then the recent messages) instead of the whole history,
//! with no other change to the application.
//!
//! For `POST /v1/chat/completions` (and `POST /v1/messages`) with a
//! workstream named:
//! 1. the history the client sent is read ([`request`], [`conversation`]).
//!    What is the last turn's, the same bytes in the same places, is not
//!    read again ([`seen`]);
//! 2. when the history is the last turn's plus new messages and the
//!    workstream's head is where that turn left it, the context is built
//!    as stored and the new messages go on after it as sent; they are
//!    stored beside the request ([`writes`]). Otherwise what the workstream
//!    does not store yet is appended first; a history that leaves the
//!    stored one (an edit, an earlier turn asked again) forks a branch
//!    ([`history`]). When the context would not fit the model's window
//!    even so, a compaction in flight is waited for, at most `max_wait`;
//! 3. the request goes to the upstream with its messages replaced by the
//!    context (instructions and every other field as sent; messages the
//!    context keeps as they were, as the client wrote them: their bytes);
//! 4. the answer is passed back (a stream chunk by chunk), then stored
//!    and the turn finalized: a compaction is requested in the background
//!    when due. Each workstream's turns write in order, so the next request
//!    finds it all done;
//! 5. an upstream that still answers "context length exceeded" gets one
//!    retry after an urgent compaction.
//!
//! A request naming no workstream, or any other route, is forwarded as
//! it came (and counted). When compactor's store or queue cannot be
//! reached, the request is forwarded as it came too: the application
//! keeps working, and the history is stored on a later turn (each turn
//! resends it).

mod anthropic;
mod conversation;
mod history;
mod openai;
mod request;
mod seen;
mod settings;
mod upstream;
mod wire;
mod writes;

pub use settings::ProxySettings;

/// The prefix of the client ids the proxy names messages with (the
/// console tells the workstreams it serves by it).
pub(crate) use history::ID_PREFIX;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};
use axum::routing::{any, post};
use axum::Router;
use compactor_producer::client::{ClientError, Compactor, TurnContext, WaitMode};
use compactor_shared::context::ContextMessage;
use compactor_shared::{CharEstimator, EntityKey, MessageId};
use futures::future::BoxFuture;
use serde_json::{json, Map, Value};
use tokio::sync::oneshot;
use tracing::{debug, info_span, warn, Instrument};

use crate::events::{InternalEvent, PromptTokens, ProxyServed};
use crate::settings::AdminToken;
use conversation::Conversation;
use history::SyncError;
use request::Payload;
use seen::{Memory, Order};
use upstream::{Tee, Whole};
use wire::{Out, Wire};
use writes::{Answer, Writes};

/// The header naming the workstream: `domain/entity`, or `entity` alone
/// (in `[proxy] domain`).
pub const WORKSTREAM_HEADER: &str = "x-compactor-workstream";
/// The header carrying the admin token, when one is set (`Authorization`
/// is the provider's).
pub const TOKEN_HEADER: &str = "x-compactor-token";

/// What the proxy's handlers share.
#[derive(Clone)]
pub struct ProxyState(Arc<Inner>);

struct Inner {
    compactor: Compactor,
    settings: ProxySettings,
    token: Option<AdminToken>,
    http: reqwest::Client,
    /// The upstream key, read once (`upstream_key_env`).
    upstream_key: Option<HeaderValue>,
    /// Each workstream's last turn, and its turns' order.
    memory: Memory,
}

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyStartError {
    #[error("proxy.upstream_key_env names {0}, which is not set (or empty) in the environment")]
    MissingKey(String),
    #[error("proxy: cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

impl ProxyState {
    pub fn new(
        compactor: Compactor,
        settings: ProxySettings,
        token: Option<AdminToken>,
    ) -> Result<ProxyState, ProxyStartError> {
        let upstream_key = match &settings.upstream_key_env {
            None => None,
            Some(name) => {
                let key = std::env::var(name)
                    .ok()
                    .filter(|k| !k.trim().is_empty())
                    .ok_or_else(|| ProxyStartError::MissingKey(name.clone()))?;
                let mut value = HeaderValue::from_str(key.trim())
                    .map_err(|_| ProxyStartError::MissingKey(name.clone()))?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        let remember_bytes = settings.remember_bytes;
        let http = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(90))
            .build()?;
        Ok(ProxyState(Arc::new(Inner {
            compactor,
            settings,
            token,
            http,
            upstream_key,
            memory: Memory::new(remember_bytes),
        })))
    }
}

/// The proxy's routes: chat completions compacted, everything else
/// forwarded as it came.
pub fn router(state: ProxyState) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/messages", post(messages))
        .fallback(any(forward_as_is))
        .with_state(state)
}

/// An error the proxy answers itself, in the provider's error shape so
/// SDKs raise it as they raise the provider's.
fn refuse(status: StatusCode, code: &str, message: String) -> Response<Body> {
    let body =
        json!({"error": {"message": message, "type": "compactor_proxy_error", "code": code}});
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

impl ProxyState {
    /// Refuses a request without the admin token, when one is set.
    fn unauthorized(&self, headers: &HeaderMap) -> Option<Response<Body>> {
        let token = self.0.token.as_ref()?;
        let presented = headers.get(TOKEN_HEADER).map(HeaderValue::as_bytes);
        if presented.is_some_and(|p| token.matches(p)) {
            return None;
        }
        Some(refuse(
            StatusCode::UNAUTHORIZED,
            "compactor_token",
            format!("the proxy needs the admin token in {TOKEN_HEADER}"),
        ))
    }

    /// A request's body, read whole: at most `max_body_bytes`, else a 413.
    async fn read_body(&self, body: Body) -> Result<Bytes, Response<Body>> {
        let limit = self.0.settings.max_body_bytes;
        axum::body::to_bytes(body, limit).await.map_err(|_| {
            refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("bodies of at most {limit} bytes"),
            )
        })
    }

    fn url(&self, wire: Wire, path_and_query: &str) -> String {
        let base = match wire {
            Wire::OpenAi => &self.0.settings.openai_upstream,
            Wire::Anthropic => &self.0.settings.anthropic_upstream,
        };
        format!("{}{}", base.trim_end_matches('/'), path_and_query)
    }

    /// The client's headers to send on, with the configured key when the
    /// client sent none (`Authorization: Bearer` for OpenAI, `x-api-key`
    /// for Anthropic).
    fn upstream_headers(&self, wire: Wire, from: &HeaderMap) -> HeaderMap {
        let mut headers = upstream::request_headers(from);
        let sent = headers.contains_key(header::AUTHORIZATION) || headers.contains_key("x-api-key");
        if let (Some(key), false) = (&self.0.upstream_key, sent) {
            match wire {
                Wire::OpenAi => {
                    let mut bearer =
                        HeaderValue::from_bytes(&[b"Bearer ", key.as_bytes()].concat())
                            .unwrap_or_else(|_| key.clone());
                    bearer.set_sensitive(true);
                    headers.insert(header::AUTHORIZATION, bearer);
                }
                Wire::Anthropic => {
                    headers.insert("x-api-key", key.clone());
                }
            }
        }
        headers
    }

    /// The workstream a request names: the header, else the configured
    /// body field. `Ok(None)`: none.
    fn workstream(
        &self,
        headers: &HeaderMap,
        body: &Map<String, Value>,
    ) -> Result<Option<EntityKey>, String> {
        let named = match headers.get(WORKSTREAM_HEADER) {
            Some(v) => Some(
                v.to_str()
                    .map_err(|_| format!("{WORKSTREAM_HEADER} is not text"))?
                    .to_owned(),
            ),
            None => self
                .0
                .settings
                .workstream_field
                .as_deref()
                .and_then(|path| field(body, path))
                .map(str::to_owned),
        };
        let Some(named) = named.filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        let (domain, entity) = named
            .split_once('/')
            .unwrap_or((self.0.settings.domain.as_str(), named.as_str()));
        EntityKey::parse(domain, entity)
            .map(Some)
            .map_err(|e| format!("workstream {named:?}: {e}"))
    }
}

/// The string at a dotted path of a JSON body (`metadata.user_id`).
fn field<'a>(body: &'a Map<String, Value>, path: &str) -> Option<&'a str> {
    let mut keys = path.split('.');
    let first = body.get(keys.next()?)?;
    keys.try_fold(first, |v, k| v.get(k))
        .and_then(Value::as_str)
}

/// Any route but chat completions: sent on as it came.
async fn forward_as_is(State(state): State<ProxyState>, request: Request) -> Response<Body> {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    if let Some(refused) = state.unauthorized(&parts.headers) {
        return refused;
    }
    let body = match state.read_body(body).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    // Anthropic's SDKs name their API version on every request.
    let wire = if parts.headers.contains_key("anthropic-version") {
        Wire::Anthropic
    } else {
        Wire::OpenAi
    };
    let answer = pass_on(&state, wire, parts.method, path, &parts.headers, body).await;
    served(
        Route::Other,
        Outcome::Forwarded,
        &answer,
        started,
        Duration::ZERO,
    );
    answer
}

/// Sends a request on untouched and passes the answer back (streamed
/// when it streams).
async fn pass_on(
    state: &ProxyState,
    wire: Wire,
    method: Method,
    path: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let url = state.url(wire, path);
    match upstream::send(
        &state.0.http,
        method,
        &url,
        state.upstream_headers(wire, headers),
        body,
    )
    .await
    {
        Ok(response) if upstream::is_event_stream(&response) => {
            upstream::pass_through(response, NoTee)
        }
        Ok(response) => match Whole::read(response).await {
            Ok(whole) => whole.into_response(),
            Err(e) => unreachable_upstream(&e),
        },
        Err(e) => unreachable_upstream(&e),
    }
}

fn unreachable_upstream(error: &upstream::UpstreamError) -> Response<Body> {
    warn!(%error, "the upstream did not answer");
    refuse(
        StatusCode::BAD_GATEWAY,
        "upstream_unreachable",
        error.to_string(),
    )
}

/// A stream passed on without being read.
struct NoTee;

impl Tee for NoTee {
    fn chunk(&mut self, _: &Bytes) -> bool {
        false
    }
    fn end(self, _: bool) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

/// Which route a request took (the `route` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    ChatCompletions,
    Messages,
    Other,
}

impl Route {
    pub(crate) const LABELS: [&'static str; 3] = ["chat_completions", "messages", "other"];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Route::ChatCompletions => "chat_completions",
            Route::Messages => "messages",
            Route::Other => "other",
        }
    }
}

/// What the proxy did with a request (the `context` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Sent with compactor's context in place of the history (a summary
    /// stood in for older messages).
    Compacted,
    /// Stored, and sent with the history as it was (nothing compacted
    /// yet).
    Whole,
    /// Named no workstream, or another route: sent on as it came.
    Forwarded,
    /// Compactor could not be reached (or the history shares nothing with
    /// the stored one): sent on as it came.
    Degraded,
}

impl Outcome {
    pub(crate) const LABELS: [&'static str; 4] = ["compacted", "whole", "forwarded", "degraded"];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Outcome::Compacted => "compacted",
            Outcome::Whole => "whole",
            Outcome::Forwarded => "forwarded",
            Outcome::Degraded => "degraded",
        }
    }
}

fn served(
    route: Route,
    outcome: Outcome,
    answer: &Response<Body>,
    started: Instant,
    overhead: Duration,
) {
    ProxyServed {
        route: route.label(),
        context: outcome.label(),
        status: crate::http::status_class(answer.status()),
        elapsed: started.elapsed(),
        overhead,
    }
    .emit();
}

/// `POST /v1/chat/completions`.
async fn chat_completions(
    State(state): State<ProxyState>,
    headers: HeaderMap,
    request: Request,
) -> Response<Body> {
    converse(state, Wire::OpenAi, headers, request).await
}

/// `POST /v1/messages`.
async fn messages(
    State(state): State<ProxyState>,
    headers: HeaderMap,
    request: Request,
) -> Response<Body> {
    converse(state, Wire::Anthropic, headers, request).await
}

/// A conversation's request in `wire`'s format.
async fn converse(
    state: ProxyState,
    wire: Wire,
    headers: HeaderMap,
    request: Request,
) -> Response<Body> {
    let started = Instant::now();
    let route = wire.route();
    if let Some(refused) = state.unauthorized(&headers) {
        return refused;
    }
    let path = request.uri().path_and_query().map_or_else(
        || request.uri().path().to_owned(),
        |p| p.as_str().to_owned(),
    );
    // A workstream named by the header is known before the body arrives:
    // the turn takes its order, and starts reading its context, meanwhile.
    let mut held = match state.workstream(&headers, &Map::new()) {
        Ok(Some(key)) => Some(state.hold(key).await),
        _ => None,
    };
    let raw = match state.read_body(request.into_body()).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let as_it_came = |outcome: Outcome, raw: Bytes| {
        let state = state.clone();
        let headers = headers.clone();
        let path = path.clone();
        async move {
            let answer = pass_on(&state, wire, Method::POST, &path, &headers, raw).await;
            served(route, outcome, &answer, started, Duration::ZERO);
            answer
        }
    };
    // A body that is not a JSON object is the provider's to refuse.
    // A body that starts as the last turn's is read from where it differs.
    let parsed = match held.as_ref().and_then(|h| h.seen.as_ref()) {
        Some(seen) => seen.parse(raw.clone()),
        None => Payload::parse(raw.clone()),
    };
    let Some(payload) = parsed else {
        return as_it_came(Outcome::Forwarded, raw).await;
    };
    let key = match state.workstream(&headers, &payload.rest) {
        Ok(Some(key)) => key,
        Ok(None) => return as_it_came(Outcome::Forwarded, raw).await,
        Err(reason) => return refuse(StatusCode::BAD_REQUEST, "invalid_workstream", reason),
    };
    // What compactor cannot read (a part type it does not know yet, no
    // messages) goes on as it came: the provider's to judge.
    let Some(spans) = payload.spans.clone() else {
        warn!(error = %openai::ReadError::NoMessages, "a request compactor cannot read goes on as it came");
        return as_it_came(Outcome::Degraded, raw).await;
    };
    let held = match held.take() {
        Some(held) if held.key == key => held,
        _ => state.hold(key.clone()).await,
    };
    let conversation = match Conversation::read(
        wire,
        &payload,
        &spans,
        held.seen.as_deref(),
        &state.estimator(),
    ) {
        Ok(c) if !c.messages.is_empty() => c,
        Ok(_) => return as_it_came(Outcome::Forwarded, raw).await,
        Err(e) => {
            warn!(error = %e, "a request compactor cannot read goes on as it came");
            return as_it_came(Outcome::Degraded, raw).await;
        }
    };
    let span = info_span!("proxy", domain = %key.domain(), route = route.label());
    let turn = Turn {
        state: state.clone(),
        wire,
        path: path.clone(),
        headers: headers.clone(),
        payload: Arc::new(payload),
        spans: Arc::new(spans),
        conversation: Arc::new(conversation),
        held,
        started,
    };
    turn.run().instrument(span).await
}

/// A turn's hold on its workstream: its order (the last turn's writes
/// done), what the last turn left, and the context being read when the
/// history may be that turn's and more (what the turn then sends).
struct Held {
    key: EntityKey,
    order: Order,
    /// The hold on `order` (`None`: not had within `max_wait`); the turn's
    /// writes keep it until they are done.
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
    seen: Option<Arc<seen::Seen>>,
    /// The context, being read since the turn began.
    early: Option<tokio::task::JoinHandle<Result<TurnContext, ClientError>>>,
}

impl ProxyState {
    /// Takes `key`'s order (a turn still storing its answer is waited for,
    /// at most `max_wait`) and reads what the last turn left.
    async fn hold(&self, key: EntityKey) -> Held {
        let memory = &self.0.memory;
        let order = memory.order(&key);
        let guard = tokio::time::timeout(self.0.settings.max_wait, order.clone().lock_owned())
            .await
            .ok();
        let seen = memory.last(&key);
        let early = seen.as_ref().map(|_| {
            let compactor = self.0.compactor.clone();
            let key = key.clone();
            tokio::spawn(async move { compactor.build_context(&key).await }.in_current_span())
        });
        Held {
            key,
            order,
            guard,
            seen,
            early,
        }
    }

    /// The estimate compactor sizes contexts by.
    fn estimator(&self) -> CharEstimator {
        CharEstimator::new(self.0.compactor.engine().chars_per_token)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // A turn that goes no further does not need its context.
        if let Some(early) = self.early.take() {
            early.abort();
        }
    }
}

/// One turn through the proxy.
struct Turn {
    state: ProxyState,
    wire: Wire,
    path: String,
    headers: HeaderMap,
    /// The request's body, read.
    payload: Arc<Payload>,
    /// Where each of the request's messages is in it.
    spans: Arc<Vec<std::ops::Range<usize>>>,
    conversation: Arc<Conversation>,
    /// The workstream, and the turn's hold on it.
    held: Held,
    started: Instant,
}

/// What goes on to the provider.
enum Sent {
    /// The request as the client sent it (its bytes).
    AsIs,
    /// The request with compactor's context for messages.
    Body(Vec<u8>),
}

/// The context a request goes on with.
struct Prepared {
    context: TurnContext,
    /// How many of the conversation's first messages the context covers
    /// (those after it go on as sent, after it).
    covered: usize,
    /// The conversation's newest stored message (before what is appended).
    parent: Option<MessageId>,
    /// What the writes store before the answer: the messages after
    /// `covered`.
    append: Vec<compactor_producer::client::IncomingMessage>,
}

impl Turn {
    async fn run(mut self) -> Response<Body> {
        let max_wait = self.state.0.settings.max_wait;
        let prepared = match self.known().await {
            Ok(Some(prepared)) => prepared,
            Ok(None) => match self.synced().await {
                Ok(prepared) => prepared,
                Err(reason) => return self.degrade(&reason).await,
            },
            Err(reason) => return self.degrade(&reason).await,
        };
        let overhead = self.started.elapsed();
        let Prepared {
            context,
            covered,
            parent,
            append,
        } = prepared;
        let (forwarded, outcome) = self.forwarded(&context, covered);
        self.count_tokens(&context, outcome, covered);
        // The writes go on beside the request, in the workstream's order.
        let (answer, answered) = oneshot::channel();
        let (flush_now, flush) = oneshot::channel();
        let (appended, stored) = oneshot::channel();
        let writes = Writes {
            state: self.state.clone(),
            key: self.held.key.clone(),
            order: self.held.order.clone(),
            guard: self.held.guard.take(),
            payload: self.payload.clone(),
            spans: self.spans.clone(),
            conversation: self.conversation.clone(),
            parent,
            append,
            flush,
            appended: Some(appended),
            answered,
        };
        tokio::spawn(writes.run().in_current_span());
        let mut answer = Some(answer);
        match self.ask(forwarded, &mut answer).await {
            Asked::ContextTooLong(first) => {
                // The model's window is smaller than configured, or the
                // estimate was short: compact now (once the new messages
                // are stored), wait, try once more.
                warn!("the upstream refused the context as too long: compacting and retrying once");
                let _ = flush_now.send(());
                let covered = match tokio::time::timeout(max_wait, stored).await {
                    Ok(Ok(true)) => self.conversation.messages.len(),
                    _ => covered,
                };
                let compactor = &self.state.0.compactor;
                if let Err(error) = compactor.compact_refused(&self.held.key).await {
                    warn!(%error, "no compaction could be requested after the refusal");
                }
                let _ = compactor
                    .wait(&self.held.key, WaitMode::Requested, max_wait)
                    .await;
                let retried = match self.context().await {
                    Ok(again) => self.forwarded(&again, covered),
                    // The context cannot be read again: what was sent.
                    Err(_) => self.forwarded(&context, covered),
                };
                let answer = match self.ask(retried.0, &mut answer).await {
                    Asked::Answered(a) => a,
                    Asked::ContextTooLong(_) => first.into_response(),
                };
                served(
                    self.wire.route(),
                    retried.1,
                    &answer,
                    self.started,
                    overhead,
                );
                answer
            }
            Asked::Answered(answer) => {
                served(self.wire.route(), outcome, &answer, self.started, overhead);
                answer
            }
        }
    }

    /// The context when the history is the last turn's plus new messages
    /// and the workstream's head is where that turn left it: the new
    /// messages are stored by the writes, beside the request, and go on
    /// after the context as the client sent them. `None`: the history
    /// must be matched against the store first ([`Turn::synced`]).
    async fn known(&mut self) -> Result<Option<Prepared>, String> {
        let early = self.held.early.take();
        let (Some(known), Some(new)) = (
            self.conversation.known,
            self.conversation
                .known
                .and_then(|k| self.conversation.incoming(k.count)),
        ) else {
            if let Some(early) = early {
                early.abort();
            }
            return Ok(None);
        };
        let context = match early {
            Some(early) => early.await.map_err(|e| e.to_string())?,
            None => self.context().await,
        }
        .map_err(|e| e.to_string())?;
        // The newest message the context shows is the head's.
        let newest = context.messages.iter().rev().find_map(|m| m.source);
        if newest != Some(known.parent)
            || self.over_window(&context, self.conversation.tokens(known.count))
        {
            return Ok(None);
        }
        Ok(Some(Prepared {
            context,
            covered: known.count,
            parent: Some(known.parent),
            append: new,
        }))
    }

    /// The context after storing what the workstream does not hold of the
    /// history (forking where the history leaves it), waiting for a
    /// compaction in flight when it would not fit the window.
    async fn synced(&mut self) -> Result<Prepared, String> {
        let messages = match self.conversation.incoming(0) {
            Some(messages) => messages,
            None => {
                // Part of it was taken from the last turn: read it whole.
                let whole = Conversation::read(
                    self.wire,
                    &self.payload,
                    &self.spans,
                    None,
                    &self.state.estimator(),
                )
                .map_err(|e| e.to_string())?;
                let messages = whole.incoming(0).unwrap_or_default();
                self.conversation = Arc::new(whole);
                messages
            }
        };
        let compactor = &self.state.0.compactor;
        let synced = match history::sync(compactor, &self.held.key, &messages).await {
            Ok(synced) => synced,
            Err(SyncError::Unrelated) => {
                return Err("the history shares no message with the stored workstream".into())
            }
            Err(SyncError::Client(e)) => return Err(e.to_string()),
        };
        debug!(
            appended = synced.appended,
            branched = synced.branched,
            "history synced"
        );
        let mut context = self.context().await.map_err(|e| e.to_string())?;
        if self.over_window(&context, 0) {
            // The provider's count of the last turn may have said it
            // fitted: ask by the estimate (a reactive request, ahead of
            // automatic ones; nothing when one is pending or the breaker
            // is open), then wait for it.
            if let Err(error) = compactor.request_if_due(&self.held.key, None).await {
                warn!(%error, "no compaction could be requested for a context over the window");
            }
            let waited = compactor
                .wait(
                    &self.held.key,
                    WaitMode::Requested,
                    self.state.0.settings.max_wait,
                )
                .await;
            if waited.is_ok() {
                if let Ok(again) = self.context().await {
                    context = again;
                }
            }
        }
        Ok(Prepared {
            context,
            covered: self.conversation.messages.len(),
            parent: synced.head,
            append: Vec::new(),
        })
    }

    async fn context(&self) -> Result<TurnContext, ClientError> {
        self.state.0.compactor.build_context(&self.held.key).await
    }

    /// Whether the context, with `more` tokens after it, would not fit the
    /// model's window (its overflow guard): only then is a compaction in
    /// flight worth waiting for.
    fn over_window(&self, context: &TurnContext, more: u64) -> bool {
        let engine = self.state.0.compactor.engine();
        let window = engine.trigger.context_window();
        context.over_budget
            || (window > 0
                && (context.tokens + more) as f64
                    > window as f64 * engine.context.overflow_guard_ratio)
    }

    /// The request with the context in place of the conversation's first
    /// `covered` messages.
    fn forwarded(&self, context: &TurnContext, covered: usize) -> (Sent, Outcome) {
        let conversation = &self.conversation;
        let spans = &self.spans;
        let messages = &context.messages;
        // The context: its preamble (the summary), the kept messages, and
        // after an automatic compaction a closing prompt; the last two made
        // by compactor, the kept ones the newest of the history.
        let preamble = messages.first().filter(|m| m.source.is_none());
        let closing = messages
            .last()
            .filter(|m| m.source.is_none() && messages.len() > 1);
        let kept: Vec<&ContextMessage> = messages.iter().filter(|m| m.source.is_some()).collect();
        let tail_from = covered.saturating_sub(kept.len());
        if tail_from == 0 && preamble.is_none() && closing.is_none() {
            return (Sent::AsIs, Outcome::Whole);
        }
        // Kept messages the client did not send (stored another way) come
        // first, written from the context.
        let (extra, kept) = kept.split_at(kept.len().saturating_sub(covered));
        // The request index the kept messages start at.
        let cut = conversation
            .messages
            .get(tail_from)
            .map_or(spans.len(), |m| m.at);
        let mut rest = self.payload.rest.clone();
        let mut out: Vec<Out> = Vec::with_capacity(spans.len() - cut + extra.len() + 4);
        // Instructions before the cut stay first, in their order.
        for (i, span) in spans.iter().enumerate().take(cut) {
            if conversation.is_instruction(i) {
                out.push(Out::Sent(span.clone()));
            }
        }
        if let Some(preamble) = preamble {
            self.wire.place_preamble(&mut rest, &mut out, preamble);
        }
        out.extend(
            extra
                .iter()
                .map(|m| Out::Written(self.wire.write_message(m))),
        );
        let mut kept = kept.iter();
        for (i, span) in spans.iter().enumerate().skip(cut) {
            match conversation.at.get(i).copied().flatten() {
                // Instructions, and what the context does not cover yet:
                // as sent.
                None => out.push(Out::Sent(span.clone())),
                Some(c) if c >= covered => out.push(Out::Sent(span.clone())),
                Some(c) => {
                    let Some(shown) = kept.next() else { continue };
                    // As the client wrote it, unless the context changed it
                    // (a tool half whose partner was compacted).
                    if conversation.is_as_sent(c, shown) {
                        out.push(Out::Sent(span.clone()));
                    } else {
                        out.push(Out::Written(self.wire.write_message(shown)));
                    }
                }
            }
        }
        out.extend(closing.map(|m| Out::Written(self.wire.write_message(m))));
        self.wire.settle(&self.payload, &mut out);
        match wire::write_body(&self.payload, &rest, &out) {
            Ok(body) => (Sent::Body(body), Outcome::Compacted),
            Err(error) => {
                warn!(%error, "the context could not be written: the request goes on as it came");
                (Sent::AsIs, Outcome::Degraded)
            }
        }
    }

    /// Sends the request on; passes its answer to the writes (`answer`,
    /// taken once the upstream answered).
    async fn ask(&self, sent: Sent, answer: &mut Option<oneshot::Sender<Answer>>) -> Asked {
        let raw = match sent {
            Sent::AsIs => self.payload.raw.clone(),
            Sent::Body(body) => Bytes::from(body),
        };
        let url = self.state.url(self.wire, &self.path);
        let mut headers = self.state.upstream_headers(self.wire, &self.headers);
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let response =
            match upstream::send(&self.state.0.http, Method::POST, &url, headers, raw).await {
                Ok(r) => r,
                Err(e) => return Asked::Answered(unreachable_upstream(&e)),
            };
        if upstream::is_event_stream(&response) {
            return Asked::Answered(upstream::pass_through(
                response,
                SseTee {
                    line: Vec::new(),
                    answer: self.wire.streamed(),
                    to: answer.take(),
                },
            ));
        }
        let whole = match Whole::read(response).await {
            Ok(w) => w,
            Err(e) => return Asked::Answered(unreachable_upstream(&e)),
        };
        if whole.status == StatusCode::BAD_REQUEST && self.wire.is_context_length_error(&whole.body)
        {
            return Asked::ContextTooLong(whole);
        }
        if whole.status.is_success() {
            if let Ok(body) = serde_json::from_slice::<Value>(&whole.body) {
                if let (Some(message), usage) = self.wire.read_answer(&body) {
                    if let Some(to) = answer.take() {
                        let _ = to.send((message, usage));
                    }
                }
            }
        }
        Asked::Answered(whole.into_response())
    }

    /// Counts the tokens of the conversation as sent and as sent on (the
    /// estimate compactor sizes contexts by; instructions left out).
    fn count_tokens(&self, context: &TurnContext, outcome: Outcome, covered: usize) {
        let client = self.conversation.tokens(0);
        PromptTokens {
            client,
            upstream: if outcome == Outcome::Compacted {
                context.tokens + self.conversation.tokens(covered)
            } else {
                client
            },
        }
        .emit();
    }

    /// Sends the request on as it came, after compactor failed it.
    async fn degrade(&self, reason: &str) -> Response<Body> {
        warn!(
            reason,
            "compactor could not serve this turn: the request goes on as it came"
        );
        let answer = pass_on(
            &self.state,
            self.wire,
            Method::POST,
            &self.path,
            &self.headers,
            self.payload.raw.clone(),
        )
        .await;
        served(
            self.wire.route(),
            Outcome::Degraded,
            &answer,
            self.started,
            Duration::ZERO,
        );
        answer
    }
}

/// What the upstream said.
enum Asked {
    Answered(Response<Body>),
    /// A 400 for a context longer than the model's window.
    ContextTooLong(Whole),
}

/// Reads a streamed answer's events as they pass, and hands the answer to
/// the writes once the stream ended whole.
struct SseTee {
    /// The event line being received.
    line: Vec<u8>,
    answer: wire::Streamed,
    to: Option<oneshot::Sender<Answer>>,
}

impl Tee for SseTee {
    fn chunk(&mut self, chunk: &Bytes) -> bool {
        let mut complete = false;
        for &b in chunk.iter() {
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            if let Some(data) = line.strip_prefix(b"data:") {
                let data = data.strip_prefix(b" ").unwrap_or(data);
                complete |= self.answer.data(data);
            }
        }
        complete
    }

    fn end(self, whole: bool) -> BoxFuture<'static, ()> {
        // A stream the client did not receive whole is not what it will
        // send back: not stored.
        if whole {
            if let (Some(message), usage) = self.answer.finish() {
                if let Some(to) = self.to {
                    let _ = to.send((message, usage));
                }
            }
        }
        Box::pin(async {})
    }
}

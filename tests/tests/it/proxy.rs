//! The drop-in proxy of a worker started as the binary starts it, called
//! over real sockets as an SDK calls a provider, in front of a fake
//! OpenAI-compatible upstream on loopback that records what it receives.
//! Real Redis and SQLite; the worker summarizes offline (extractive).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use compactor_e2e::db::{Backend, TestDb};
use compactor_e2e::{settings, small_model, start_worker, TestRedis, Worker};
use serde_json::{json, Value};

/// What the fake upstream received, and how it behaves.
#[derive(Default)]
struct Seen {
    /// Each chat request's body and headers, in order.
    requests: Vec<(HeaderMap, Value)>,
    /// Refuse, as too long, any request whose messages' JSON is longer
    /// than this (once each), as a model smaller than configured would.
    refuse_over: Option<usize>,
    /// Refusals made.
    refused: usize,
    /// Answers of the model `slow` given, and how many had been given when
    /// each chat request arrived.
    slow_answered: usize,
    arrived_after: Vec<usize>,
}

#[derive(Clone, Default)]
struct Upstream(Arc<Mutex<Seen>>);

impl Upstream {
    fn requests(&self) -> Vec<(HeaderMap, Value)> {
        self.0.lock().unwrap().requests.clone()
    }
}

/// A chat completion: a tool call when the user asks for the weather, a
/// 429 for the model `rate-limited`, else an answer naming the turn.
async fn completions(
    State(upstream): State<Upstream>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let messages = body["messages"].to_string();
    {
        let mut seen = upstream.0.lock().unwrap();
        seen.requests.push((headers, body.clone()));
        let answered = seen.slow_answered;
        seen.arrived_after.push(answered);
        if seen.refuse_over.is_some_and(|limit| messages.len() > limit) {
            seen.refused += 1;
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": {"message": "This model's maximum context length is 4096 tokens.",
                    "type": "invalid_request_error", "code": "context_length_exceeded"}})),
            )
                .into_response();
        }
    }
    if body["model"] == "rate-limited" {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [
                ("retry-after", "7"),
                ("x-ratelimit-remaining-requests", "0"),
            ],
            Json(json!({"error": {"message": "Rate limit reached", "type": "requests"}})),
        )
            .into_response();
    }
    let n = body["messages"].as_array().map_or(0, Vec::len);
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    if body["model"] == "slow" {
        // A model that takes its time; counted once it answered.
        tokio::time::sleep(Duration::from_millis(500)).await;
        upstream.0.lock().unwrap().slow_answered += 1;
    }
    let wants_tool = last["role"] == "user"
        && last["content"]
            .as_str()
            .is_some_and(|c| c.contains("weather"));
    let message = if wants_tool {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{n}"),
            "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]})
    } else {
        json!({"role": "assistant", "content": format!("Answer to request with {n} messages."), "refusal": null})
    };
    if body["stream"] == true {
        let mut events = String::new();
        let delta = |d: Value| {
            format!(
                "data: {}\n\n",
                json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d}]})
            )
        };
        events += &delta(json!({"role": "assistant", "content": ""}));
        if let Some(text) = message["content"].as_str() {
            for piece in text.split_inclusive(' ') {
                events += &delta(json!({"content": piece}));
            }
        }
        if let Some(calls) = message["tool_calls"].as_array() {
            for (i, c) in calls.iter().enumerate() {
                events += &delta(
                    json!({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                    "function": {"name": c["function"]["name"], "arguments": ""}}]}),
                );
                events += &delta(json!({"tool_calls": [{"index": i,
                    "function": {"arguments": c["function"]["arguments"]}}]}));
            }
        }
        events += "data: [DONE]\n\n";
        return ([("content-type", "text/event-stream")], events).into_response();
    }
    Json(json!({"id": "c", "object": "chat.completion", "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": messages.len() / 4, "completion_tokens": 10, "total_tokens": messages.len() / 4 + 10}}))
    .into_response()
}

/// An Anthropic message: a `tool_use` when the user asks for the weather,
/// else an answer naming the turn; streamed as Anthropic streams.
async fn messages(
    State(upstream): State<Upstream>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    upstream
        .0
        .lock()
        .unwrap()
        .requests
        .push((headers, body.clone()));
    let n = body["messages"].as_array().map_or(0, Vec::len);
    let last = &body["messages"][n.saturating_sub(1)];
    let wants_tool = last["content"]
        .as_str()
        .is_some_and(|c| c.contains("weather"));
    let content = if wants_tool {
        json!([{"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": format!("toolu_{n}"), "name": "get_weather", "input": {"city": "Oslo"}}])
    } else {
        json!([{"type": "text", "text": format!("Answer to request with {n} messages.")}])
    };
    if body["stream"] == true {
        let mut events = String::new();
        let mut event = |name: &str, data: Value| {
            events += &format!("event: {name}\ndata: {data}\n\n");
        };
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "m", "type": "message",
            "role": "assistant", "content": [], "model": body["model"],
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        );
        for (i, block) in content.as_array().unwrap().iter().enumerate() {
            if block["type"] == "text" {
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i,
                    "content_block": {"type": "text", "text": ""}}),
                );
                for piece in block["text"].as_str().unwrap().split_inclusive(' ') {
                    event(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": piece}}),
                    );
                }
            } else {
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i,
                    "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}),
                );
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": block["input"].to_string()}}),
                );
            }
            event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": i}),
            );
        }
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 12}}),
        );
        event("message_stop", json!({"type": "message_stop"}));
        return ([("content-type", "text/event-stream")], events).into_response();
    }
    Json(
        json!({"id": "m", "type": "message", "role": "assistant", "model": body["model"],
        "content": content, "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 12}}),
    )
    .into_response()
}

async fn models() -> Json<Value> {
    Json(json!({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}))
}

/// Serves the fake upstream on a loopback port.
async fn upstream() -> (Upstream, SocketAddr) {
    let upstream = Upstream::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/v1/messages", post(messages))
        .route("/v1/models", get(models))
        .with_state(upstream.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (upstream, addr)
}

/// A worker whose proxy sends on to `upstream`, with an 8,000-token window.
async fn proxy_worker(db: &TestDb, redis: &TestRedis, upstream: SocketAddr) -> Worker {
    let mut s = settings(&db.url, redis, None);
    s.engine = small_model();
    s.proxy.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    s.proxy.openai_upstream = format!("http://{upstream}");
    s.proxy.anthropic_upstream = format!("http://{upstream}");
    s.proxy.max_wait = Duration::from_secs(10);
    start_worker(s).await
}

/// A worker whose proxy sends on to a fresh fake upstream, on `backend`.
async fn start(backend: Backend) -> (TestDb, TestRedis, Upstream, Worker) {
    let db = TestDb::new(backend).await;
    let redis = TestRedis::new();
    let (upstream, addr) = upstream().await;
    let worker = proxy_worker(&db, &redis, addr).await;
    (db, redis, upstream, worker)
}

/// A client that resends the whole history each turn, as SDKs do.
struct Chat {
    http: reqwest::Client,
    url: String,
    workstream: String,
    messages: Vec<Value>,
}

impl Chat {
    fn new(worker: &Worker, workstream: &str) -> Chat {
        Chat {
            http: reqwest::Client::new(),
            url: format!("{}/v1/chat/completions", worker.proxy_url()),
            workstream: workstream.to_owned(),
            messages: vec![json!({"role": "system", "content": "You are a terse assistant."})],
        }
    }

    /// Sends the history plus `user`; keeps the answer in the history.
    async fn turn(&mut self, user: &str, stream: bool) -> Value {
        self.messages.push(json!({"role": "user", "content": user}));
        let answer = self.send(stream).await;
        self.messages.push(answer.clone());
        answer
    }

    /// Sends the history as it is; the answer's message.
    async fn send(&self, stream: bool) -> Value {
        let response = self
            .http
            .post(&self.url)
            .header("authorization", "Bearer sk-test-key")
            .header("x-compactor-workstream", &self.workstream)
            .json(&json!({"model": "fake-model", "messages": self.messages, "stream": stream}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        if !stream {
            let body: Value = response.json().await.unwrap();
            return body["choices"][0]["message"].clone();
        }
        // Put the streamed deltas together as an SDK does.
        let text = response.text().await.unwrap();
        let mut content = String::new();
        let mut calls: Vec<Value> = Vec::new();
        for line in text.lines() {
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            if data == "[DONE]" {
                continue;
            }
            let chunk: Value = serde_json::from_str(data).unwrap();
            let delta = &chunk["choices"][0]["delta"];
            content += delta["content"].as_str().unwrap_or_default();
            for c in delta["tool_calls"].as_array().into_iter().flatten() {
                let i = c["index"].as_u64().unwrap() as usize;
                if i == calls.len() {
                    calls.push(json!({"id": c["id"], "type": "function",
                        "function": {"name": c["function"]["name"], "arguments": ""}}));
                }
                let args = calls[i]["function"]["arguments"]
                    .as_str()
                    .unwrap()
                    .to_owned()
                    + c["function"]["arguments"].as_str().unwrap_or_default();
                calls[i]["function"]["arguments"] = args.into();
            }
        }
        let mut message = json!({"role": "assistant", "content": content});
        if !calls.is_empty() {
            message["content"] = Value::Null;
            message["tool_calls"] = calls.into();
        }
        message
    }
}

/// Stored messages of the workstream `chat/<entity>`.
async fn stored(db: &TestDb, entity: &str) -> i64 {
    db.scalar(&format!(
        "SELECT COUNT(*) AS n FROM messages m JOIN workstreams w ON w.id = m.workstream_id \
         WHERE w.domain = 'chat' AND w.entity_id = '{entity}'"
    ))
    .await
}

/// Waits until the workstream `chat/<entity>` stores `n` messages (a
/// turn is stored after its answer is passed back); panics after 5 s,
/// naming `what` did not happen.
async fn until_stored(db: &TestDb, entity: &str, n: i64, what: &str) {
    compactor_e2e::eventually(what, Duration::from_secs(5), || async {
        stored(db, entity).await == n
    })
    .await;
}

/// The head of the workstream `chat/<entity>`.
async fn head(db: &TestDb, entity: &str) -> i64 {
    db.scalar(&format!(
        "SELECT head_message_id AS n FROM workstreams WHERE domain = 'chat' AND entity_id = '{entity}'"
    ))
    .await
}

/// Estimated tokens of a request's messages, as the worker estimates
/// them (characters of content and tool calls, by 3).
fn tokens(body: &Value) -> usize {
    let chars: usize = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            m["content"].as_str().map_or(0, str::len)
                + m["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        c["function"]["name"].as_str().map_or(0, str::len)
                            + c["function"]["arguments"].as_str().map_or(0, str::len)
                    })
                    .sum::<usize>()
        })
        .sum();
    chars / 3
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_resent_whole_each_turn_reaches_the_upstream_within_its_window_and_is_stored_once(
) {
    let (db, _redis, upstream, worker) = start(Backend::Sqlite).await;
    let mut chat = Chat::new(&worker, "chat/long");
    let turns = 150;
    for t in 0..turns {
        let user = format!(
            "Turn {t}: the order ORD-{:05} ships to warehouse {} and the invoice total is EUR {}.{:02}; \
             please keep track of it along with the earlier orders we discussed. {}",
            10_000 + t * 7,
            t % 13,
            100 + t * 3,
            t % 100,
            "The customer asked us to confirm the delivery slot, the pallet count and the \
             customs paperwork before dispatch, and to call back if anything changes. "
                .repeat(2)
        );
        // Every fifth turn streams, every seventh asks for a tool.
        if t % 7 == 3 {
            let call = chat.turn("What is the weather in Oslo?", t % 5 == 0).await;
            let id = call["tool_calls"][0]["id"].clone();
            assert_eq!(call["tool_calls"][0]["function"]["name"], "get_weather");
            chat.messages
                .push(json!({"role": "tool", "tool_call_id": id, "content": "-3 °C, clear"}));
            let answer = chat.send(false).await;
            chat.messages.push(answer);
        }
        chat.turn(&user, t % 5 == 0).await;
    }
    let requests = upstream.requests();
    // Stored once: every message of the client's history (the system
    // prompt aside), however often it was resent.
    let sent = chat.messages.len() as i64 - 1;
    compactor_e2e::eventually(
        "every message stored once",
        Duration::from_secs(10),
        || async { stored(&db, "long").await == sent },
    )
    .await;
    // Compactions ran, and the upstream never got more than the window.
    let compacted: Vec<&Value> = requests
        .iter()
        .map(|(_, b)| b)
        .filter(|b| b["messages"].as_array().unwrap().len() < 20)
        .collect();
    assert!(!compacted.is_empty(), "no request was compacted");
    let largest = requests.iter().map(|(_, b)| tokens(b)).max().unwrap();
    assert!(largest <= 8_000, "the upstream got {largest} tokens");
    let history = tokens(&json!({"messages": chat.messages}));
    assert!(history > 3 * 8_000, "the history is {history} tokens");
    // The last request: the client's system prompt, the summary, then the
    // newest messages as the client wrote them; every other field as sent.
    let (headers, last) = requests.last().unwrap();
    let messages = last["messages"].as_array().unwrap();
    assert_eq!(messages[0], chat.messages[0]);
    assert_eq!(messages[1]["role"], "system");
    assert!(messages[1]["content"].as_str().unwrap().contains("summary"));
    assert_eq!(
        messages.last().unwrap(),
        chat.messages
            .last()
            .map(|_| &chat.messages[chat.messages.len() - 2])
            .unwrap()
    );
    assert_eq!(last["model"], "fake-model");
    assert_eq!(headers["authorization"], "Bearer sk-test-key");
    assert!(headers.get("x-compactor-workstream").is_none());
    // The newest exact value is in what the model got.
    assert!(last["messages"]
        .to_string()
        .contains(&format!("ORD-{:05}", 10_000 + (turns - 1) * 7)));
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_earlier_message_starts_a_branch_and_an_asked_again_turn_moves_the_head() {
    let (db, _redis, upstream, worker) = start(Backend::Sqlite).await;
    let mut chat = Chat::new(&worker, "chat/edit");
    for t in 0..4 {
        chat.turn(&format!("Question {t}"), false).await;
    }
    // The answer is stored after it is passed back.
    until_stored(&db, "edit", 8, "four turns stored").await;
    // The user edits question 2: the history from there is new.
    chat.messages.truncate(5);
    chat.messages
        .push(json!({"role": "user", "content": "Question 2, rephrased"}));
    let answer = chat.send(false).await;
    chat.messages.push(answer);
    // Stored: the 8 of the first branch, and the edit and its answer.
    until_stored(&db, "edit", 10, "the edited branch stored").await;
    let head_now = head(&db, "edit").await;
    let newest = db
        .scalar("SELECT MAX(m.id) AS n FROM messages m JOIN workstreams w ON w.id = m.workstream_id WHERE w.entity_id = 'edit'")
        .await;
    assert_eq!(head_now, newest, "the head is the edited branch's answer");
    // The upstream got the edited history, not the stored first branch.
    let (_, last) = upstream.requests().last().cloned().unwrap();
    let text = last["messages"].to_string();
    assert!(text.contains("Question 2, rephrased") && !text.contains("Question 3"));
    // Asking again from the edited question stores nothing more (the
    // same answer comes back), and the head is that answer again.
    chat.messages.pop();
    chat.send(false).await;
    compactor_e2e::eventually(
        "the head back at the answer",
        Duration::from_secs(5),
        || async { head(&db, "edit").await == newest },
    )
    .await;
    assert_eq!(stored(&db, "edit").await, 10);
    worker.stop().await;
}

/// Two requests at once for one workstream go one after the other: the
/// second reaches the upstream only once the first was answered (its
/// answer stored), so it reads what the first wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_for_one_workstream_go_one_after_the_other() {
    let (db, _redis, upstream, worker) = start(Backend::Sqlite).await;
    let mut chat = Chat::new(&worker, "chat/order");
    chat.turn("First question", false).await;
    let send = |model: &str, user: &str| {
        let mut messages = chat.messages.clone();
        messages.push(json!({"role": "user", "content": user}));
        chat.http
            .post(&chat.url)
            .header("x-compactor-workstream", &chat.workstream)
            .json(&json!({"model": model, "messages": messages}))
            .send()
    };
    let slow = tokio::spawn(send("slow", "Second question"));
    // The slow request is at the upstream before the other is sent.
    compactor_e2e::eventually(
        "the slow request sent on",
        Duration::from_secs(5),
        || async { upstream.0.lock().unwrap().requests.len() == 2 },
    )
    .await;
    let other = send("fake-model", "Another second question").await.unwrap();
    assert_eq!(other.status(), 200);
    assert_eq!(slow.await.unwrap().unwrap().status(), 200);
    let arrived_after = upstream.0.lock().unwrap().arrived_after.clone();
    assert_eq!(
        arrived_after,
        [0, 0, 1],
        "the second request reached the upstream after the slow one was answered"
    );
    // Both turns are stored: the first's answer, then the other question
    // on a branch from the first turn, and its answer.
    until_stored(&db, "order", 6, "both turns stored").await;
    worker.stop().await;
}

/// A turn whose history is the last one's plus a message stores that
/// message beside the request, with the answer; when no answer comes (the
/// upstream refused the turn), it is stored alone, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_the_upstream_refuses_still_stores_its_new_message_once() {
    let (db, _redis, _upstream, worker) = start(Backend::Sqlite).await;
    let mut chat = Chat::new(&worker, "chat/refused");
    chat.turn("First question", false).await;
    chat.turn("Second question", false).await;
    until_stored(&db, "refused", 4, "two turns stored").await;
    chat.messages
        .push(json!({"role": "user", "content": "Third question"}));
    let refused = chat
        .http
        .post(&chat.url)
        .header("x-compactor-workstream", &chat.workstream)
        .json(&json!({"model": "rate-limited", "messages": chat.messages}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    until_stored(&db, "refused", 5, "the refused turn's message stored").await;
    // Asked again, it is not stored twice; the answer follows it.
    let answer = chat.send(false).await;
    assert!(answer["content"].as_str().unwrap().starts_with("Answer"));
    until_stored(&db, "refused", 6, "the answer stored").await;
    let newest = db
        .scalar("SELECT MAX(m.id) AS n FROM messages m JOIN workstreams w ON w.id = m.workstream_id WHERE w.entity_id = 'refused'")
        .await;
    let last_text = db
        .scalar(&format!(
            "SELECT COUNT(*) AS n FROM messages WHERE id = {newest} AND role = 'assistant'"
        ))
        .await;
    assert_eq!(last_text, 1, "the newest stored message is the answer");
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_the_upstream_refuses_as_too_long_is_compacted_and_sent_once_more() {
    let (_db, _redis, upstream, worker) = start(Backend::Sqlite).await;
    let mut chat = Chat::new(&worker, "chat/refused");
    for t in 0..12 {
        chat.turn(
            &format!("Message {t}: {}", "details of the plan ".repeat(20)),
            false,
        )
        .await;
    }
    // The model is smaller than configured: it refuses what is over 6,000
    // characters.
    upstream.0.lock().unwrap().refuse_over = Some(6_000);
    chat.messages
        .push(json!({"role": "user", "content": "And now?"}));
    let answer = chat.send(false).await;
    assert!(answer["content"].as_str().unwrap().starts_with("Answer"));
    let requests = upstream.requests();
    let (_, retried) = requests.last().unwrap();
    assert_eq!(upstream.0.lock().unwrap().refused, 1);
    assert!(retried["messages"].to_string().len() <= 6_000);
    assert!(retried["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("summary"));
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_pass_through_with_their_headers_and_requests_naming_no_workstream_go_on_untouched()
{
    let (db, _redis, upstream, worker) = start(Backend::Sqlite).await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", worker.proxy_url());
    // A 429, with its headers.
    let limited = http
        .post(&url)
        .header("x-compactor-workstream", "chat/limited")
        .json(&json!({"model": "rate-limited", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["retry-after"], "7");
    assert_eq!(limited.headers()["x-ratelimit-remaining-requests"], "0");
    // No workstream: the body goes on byte for byte, nothing is stored.
    let raw =
        r#"{"model":"fake-model",  "messages":[{"role":"user","content":"hello"}], "seed": 3}"#;
    let plain = http
        .post(&url)
        .header("content-type", "application/json")
        .body(raw)
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 200);
    let (_, received) = upstream.requests().last().cloned().unwrap();
    assert_eq!(received, serde_json::from_str::<Value>(raw).unwrap());
    assert_eq!(
        db.scalar("SELECT COUNT(*) AS n FROM workstreams WHERE entity_id <> 'limited'")
            .await,
        0
    );
    // Other routes are forwarded.
    let models: Value = http
        .get(format!("{}/v1/models", worker.proxy_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "fake-model");
    // A malformed workstream is refused in the provider's error shape.
    let bad = http
        .post(&url)
        .header("x-compactor-workstream", "chat/bad key")
        .json(&json!({"model": "fake-model", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_workstream");
    // Counted, by what was sent on.
    let metrics = http
        .get(format!("{}/metrics", worker.admin_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains(
        r#"compactor_proxy_requests_total{route="chat_completions",context="forwarded",status="2xx"} 1"#
    ), "{metrics}");
    assert!(metrics.contains(
        r#"compactor_proxy_requests_total{route="other",context="forwarded",status="2xx"} 1"#
    ));
    worker.stop().await;
}

/// Anthropic's SSE: the blocks of the message the events put together.
fn anthropic_streamed(text: &str) -> Value {
    let mut blocks: Vec<Value> = Vec::new();
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let event: Value = serde_json::from_str(data).unwrap();
        let i = event["index"].as_u64().unwrap_or(0) as usize;
        match event["type"].as_str().unwrap() {
            "content_block_start" => blocks.push(event["content_block"].clone()),
            "content_block_delta" if event["delta"]["type"] == "text_delta" => {
                let text = blocks[i]["text"].as_str().unwrap().to_owned()
                    + event["delta"]["text"].as_str().unwrap();
                blocks[i]["text"] = text.into();
            }
            "content_block_delta" => {
                blocks[i]["input"] =
                    serde_json::from_str(event["delta"]["partial_json"].as_str().unwrap()).unwrap();
            }
            _ => {}
        }
    }
    Value::Array(blocks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_conversation_is_compacted_with_the_summary_after_its_system_prompt() {
    let (db, _redis, upstream, worker) = start(Backend::Sqlite).await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/messages", worker.proxy_url());
    let mut history: Vec<Value> = Vec::new();
    let ask =
        |history: Vec<Value>, stream: bool| {
            let http = http.clone();
            let url = url.clone();
            async move {
                let response = http
                .post(&url)
                .header("x-api-key", "sk-ant-test")
                .header("anthropic-version", "2023-06-01")
                .header("x-compactor-workstream", "chat/claude")
                .json(&json!({"model": "claude-test", "max_tokens": 256, "system": "You are terse.",
                    "messages": history, "stream": stream}))
                .send()
                .await
                .unwrap();
                assert_eq!(response.status(), 200);
                if stream {
                    anthropic_streamed(&response.text().await.unwrap())
                } else {
                    response.json::<Value>().await.unwrap()["content"].clone()
                }
            }
        };
    for t in 0..120 {
        let user = if t % 9 == 4 {
            "What is the weather in Oslo?".to_owned()
        } else {
            format!(
                "Turn {t}: booking BK-{:05} for {} guests at the Hotel Lindqvist, arriving day {}. {}",
                20_000 + t * 11,
                t % 6 + 1,
                t % 28 + 1,
                "Please remember the dietary notes and the late check-in request. ".repeat(9)
            )
        };
        history.push(json!({"role": "user", "content": user}));
        let content = ask(history.clone(), t % 4 == 0).await;
        history.push(json!({"role": "assistant", "content": content.clone()}));
        if let Some(call) = content
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "tool_use")
        {
            history.push(json!({"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": call["id"], "content": "-3 °C, clear"}]}));
            let content = ask(history.clone(), false).await;
            history.push(json!({"role": "assistant", "content": content}));
        }
    }
    let sent = history.len() as i64;
    compactor_e2e::eventually(
        "every message stored once",
        Duration::from_secs(10),
        || async { stored(&db, "claude").await == sent },
    )
    .await;
    let requests = upstream.requests();
    let largest = requests
        .iter()
        .map(|(_, b)| anthropic_tokens(b))
        .max()
        .unwrap();
    assert!(largest <= 8_000, "the upstream got {largest} tokens");
    let whole = anthropic_tokens(&json!({"messages": history}));
    assert!(whole > 3 * 8_000, "the history is {whole} tokens");
    let (headers, last) = requests.last().unwrap();
    assert_eq!(headers["x-api-key"], "sk-ant-test");
    let system = last["system"].as_array().unwrap();
    assert_eq!(system[0], json!({"type": "text", "text": "You are terse."}));
    assert!(system[1]["text"].as_str().unwrap().contains("summary"));
    assert_eq!(last["messages"][0]["role"], "user");
    assert!(last["messages"].as_array().unwrap().len() < history.len() / 4);
    assert!(last
        .to_string()
        .contains(&format!("BK-{:05}", 20_000 + 119 * 11)));
    worker.stop().await;
}

/// Estimated tokens of an Anthropic request's messages (text, tool
/// inputs and results, by 3), as the worker estimates them.
fn anthropic_tokens(body: &Value) -> usize {
    let chars: usize = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| match &m["content"] {
            Value::String(s) => s.len(),
            Value::Array(blocks) => blocks
                .iter()
                .map(|b| {
                    b["text"].as_str().map_or(0, str::len)
                        + b["content"].as_str().map_or(0, str::len)
                        + if b["type"] == "tool_use" {
                            b["input"].to_string().len()
                        } else {
                            0
                        }
                })
                .sum(),
            _ => 0,
        })
        .sum();
    chars / 3
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_database_cut_off_requests_go_on_as_they_came_and_are_stored_on_a_later_turn() {
    use compactor_e2e::proxy::{ChaosProxy, Mode};
    let db = TestDb::new(Backend::Postgres).await;
    let redis = TestRedis::new();
    let chaos = ChaosProxy::start("127.0.0.1:5432".parse().unwrap()).await;
    let through = db
        .url
        .replace("127.0.0.1:5432", &format!("127.0.0.1:{}", chaos.port()));
    assert_ne!(through, db.url, "the test database is on 127.0.0.1:5432");
    let (upstream, addr) = upstream().await;
    let mut s = settings(&db.url, &redis, None);
    s.database.url = compactor_producer::settings::ConnectionUrl::new(through.clone());
    s.engine = small_model();
    s.proxy.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    s.proxy.openai_upstream = format!("http://{addr}");
    let worker = start_worker(s).await;
    let mut chat = Chat::new(&worker, "chat/cut");
    chat.turn("Before the outage.", false).await;
    until_stored(&db, "cut", 2, "the first turn stored").await;

    chaos.set(Mode::Cut);
    // The application keeps working: the request goes on as it came.
    let answer = chat.turn("During the outage.", false).await;
    assert!(answer["content"].as_str().unwrap().starts_with("Answer"));
    let (_, during) = upstream.requests().last().cloned().unwrap();
    assert_eq!(during["messages"], json!(chat.messages[..4]));

    chaos.set(Mode::Pass);
    let status = format!("{}/v1/workstreams/chat/cut/status", worker.admin_url());
    compactor_e2e::eventually(
        "the database answers again",
        Duration::from_secs(30),
        || async { reqwest::get(&status).await.is_ok_and(|r| r.status() == 200) },
    )
    .await;
    // A later turn resends the history: what the outage missed is stored
    // (a connection the cut left broken may fail one more turn, which
    // goes on as it came too).
    let mut caught_up = false;
    for t in 0..10 {
        chat.turn(&format!("After it, turn {t}."), false).await;
        // Its writes end after the answer is passed back.
        let sent = chat.messages.len() as i64 - 1;
        caught_up = compactor_e2e::within(Duration::from_secs(2), || async {
            stored(&db, "cut").await == sent
        })
        .await;
        if caught_up {
            break;
        }
    }
    assert!(
        caught_up,
        "stored {} of {}",
        stored(&db, "cut").await,
        chat.messages.len() - 1
    );
    let metrics = reqwest::get(format!("{}/metrics", worker.admin_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let degraded = metrics
        .lines()
        .find(|l| l.starts_with(r#"compactor_proxy_requests_total{route="chat_completions",context="degraded",status="2xx"}"#))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse::<u64>().ok());
    assert!(degraded.is_some_and(|n| n >= 1), "{degraded:?}");
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_tells_the_workstreams_the_proxy_serves() {
    let (_db, _redis, _upstream, worker) = start(Backend::Sqlite).await;
    let mut chat = Chat::new(&worker, "chat/viaproxy");
    chat.turn("Hello through the proxy.", false).await;
    let http = reqwest::Client::new();
    let appended = http
        .post(format!(
            "{}/v1/workstreams/chat/viaapi/messages",
            worker.admin_url()
        ))
        .json(&json!({"messages": [{"role": "user", "parts": [{"type": "text", "text": "Hello over HTTP."}]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(appended.status(), 200);
    let page = http
        .get(format!("{}/ui/workstreams?domain=chat", worker.admin_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let row = |entity: &str| {
        page.split("<tr>")
            .find(|r| r.contains(&format!("chat/{entity}</a>")))
            .unwrap_or_else(|| panic!("no row for {entity}: {page}"))
            .to_owned()
    };
    assert!(
        row("viaproxy").contains("<td class=\"via\">proxy</td>"),
        "{page}"
    );
    assert!(
        row("viaapi").contains("<td class=\"via\">API</td>"),
        "{page}"
    );
    worker.stop().await;
}

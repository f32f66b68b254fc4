//! A webhook receiver on loopback (an axum server) for the events tests
//! and the chaos scenario that kills a worker between commit and delivery:
//! it records every request it answers 2xx, checks the Standard Webhooks
//! signature with an HMAC of its own, can go down (nothing listens on its
//! port) and come back on the same port, and can hold requests unanswered
//! (a receiver that is slow, or a delivery still in flight).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The receiver's signing secret, as configured (`whsec_<base64>`).
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub id: String,
    pub timestamp: String,
    pub signature: String,
    pub raw: String,
    pub body: Value,
}

impl Delivered {
    /// Checks the Standard Webhooks signature with an HMAC of our own, and
    /// that the id header is the event's id.
    pub fn assert_signed(&self) {
        let key = base64::engine::general_purpose::STANDARD
            .decode(SECRET.strip_prefix("whsec_").unwrap())
            .unwrap();
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
        mac.update(format!("{}.{}.{}", self.id, self.timestamp, self.raw).as_bytes());
        let expected = format!(
            "v1,{}",
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
        );
        assert_eq!(self.signature, expected, "signed with the secret");
        assert_eq!(
            self.body["id"],
            self.id.as_str(),
            "webhook-id is the event id"
        );
        let sent: i64 = self.timestamp.parse().unwrap();
        assert!(
            (chrono::Utc::now().timestamp() - sent).abs() < 300,
            "a current timestamp"
        );
    }
}

/// What the receiver's handler shares: every request, and the status it
/// answers.
#[derive(Clone, Default)]
struct Inbox {
    got: Arc<Mutex<Vec<Delivered>>>,
    status: Arc<AtomicU16>,
    /// While set, requests wait unanswered.
    held: Arc<AtomicBool>,
    /// Requests waiting unanswered now.
    waiting: Arc<AtomicUsize>,
}

/// A webhook receiver on loopback that can go down (nothing listens on
/// its port: connections are refused) and come back on the same port.
pub struct Receiver {
    port: u16,
    inbox: Inbox,
    stop: CancellationToken,
    server: Option<JoinHandle<()>>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let inbox = Inbox::default();
        inbox.status.store(200, Ordering::SeqCst);
        let mut receiver = Receiver {
            port,
            inbox,
            stop: CancellationToken::new(),
            server: None,
        };
        receiver.serve(listener);
        receiver
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(self.inbox.clone());
        self.stop = CancellationToken::new();
        let stop = self.stop.clone();
        self.server = Some(tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
                .unwrap();
        }));
    }

    /// Goes down: stops listening and closes its connections.
    pub async fn stop(&mut self) {
        self.stop.cancel();
        if let Some(server) = self.server.take() {
            server.await.unwrap();
        }
    }

    /// Comes back on the same port.
    pub async fn restart(&mut self) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .unwrap();
        self.serve(listener);
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// Hold every request unanswered from now on (until [`Receiver::release`]):
    /// the sender's delivery stays in flight.
    pub fn hold(&self) {
        self.inbox.held.store(true, Ordering::SeqCst);
    }

    /// Answer held requests and every later one.
    pub fn release(&self) {
        self.inbox.held.store(false, Ordering::SeqCst);
    }

    /// How many requests wait unanswered now (held).
    pub fn waiting(&self) -> usize {
        self.inbox.waiting.load(Ordering::SeqCst)
    }

    /// Answer every request with `status` from now on.
    pub fn answer(&self, status: StatusCode) {
        self.inbox.status.store(status.as_u16(), Ordering::SeqCst);
    }

    /// Every request answered 2xx, duplicates included, in arrival order.
    pub fn all(&self) -> Vec<Delivered> {
        self.inbox.got.lock().unwrap().clone()
    }

    /// The events received, deduplicated by id (first arrival kept).
    pub fn unique(&self) -> Vec<Delivered> {
        let mut seen = BTreeSet::new();
        self.all()
            .into_iter()
            .filter(|e| seen.insert(e.id.clone()))
            .collect()
    }

    pub fn kinds(&self) -> Vec<String> {
        self.unique()
            .iter()
            .map(|e| e.body["type"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// The kinds received about entity `entity_id`.
    pub fn kinds_of(&self, entity_id: &str) -> BTreeSet<String> {
        self.unique()
            .iter()
            .filter(|e| e.body["entity_id"] == entity_id)
            .map(|e| e.body["type"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The receiver's one route: records the request if it answers 2xx (after
/// holding it while the receiver holds requests; a request whose sender
/// went away meanwhile is dropped unanswered and unrecorded).
async fn receive(State(inbox): State<Inbox>, headers: HeaderMap, raw: String) -> StatusCode {
    if inbox.held.load(Ordering::SeqCst) {
        let _waiting = Waiting::new(&inbox.waiting);
        while inbox.held.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let status = StatusCode::from_u16(inbox.status.load(Ordering::SeqCst)).unwrap();
    if status.is_success() {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        inbox.got.lock().unwrap().push(Delivered {
            id: header("webhook-id"),
            timestamp: header("webhook-timestamp"),
            signature: header("webhook-signature"),
            body: serde_json::from_str(&raw).unwrap_or(Value::Null),
            raw,
        });
    }
    status
}

/// Counts a held request while it waits, dropped or answered.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Waiting<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

//! The web console's test fixture, shared by its HTTP tests
//! (`tests/it/console.rs`) and its browser tests (`tests/browser/`): a
//! worker with real data behind its `/ui` — PostgreSQL, a queue of its own
//! on the machine's Redis, summaries from the fake LLM (wiremock) — and a
//! cookie-keeping HTTP client of the console.
//!
//! The data: one workstream compacted twice (a timeline of two runs,
//! each with its summary, so the second has a diff), and one whose
//! compaction was dead-lettered (the LLM refused it with a 401 and the
//! extractive fallback is off), with the LLM answering again afterwards so
//! a retry completes.

use std::collections::BTreeMap;
use std::time::Duration;

use compactor_producer::client::Compactor;
use compactor_shared::EntityKey;
use compactor_worker::settings::AdminToken;
use reqwest::header::{HeaderMap, COOKIE, LOCATION, SET_COOKIE};
use reqwest::StatusCode;

use crate::db::{Backend, TestDb};
use crate::{
    client, conversation, eventually, settings, start_worker, FakeLlm, Fault, TestRedis, Worker,
};

/// A live worker with data to show.
pub struct ConsoleFixture {
    pub db: TestDb,
    pub redis: TestRedis,
    pub llm: FakeLlm,
    pub worker: Worker,
    pub client: Compactor,
    /// Compacted twice.
    pub timeline: EntityKey,
    /// Its job is dead-lettered.
    pub dead: EntityKey,
    /// `http://127.0.0.1:<port>` of the admin server.
    pub base: String,
}

/// A domain and entity id of their own for each fixture.
fn unique_key(what: &str) -> EntityKey {
    EntityKey::parse("chat", &crate::unique_name(what)).unwrap()
}

impl ConsoleFixture {
    /// Starts the worker (with `token` as its admin token, if any) and
    /// makes the data.
    pub async fn start(token: Option<&str>) -> ConsoleFixture {
        let db = TestDb::new(Backend::Postgres).await;
        let redis = TestRedis::new();
        let llm = FakeLlm::start().await;
        let mut s = settings(&db.url, &redis, Some(&llm.url()));
        s.llm.fallback_to_extractive = false;
        s.admin.token = token.map(AdminToken::new);
        let worker = start_worker(s).await;
        let client = client(&db, &redis).await;
        let base = worker.admin_url();
        let fixture = ConsoleFixture {
            timeline: unique_key("timeline"),
            dead: unique_key("dead"),
            db,
            redis,
            llm,
            worker,
            client,
            base,
        };
        fixture.compact(&fixture.timeline, 1).await;
        fixture.compact(&fixture.timeline, 2).await;
        fixture.dead_letter(&fixture.dead).await;
        fixture
    }

    /// Stores more of the conversation in `key` and compacts it by hand,
    /// until it has `compactions` commits.
    pub async fn compact(&self, key: &EntityKey, compactions: i64) {
        self.client
            .append_messages(key, conversation(12 * compactions as usize))
            .await
            .unwrap();
        self.client.compact_now(key, None).await.unwrap();
        eventually(
            "the compaction commits",
            Duration::from_secs(30),
            || async {
                self.db
                    .store
                    .workstream(key)
                    .await
                    .unwrap()
                    .is_some_and(|ws| ws.compactions >= compactions)
            },
        )
        .await;
    }

    /// Makes `key`'s compaction die: the LLM refuses it, without a
    /// fallback. The LLM answers again afterwards.
    pub async fn dead_letter(&self, key: &EntityKey) {
        self.llm.fail_always(Some(Fault::Unauthorized));
        self.client
            .append_messages(key, conversation(10))
            .await
            .unwrap();
        self.client.compact_now(key, None).await.unwrap();
        let member = compactor_producer::queue::Keys::member(key);
        eventually(
            "the job is dead-lettered",
            Duration::from_secs(30),
            || async {
                self.client
                    .queue()
                    .dead_letters(10)
                    .await
                    .unwrap()
                    .iter()
                    .any(|d| d.member == member)
            },
        )
        .await;
        self.llm.fail_always(None);
    }

    /// The console's path of a workstream.
    pub fn path_of(key: &EntityKey) -> String {
        format!("/ui/workstreams/{}/{}", key.domain(), key.entity_id())
    }

    /// The id of the newest run of `key`.
    pub async fn newest_run(&self, key: &EntityKey) -> i64 {
        self.db.store.runs(key, 1).await.unwrap()[0].id
    }

    pub async fn stop(self) {
        self.worker.stop().await;
    }
}

/// One answer of the console.
#[derive(Debug)]
pub struct Page {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
}

impl Page {
    /// Where a redirect points.
    pub fn location(&self) -> Option<&str> {
        self.headers.get(LOCATION).and_then(|v| v.to_str().ok())
    }

    /// The value of the hidden `csrf` field of the page's forms.
    pub fn csrf(&self) -> Option<String> {
        let marker = "name=\"csrf-token\" content=\"";
        let start = self.text.find(marker)? + marker.len();
        let end = self.text[start..].find('"')? + start;
        Some(self.text[start..end].to_owned())
    }

    /// Whether this is the login page (and nothing else).
    pub fn is_login(&self) -> bool {
        self.text.contains("<title>Sign in · compactor</title>")
            && self.text.contains("action=\"/ui/login\"")
    }

    /// The `Set-Cookie` header of cookie `name`.
    pub fn set_cookie(&self, name: &str) -> Option<String> {
        self.headers
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with(&format!("{name}=")))
            .map(str::to_owned)
    }
}

/// A browser's view of the console over HTTP: keeps the cookies it is
/// given, follows no redirect by itself.
pub struct ConsoleClient {
    base: String,
    http: reqwest::Client,
    cookies: BTreeMap<String, String>,
}

impl ConsoleClient {
    pub fn new(base: &str) -> ConsoleClient {
        ConsoleClient {
            base: base.to_owned(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            cookies: BTreeMap::new(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Page {
        let request = if self.cookies.is_empty() {
            request
        } else {
            request.header(COOKIE, self.cookie_header())
        };
        let response = request.send().await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        for value in headers.get_all(SET_COOKIE).iter() {
            let value = value.to_str().unwrap();
            let pair = value.split(';').next().unwrap();
            let (name, v) = pair.split_once('=').unwrap();
            if v.is_empty() || value.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), v.to_owned());
            }
        }
        let text = response.text().await.unwrap();
        Page {
            status,
            headers,
            text,
        }
    }

    pub async fn get(&mut self, path: &str) -> Page {
        let request = self.http.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    /// Sends a form (`fields` as given; add `csrf` yourself).
    pub async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let body: String = fields
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.send(request).await
    }

    /// Signs in with `token` (reading the CSRF token off the login page).
    pub async fn sign_in(&mut self, token: &str) -> Page {
        let login = self.get("/ui/login").await;
        let csrf = login.csrf().unwrap();
        self.post(
            "/ui/login",
            &[("csrf", &csrf), ("token", token), ("next", "/ui")],
        )
        .await
    }

    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies.get(name).map(String::as_str)
    }
}

/// Percent-encodes a form value.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

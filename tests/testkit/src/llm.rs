//! An OpenAI-compatible chat-completions server on loopback (wiremock),
//! standing in for the LLM: it answers in the summary format the worker
//! asks for, records every request, and can be told to fail the next calls
//! in the ways real providers do.
//!
//! Each summary it writes carries a marker, `summary generation N` (N = how
//! many compaction answers it gave before, plus one), so a test can check
//! that every chunk's request carried the summary of the chunk before it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One way to fail a call.
#[derive(Debug, Clone)]
pub enum Fault {
    /// HTTP 429 with `Retry-After: <secs>`.
    RateLimited { retry_after_secs: u64 },
    /// HTTP 500.
    ServerError,
    /// Answers only after this long (longer than the client's timeout).
    Hang(Duration),
    /// A body that is not JSON.
    Malformed,
    /// A valid answer cut in half.
    Truncated,
    /// A reply whose content is empty.
    Empty,
    /// HTTP 400 "maximum context length" (OpenAI's error shape).
    ContextLength,
    /// HTTP 401.
    Unauthorized,
    /// A well-formed reply with this content (junk the checks must refuse).
    Answer(String),
    /// A summary stopped at the output limit (`finish_reason: length`).
    AtLimit,
}

/// A request the fake received.
#[derive(Debug, Clone)]
pub struct Call {
    pub system: String,
    pub user: String,
    /// When it arrived.
    pub at: std::time::Instant,
    /// How long the answer was held back (the configured delay, or a
    /// fault's hang).
    pub delay: Duration,
    /// The id of the first message in its transcript (`[#id ROLE]`), which
    /// tells whose workstream it summarizes.
    pub first_message: Option<i64>,
    /// The output budget it asked for.
    pub max_tokens: Option<u64>,
}

impl Call {
    /// The worker's health probe of an unhealthy provider, not a
    /// summarization.
    pub fn is_probe(&self) -> bool {
        self.system.to_lowercase().contains("health check")
    }
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    faults: VecDeque<Fault>,
    /// Fail every call with this, after the scripted faults.
    always: Option<Fault>,
    /// Context-length error for any user prompt longer than this (chars).
    max_prompt_chars: Option<usize>,
    summaries: u32,
    /// Every successful answer is held back this long.
    delay: Duration,
}

/// The fake LLM server.
pub struct FakeLlm {
    pub server: MockServer,
    state: Arc<Mutex<State>>,
}

struct Responder(Arc<Mutex<State>>);

impl FakeLlm {
    pub async fn start() -> FakeLlm {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State::default()));
        Mock::given(method("POST"))
            .and(path("/chat/completions"))
            .respond_with(Responder(state.clone()))
            .mount(&server)
            .await;
        FakeLlm { server, state }
    }

    /// Base URL to configure (`…/chat/completions` is appended).
    pub fn url(&self) -> String {
        self.server.uri()
    }

    /// The next calls fail with these, in order.
    pub fn fail_next(&self, faults: impl IntoIterator<Item = Fault>) {
        self.state.lock().unwrap().faults.extend(faults);
    }

    /// Every call (after scripted faults) fails with `fault`; `None`
    /// heals the fake.
    pub fn fail_always(&self, fault: Option<Fault>) {
        self.state.lock().unwrap().always = fault;
    }

    /// Successful answers are held back this long (a slow model).
    pub fn answer_after(&self, delay: Duration) {
        self.state.lock().unwrap().delay = delay;
    }

    /// Prompts longer than `chars` get a context-length error.
    pub fn limit_prompt(&self, chars: usize) {
        self.state.lock().unwrap().max_prompt_chars = Some(chars);
    }

    /// Requests received so far (faulted ones included).
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// Compaction summaries written so far.
    pub fn summaries(&self) -> u32 {
        self.state.lock().unwrap().summaries
    }
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let content = |role: &str| -> String {
            body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m["role"] == role)
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let user = content("user");
        let first_message = user
            .split("[#")
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|digits| digits.parse().ok());
        let mut state = self.0.lock().unwrap();
        let fault = state.faults.pop_front().or_else(|| state.always.clone());
        let delay = match &fault {
            Some(Fault::Hang(d)) => *d,
            Some(_) => Duration::ZERO,
            None => state.delay,
        };
        let call = Call {
            system: content("system"),
            user,
            at: std::time::Instant::now(),
            delay,
            first_message,
            max_tokens: body["max_tokens"].as_u64(),
        };
        state.calls.push(call.clone());
        let too_long = state
            .max_prompt_chars
            .is_some_and(|max| call.user.chars().count() > max);
        if let Some(fault) = fault {
            return faulty(&fault);
        }
        if too_long {
            return faulty(&Fault::ContextLength);
        }
        let text = if call.user.contains("<context-compaction-input>") {
            state.summaries += 1;
            summary(state.summaries, &call.user)
        } else if call.user.contains("<summary>") {
            "KEY FACTS:\n- rolled up\nCONVERSATION FLOW:\n- rolled up\nOPEN THREADS:\n- none\n"
                .to_owned()
        } else {
            "- folded memory".to_owned()
        };
        ResponseTemplate::new(200)
            .set_delay(delay)
            .set_body_json(completion(&text, call.user.len()))
    }
}

/// The answer to compaction call number `n`.
fn summary(n: u32, prompt: &str) -> String {
    let folded =
        prompt.matches("\n[#").count() + usize::from(prompt.contains("<new-messages>\n[#"));
    format!(
        "KEY FACTS:\n- summary generation {n}\n- the failing tests are off-by-one errors\n\
         CONVERSATION FLOW:\n- generation {n} folded {folded} messages\n\
         OPEN THREADS:\n- fix the loop bounds before the release\n\n\
         STATE DELTA:\n```json\n{{\"tasks\": [{{\"id\": \"T1\", \"text\": \"fix the loop bounds\", \"status\": \"in_progress\"}}]}}\n```\n"
    )
}

fn completion(text: &str, prompt_len: usize) -> serde_json::Value {
    serde_json::json!({
        "id": "cmpl-fake",
        "object": "chat.completion",
        "model": "fake-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": prompt_len / 4, "completion_tokens": text.len() / 4}
    })
}

fn faulty(fault: &Fault) -> ResponseTemplate {
    match fault {
        Fault::RateLimited { retry_after_secs } => ResponseTemplate::new(429)
            .insert_header("retry-after", retry_after_secs.to_string().as_str())
            .set_body_json(
                serde_json::json!({"error": {"message": "rate limited", "type": "rate_limit"}}),
            ),
        Fault::ServerError => ResponseTemplate::new(500).set_body_string("upstream exploded"),
        Fault::Hang(d) => ResponseTemplate::new(200)
            .set_delay(*d)
            .set_body_json(completion("KEY FACTS:\n- late\n", 0)),
        Fault::Malformed => ResponseTemplate::new(200)
            .insert_header("content-type", "application/json")
            .set_body_string("<html>Bad gateway</html>"),
        Fault::Truncated => {
            let full = completion(&summary(0, ""), 0).to_string();
            ResponseTemplate::new(200)
                .insert_header("content-type", "application/json")
                .set_body_string(full[..full.len() / 2].to_owned())
        }
        Fault::Empty => ResponseTemplate::new(200).set_body_json(completion("", 0)),
        Fault::ContextLength => ResponseTemplate::new(400).set_body_json(serde_json::json!({
            "error": {
                "message": "This model's maximum context length is 8192 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded"
            }
        })),
        Fault::Unauthorized => ResponseTemplate::new(401)
            .set_body_json(serde_json::json!({"error": {"message": "invalid api key"}})),
        Fault::Answer(text) => ResponseTemplate::new(200).set_body_json(completion(text, 400)),
        Fault::AtLimit => {
            let mut body = completion("KEY FACTS:\n- summary generation 0\n- the failing te", 400);
            body["choices"][0]["finish_reason"] = "length".into();
            ResponseTemplate::new(200).set_body_json(body)
        }
    }
}

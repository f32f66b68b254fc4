//! The LLM clients against a fake LLM at the HTTP boundary: a wiremock
//! server on loopback speaking the OpenAI and Anthropic wire formats, real
//! HTTP, real timeouts. Delays are short; every wait asserted is the
//! client's own. Then the provider's health (unhealthy after consecutive
//! failures, healthy again after a probe) and the summarizer's checks of
//! the answers (each rejection, the retry of an answer cut off).

use std::time::Duration;

use compactor_producer::store::DegradedReason;
use compactor_shared::config::EngineConfig;
use compactor_shared::parse::Rejection;
use compactor_shared::prompt::CompactionInput;
use compactor_shared::summary::SummaryFormat;
use compactor_shared::{CharEstimator, Summary, WorkstreamState};
use compactor_worker::jobs::summarizer::{LlmUsage, SummarizeError};
use compactor_worker::jobs::Summarizer;
use compactor_worker::llm::{
    metrics as llm_metrics, Calls, LlmClient, LlmConfig, LlmConfigError, LlmError, LlmRequest,
    LlmResponse, Provider, TokenUsage,
};
use secrecy::SecretString;
use serde_json::json;
use tokio::time::Instant;
use wiremock::matchers::{body_partial_json, body_string_contains, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-test-DO-NOT-LEAK-4f9a0c";

/// The two wire formats, so each behaviour is checked for both.
#[derive(Debug, Clone, Copy)]
enum Api {
    OpenAi,
    Anthropic,
}

const BOTH: [Api; 2] = [Api::OpenAi, Api::Anthropic];

impl Api {
    fn path(self) -> &'static str {
        match self {
            Api::OpenAi => "/v1/chat/completions",
            Api::Anthropic => "/v1/messages",
        }
    }

    fn config(self, server: &MockServer) -> LlmConfig {
        let (provider, base_url) = match self {
            Api::OpenAi => (Provider::OpenAi, format!("{}/v1", server.uri())),
            Api::Anthropic => (Provider::Anthropic, server.uri()),
        };
        LlmConfig {
            provider,
            base_url: Some(base_url),
            model: "test-model".into(),
            request_timeout: Duration::from_secs(5),
            max_retries: 2,
            retry_base_delay: Duration::from_millis(20),
            retry_max_delay: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(5),
            ..LlmConfig::default()
        }
    }

    fn client(self, server: &MockServer) -> LlmClient {
        client(&self.config(server))
    }

    /// A successful reply with `text`, stopping for `stop` (true: on the
    /// token limit).
    fn reply(self, text: &str, at_limit: bool) -> serde_json::Value {
        match self {
            Api::OpenAi => json!({
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": "test-model-2025",
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": if at_limit { "length" } else { "stop" }
                }],
                "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
            }),
            Api::Anthropic => json!({
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "test-model-2025",
                "content": [{"type": "text", "text": text}],
                "stop_reason": if at_limit { "max_tokens" } else { "end_turn" },
                "usage": {"input_tokens": 120, "output_tokens": 30}
            }),
        }
    }

    fn ok(self, text: &str) -> ResponseTemplate {
        ResponseTemplate::new(200).set_body_json(self.reply(text, false))
    }

    fn empty(self) -> ResponseTemplate {
        let body = match self {
            Api::OpenAi => json!({
                "model": "m",
                "choices": [{"message": {"role": "assistant", "content": null}, "finish_reason": "stop"}]
            }),
            Api::Anthropic => json!({"model": "m", "content": [], "stop_reason": "end_turn"}),
        };
        ResponseTemplate::new(200).set_body_json(body)
    }
}

fn client(config: &LlmConfig) -> LlmClient {
    LlmClient::new(config, Some(SecretString::from(KEY))).unwrap()
}

fn request() -> LlmRequest<'static> {
    LlmRequest {
        system: "You are a context compactor.",
        user: "<context-compaction-input>…</context-compaction-input>",
        max_output_tokens: 1_000,
    }
}

fn in_secs(secs: u64) -> Instant {
    Instant::now() + Duration::from_secs(secs)
}

async fn mount(server: &MockServer, api: Api, response: ResponseTemplate, times: Option<u64>) {
    let mock = Mock::given(method("POST"))
        .and(path(api.path()))
        .respond_with(response);
    let mock = match times {
        Some(n) => mock.up_to_n_times(n).expect(n),
        None => mock,
    };
    mock.mount(server).await;
}

/// A fake LLM on loopback answering `api`'s path with `response`
/// (`times` as in [`mount`]): what most tests here start from.
async fn answering(api: Api, response: ResponseTemplate, times: Option<u64>) -> MockServer {
    let server = MockServer::start().await;
    mount(&server, api, response, times).await;
    server
}

/// A fake LLM that fails once with `failure`, then answers `text`: a retry
/// that succeeds.
async fn failing_once(api: Api, failure: ResponseTemplate, text: &str) -> MockServer {
    let server = answering(api, failure, Some(1)).await;
    mount(&server, api, api.ok(text), Some(1)).await;
    server
}

/// Runs `work` on a current-thread runtime with a Prometheus recorder
/// installed for this thread only, so other tests' requests are not
/// counted; what it recorded, rendered.
fn recorded(work: impl std::future::Future<Output = ()>) -> String {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(work)
    });
    handle.render()
}

/// Asserts that each of `lines` is in the `rendered` metrics.
fn assert_rendered(rendered: &str, lines: &[&str]) {
    for line in lines {
        assert!(rendered.contains(line), "missing {line} in\n{rendered}");
    }
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.unwrap().len()
}

async fn complete(client: &LlmClient) -> Result<LlmResponse, LlmError> {
    client.complete(&request(), in_secs(30)).await
}

fn assert_no_key(text: &str) {
    assert!(!text.contains(KEY), "the key leaked: {text}");
    assert!(
        !text.contains("DO-NOT-LEAK"),
        "part of the key leaked: {text}"
    );
}

#[tokio::test]
async fn success_returns_text_model_and_usage_and_sends_the_key_in_the_right_header() {
    for api in BOTH {
        let server = MockServer::start().await;
        let expected = match api {
            Api::OpenAi => Mock::given(header("authorization", format!("Bearer {KEY}").as_str()))
                .and(body_partial_json(json!({
                    "model": "test-model",
                    "max_tokens": 1000,
                    "messages": [
                        {"role": "system", "content": "You are a context compactor."},
                        {"role": "user", "content": "<context-compaction-input>…</context-compaction-input>"}
                    ]
                }))),
            Api::Anthropic => Mock::given(header("x-api-key", KEY))
                .and(header("anthropic-version", "2023-06-01"))
                .and(body_partial_json(json!({
                    "model": "test-model",
                    "max_tokens": 1000,
                    "system": "You are a context compactor.",
                    "messages": [{"role": "user", "content": "<context-compaction-input>…</context-compaction-input>"}]
                }))),
        };
        expected
            .and(method("POST"))
            .and(path(api.path()))
            .and(header("content-type", "application/json"))
            .respond_with(api.ok("KEY FACTS:\n- a"))
            .expect(1)
            .mount(&server)
            .await;
        let c = api.client(&server);
        assert_eq!(c.model(), "test-model");
        let r = complete(&c).await.unwrap();
        assert_eq!(r.text, "KEY FACTS:\n- a", "{api:?}");
        assert_eq!(r.model, "test-model-2025");
        assert_eq!(
            r.usage,
            TokenUsage {
                input_tokens: 120,
                output_tokens: 30
            }
        );
        assert!(!r.truncated);
        let sent = &server.received_requests().await.unwrap()[0];
        let other = match api {
            Api::OpenAi => "x-api-key",
            Api::Anthropic => "authorization",
        };
        assert!(!sent.headers.contains_key(other), "{api:?} sent {other}");
        assert!(
            serde_json::from_slice::<serde_json::Value>(&sent.body)
                .unwrap()
                .get("temperature")
                .is_none(),
            "no temperature unless configured"
        );
    }
}

#[tokio::test]
async fn the_compaction_model_and_temperature_are_sent_when_configured() {
    for api in BOTH {
        let server = MockServer::start().await;
        Mock::given(body_partial_json(
            json!({"model": "cheap-model", "temperature": 0.2}),
        ))
        .respond_with(api.ok("x"))
        .expect(1)
        .mount(&server)
        .await;
        let c = client(&LlmConfig {
            compaction_model: Some("cheap-model".into()),
            temperature: Some(0.2),
            ..api.config(&server)
        });
        assert_eq!(c.model(), "cheap-model");
        complete(&c).await.unwrap();
    }
}

#[tokio::test]
async fn a_local_openai_compatible_server_needs_no_key() {
    let server = answering(Api::OpenAi, Api::OpenAi.ok("hi"), Some(1)).await;
    let c = LlmClient::new(&Api::OpenAi.config(&server), None).unwrap();
    assert_eq!(complete(&c).await.unwrap().text, "hi");
    let sent = &server.received_requests().await.unwrap()[0];
    assert!(!sent.headers.contains_key("authorization"));
}

#[tokio::test]
async fn the_key_comes_from_the_named_environment_variable() {
    let var = format!("COMPACTOR_TEST_LLM_KEY_{}", std::process::id());
    let server = MockServer::start().await;
    Mock::given(header("x-api-key", KEY))
        .respond_with(Api::Anthropic.ok("from env"))
        .expect(1)
        .mount(&server)
        .await;
    let config = LlmConfig {
        api_key_env: Some(var.clone()),
        ..Api::Anthropic.config(&server)
    };
    // The only variable this test binary sets, under a name of its own.
    std::env::set_var(&var, KEY);
    let c = LlmClient::from_config(&config).unwrap();
    assert_eq!(complete(&c).await.unwrap().text, "from env");
    assert_no_key(&format!("{c:?}"));
}

#[tokio::test]
async fn a_missing_key_names_the_variable_and_extractive_builds_no_client() {
    let unset = "COMPACTOR_TEST_LLM_KEY_THAT_IS_NEVER_SET";
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let config = LlmConfig {
            provider,
            model: "m".into(),
            api_key_env: Some(unset.into()),
            ..LlmConfig::default()
        };
        let e = LlmClient::from_config(&config).unwrap_err();
        assert!(
            matches!(&e, LlmError::Config(LlmConfigError::MissingApiKey { env_var, .. }) if env_var == unset),
            "{e:?}"
        );
        assert!(e.to_string().contains(unset));
        assert!(!e.is_retryable());
    }
    let e = LlmClient::from_config(&LlmConfig::default()).unwrap_err();
    assert!(matches!(e, LlmError::Config(LlmConfigError::Extractive)));
    let e = LlmClient::new(
        &LlmConfig {
            provider: Provider::OpenAi,
            ..LlmConfig::default()
        },
        Some(SecretString::from(KEY)),
    )
    .unwrap_err();
    assert!(matches!(
        e,
        LlmError::Config(LlmConfigError::Invalid { field: "model", .. })
    ));
    let e = LlmClient::new(
        &LlmConfig {
            provider: Provider::OpenAi,
            model: "m".into(),
            ..LlmConfig::default()
        },
        Some(SecretString::from("sk-bad\nkey")),
    )
    .unwrap_err();
    assert!(matches!(
        e,
        LlmError::Config(LlmConfigError::InvalidApiKey { .. })
    ));
    assert!(!e.to_string().contains("sk-bad"));
}

#[tokio::test]
async fn a_429_with_retry_after_waits_at_least_that_long_then_succeeds() {
    for api in BOTH {
        let retry_after = ResponseTemplate::new(429).insert_header("retry-after", "1");
        let server = failing_once(api, retry_after, "after the wait").await;
        let started = Instant::now();
        let r = complete(&api.client(&server)).await.unwrap();
        assert_eq!(r.text, "after the wait");
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "{api:?}: retried after {:?}",
            started.elapsed()
        );
        assert_eq!(requests(&server).await, 2);
    }
}

#[tokio::test]
async fn anthropic_overloaded_529_is_a_rate_limit_and_retried() {
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let overloaded = ResponseTemplate::new(529).set_body_json(overloaded);
    let server = failing_once(Api::Anthropic, overloaded, "ok").await;
    assert_eq!(
        complete(&Api::Anthropic.client(&server))
            .await
            .unwrap()
            .text,
        "ok"
    );
}

#[tokio::test]
async fn a_retry_after_beyond_max_retry_after_is_capped() {
    for api in BOTH {
        let retry_after = ResponseTemplate::new(429).insert_header("retry-after", "3600");
        let server = failing_once(api, retry_after, "soon").await;
        let c = client(&LlmConfig {
            max_retry_after: Duration::from_millis(100),
            ..api.config(&server)
        });
        let started = Instant::now();
        assert_eq!(complete(&c).await.unwrap().text, "soon");
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(100) && waited < Duration::from_secs(3),
            "{api:?}: {waited:?}"
        );
    }
}

#[tokio::test]
async fn a_server_error_is_retried_then_succeeds() {
    for api in BOTH {
        let error = ResponseTemplate::new(500).set_body_string("internal error");
        let server = failing_once(api, error, "second time").await;
        assert_eq!(
            complete(&api.client(&server)).await.unwrap().text,
            "second time"
        );
    }
}

#[tokio::test]
async fn retries_exhausted_return_the_last_error() {
    for api in BOTH {
        let unavailable = ResponseTemplate::new(503).set_body_string("upstream unavailable");
        let server = answering(api, unavailable, Some(3)).await;
        let e = complete(&api.client(&server)).await.unwrap_err();
        match &e {
            LlmError::Server { status, excerpt } => {
                assert_eq!(*status, 503);
                assert_eq!(excerpt, "upstream unavailable");
            }
            other => panic!("{api:?}: {other:?}"),
        }
        assert!(e.is_retryable(), "the job may still retry later");
        assert_eq!(requests(&server).await, 3, "first request + max_retries");
    }
}

#[tokio::test]
async fn a_hanging_server_times_out_and_is_retried() {
    for api in BOTH {
        let server = answering(
            api,
            api.ok("too late").set_delay(Duration::from_secs(5)),
            None,
        )
        .await;
        let c = client(&LlmConfig {
            request_timeout: Duration::from_millis(200),
            max_retries: 1,
            ..api.config(&server)
        });
        let started = Instant::now();
        let e = complete(&c).await.unwrap_err();
        assert!(
            matches!(e, LlmError::Timeout { after } if after == Duration::from_millis(200)),
            "{api:?}: {e:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(requests(&server).await, 2);
    }
}

#[tokio::test]
async fn a_closed_port_is_a_connect_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = LlmConfig {
        provider: Provider::OpenAi,
        base_url: Some(format!("http://127.0.0.1:{port}/v1")),
        model: "m".into(),
        max_retries: 1,
        retry_base_delay: Duration::from_millis(10),
        retry_max_delay: Duration::from_millis(20),
        ..LlmConfig::default()
    };
    let e = complete(&client(&config)).await.unwrap_err();
    assert!(matches!(e, LlmError::Connect { .. }), "{e:?}");
    assert!(e.is_retryable());
    assert!(!e.to_string().contains(&port.to_string()), "no URL: {e}");
    assert_no_key(&e.to_string());
}

#[tokio::test]
async fn a_malformed_or_truncated_body_is_malformed_and_retried() {
    for api in BOTH {
        let full = serde_json::to_string(&api.reply("complete answer", false)).unwrap();
        let half = full[..full.len() / 2].to_owned();
        for body in ["<html>502 Bad Gateway</html>".to_owned(), half] {
            let malformed =
                ResponseTemplate::new(200).set_body_raw(body.clone(), "application/json");
            let server = answering(api, malformed, Some(2)).await;
            let c = client(&LlmConfig {
                max_retries: 1,
                ..api.config(&server)
            });
            let e = complete(&c).await.unwrap_err();
            assert!(
                matches!(e, LlmError::Malformed { .. }),
                "{api:?} {body}: {e:?}"
            );

            // And a good reply after a malformed one is taken.
            let malformed = ResponseTemplate::new(200).set_body_raw(body, "application/json");
            let server = failing_once(api, malformed, "fine").await;
            assert_eq!(complete(&api.client(&server)).await.unwrap().text, "fine");
        }
    }
}

#[tokio::test]
async fn a_reply_without_text_is_empty_and_retried() {
    for api in BOTH {
        let server = answering(api, api.empty(), Some(2)).await;
        let c = client(&LlmConfig {
            max_retries: 1,
            ..api.config(&server)
        });
        let e = complete(&c).await.unwrap_err();
        assert!(matches!(e, LlmError::Empty), "{api:?}: {e:?}");
    }
}

#[tokio::test]
async fn stopping_on_the_token_limit_returns_the_text_marked_truncated() {
    for api in BOTH {
        let cut = ResponseTemplate::new(200).set_body_json(api.reply("KEY FACTS:\n- cut he", true));
        let server = answering(api, cut, Some(1)).await;
        let r = complete(&api.client(&server)).await.unwrap();
        assert!(r.truncated, "{api:?}");
        assert_eq!(r.text, "KEY FACTS:\n- cut he");
    }
}

#[tokio::test]
async fn context_length_errors_are_not_retried() {
    let cases = [
        (
            Api::OpenAi,
            400,
            json!({"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 131000 tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
        ),
        // vLLM
        (
            Api::OpenAi,
            400,
            json!({"object": "error", "message": "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens (8000 in the messages, 1000 in the completion).", "type": "BadRequestError", "param": null, "code": 400}),
        ),
        // llama.cpp server
        (
            Api::OpenAi,
            400,
            json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error"}}),
        ),
        (
            Api::OpenAi,
            413,
            json!({"error": {"message": "Request too large"}}),
        ),
        (
            Api::Anthropic,
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}),
        ),
    ];
    for (api, status, body) in cases {
        let server = answering(
            api,
            ResponseTemplate::new(status).set_body_json(&body),
            Some(1),
        )
        .await;
        let e = complete(&api.client(&server)).await.unwrap_err();
        assert!(e.is_context_length(), "{api:?} {body}: {e:?}");
        assert!(matches!(e, LlmError::ContextLength { .. }));
        assert!(!e.is_retryable());
        assert_eq!(requests(&server).await, 1, "{body}");
    }
}

#[tokio::test]
async fn other_client_errors_and_auth_failures_are_not_retried() {
    for api in BOTH {
        for (status, body) in [
            (401, r#"{"error":{"message":"Invalid API key"}}"#),
            (403, r#"{"error":{"message":"forbidden"}}"#),
            (
                404,
                r#"{"error":{"message":"The model `test-model` does not exist"}}"#,
            ),
        ] {
            let refused = ResponseTemplate::new(status).set_body_raw(body, "application/json");
            let server = answering(api, refused, Some(1)).await;
            let e = complete(&api.client(&server)).await.unwrap_err();
            match (status, &e) {
                (401 | 403, LlmError::Auth { status: s }) => assert_eq!(*s, status),
                (
                    404,
                    LlmError::BadRequest {
                        status: 404,
                        excerpt,
                    },
                ) => {
                    assert!(excerpt.contains("does not exist"));
                }
                _ => panic!("{api:?} {status}: {e:?}"),
            }
            assert!(!e.is_retryable());
            assert_eq!(requests(&server).await, 1);
        }
    }
}

#[tokio::test]
async fn a_deadline_shorter_than_the_backoff_stops_at_once() {
    for api in BOTH {
        let server = answering(api, ResponseTemplate::new(503), Some(1)).await;
        let c = client(&LlmConfig {
            retry_base_delay: Duration::from_secs(10),
            retry_max_delay: Duration::from_secs(10),
            ..api.config(&server)
        });
        let started = Instant::now();
        let e = c.complete(&request(), in_secs(3)).await.unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "gave up at once, not at the deadline"
        );
        match e {
            LlmError::DeadlineExceeded { attempts, last } => {
                assert_eq!(attempts, 1);
                assert!(matches!(*last, LlmError::Server { status: 503, .. }));
            }
            other => panic!("{api:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_retry_after_past_the_deadline_stops_at_once() {
    let retry_after = ResponseTemplate::new(429).insert_header("retry-after", "5");
    let server = answering(Api::OpenAi, retry_after, Some(1)).await;
    let started = Instant::now();
    let e = Api::OpenAi
        .client(&server)
        .complete(&request(), in_secs(3))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(
        matches!(&e, LlmError::DeadlineExceeded { attempts: 1, .. }),
        "{e:?}"
    );
    assert_eq!(e.retry_after(), Some(Duration::from_secs(5)));
}

#[tokio::test]
async fn the_deadline_shortens_the_request_timeout() {
    for api in BOTH {
        let server = answering(api, api.ok("never").set_delay(Duration::from_secs(5)), None).await;
        let c = client(&LlmConfig {
            request_timeout: Duration::from_secs(60),
            ..api.config(&server)
        });
        let started = Instant::now();
        let deadline = started + Duration::from_millis(300);
        let e = c.complete(&request(), deadline).await.unwrap_err();
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_millis(1_500),
            "{api:?}: {took:?}"
        );
        match e {
            LlmError::DeadlineExceeded { attempts: 1, last } => {
                assert!(
                    matches!(*last, LlmError::Timeout { after } if after <= Duration::from_millis(300))
                );
            }
            other => panic!("{api:?}: {other:?}"),
        }
        assert_eq!(requests(&server).await, 1);
    }
}

#[tokio::test]
async fn the_key_never_shows_in_debug_or_errors() {
    for api in BOTH {
        let server = MockServer::start().await;
        let echo = format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}}"#);
        for status in [400, 401, 500] {
            Mock::given(method("POST"))
                .respond_with(
                    ResponseTemplate::new(status).set_body_raw(echo.clone(), "application/json"),
                )
                .up_to_n_times(1)
                .mount(&server)
                .await;
            let c = client(&LlmConfig {
                max_retries: 0,
                ..api.config(&server)
            });
            assert_no_key(&format!("{c:?}"));
            let e = complete(&c).await.unwrap_err();
            assert_no_key(&e.to_string());
            assert_no_key(&format!("{e:?}"));
            if status != 401 {
                assert!(e.to_string().contains("[redacted]"), "{e}");
            }
        }
    }
}

/// The metrics of one retried completion, through a Prometheus recorder
/// installed for this thread only (the test runs on a current-thread
/// runtime), so other tests' requests are not counted.
#[test]
fn every_attempt_is_counted_with_bounded_labels() {
    let rendered = recorded(async {
        llm_metrics::describe();
        let api = Api::OpenAi;
        let server = failing_once(api, ResponseTemplate::new(500), "done").await;
        complete(&api.client(&server)).await.unwrap();
    });
    assert_rendered(
        &rendered,
        &[
            r#"compactor_llm_requests_total{provider="openai",outcome="server_error"} 1"#,
            r#"compactor_llm_requests_total{provider="openai",outcome="ok"} 1"#,
            r#"compactor_llm_retries_total{provider="openai"} 1"#,
            r#"compactor_llm_tokens_total{provider="openai",direction="input"} 120"#,
            r#"compactor_llm_tokens_total{provider="openai",direction="output"} 30"#,
            r#"compactor_llm_request_seconds_count{provider="openai",outcome="ok"} 1"#,
        ],
    );
    assert_no_key(&rendered);
    for label in rendered
        .lines()
        .filter_map(|l| l.split("outcome=\"").nth(1))
        .filter_map(|rest| rest.split('"').next())
    {
        assert!(
            llm_metrics::OUTCOMES.contains(&label),
            "unbounded outcome {label}"
        );
    }
}

// ------------------------------------------------------------------ health

/// Waits (polling, bounded) until `client` is healthy again.
async fn until_healthy(client: &LlmClient) {
    let limit = Instant::now() + Duration::from_secs(20);
    while !client.is_healthy() {
        assert!(Instant::now() < limit, "never healthy again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn consecutive_failures_make_the_provider_unhealthy_and_a_probe_heals_it() {
    for api in BOTH {
        let server = MockServer::start().await;
        // The probe is recognised by its prompt; it fails while the
        // provider is down.
        let probe_down = Mock::given(body_string_contains("Health check"))
            .respond_with(ResponseTemplate::new(503))
            .with_priority(1)
            .mount_as_scoped(&server)
            .await;
        mount(&server, api, ResponseTemplate::new(503), None).await;
        let c = client(&LlmConfig {
            max_retries: 6,
            unhealthy_after: 3,
            probe_interval: Duration::from_millis(50),
            ..api.config(&server)
        });
        let other_job = c.clone();

        // The third failure in a row ends the retries (6 allowed) at once.
        let mut calls = Calls::default();
        let e = c
            .complete_counted(&request(), in_secs(30), &mut calls)
            .await
            .unwrap_err();
        assert!(
            matches!(e, LlmError::Server { status: 503, .. }),
            "{api:?}: {e:?}"
        );
        assert_eq!(requests(&server).await, 3, "{api:?}");
        assert_eq!((calls.sent, calls.failed), (3, 3));
        assert!(!c.is_healthy());
        assert!(!other_job.is_healthy(), "clones share the health");

        // While unhealthy nothing is sent.
        let compactions = || async {
            server
                .received_requests()
                .await
                .unwrap()
                .iter()
                .filter(|r| !String::from_utf8_lossy(&r.body).contains("Health check"))
                .count()
        };
        let e = complete(&other_job).await.unwrap_err();
        assert!(
            matches!(e, LlmError::Unhealthy { consecutive_failures } if consecutive_failures >= 3),
            "{e:?}"
        );
        assert!(e.is_retryable());
        assert_eq!(compactions().await, 3, "no request while unhealthy");

        // Probes keep failing while the provider is down …
        let limit = Instant::now() + Duration::from_secs(10);
        while requests(&server).await - compactions().await < 2 {
            assert!(Instant::now() < limit, "no probes");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!c.is_healthy());
        // … and the first answered one ends the outage.
        drop(probe_down);
        Mock::given(body_string_contains("Health check"))
            .respond_with(api.ok("OK"))
            .with_priority(1)
            .mount(&server)
            .await;
        until_healthy(&c).await;
        assert_eq!(c.health().consecutive_failures(), 0);
        server.reset().await;
        mount(&server, api, api.ok("back"), Some(1)).await;
        assert_eq!(complete(&other_job).await.unwrap().text, "back");
    }
}

#[tokio::test]
async fn requests_about_the_request_do_not_count_against_the_provider() {
    let api = Api::OpenAi;
    let too_long = json!({"error": {"message": "maximum context length exceeded", "code": "context_length_exceeded"}});
    let server = answering(
        api,
        ResponseTemplate::new(400).set_body_json(too_long),
        None,
    )
    .await;
    let c = client(&LlmConfig {
        unhealthy_after: 2,
        ..api.config(&server)
    });
    for _ in 0..5 {
        assert!(complete(&c).await.unwrap_err().is_context_length());
    }
    assert!(
        c.is_healthy(),
        "context-length errors are the request's fault"
    );

    // An answer between failures resets the count; 0 turns health off.
    let server = MockServer::start().await;
    let c = client(&LlmConfig {
        max_retries: 0,
        unhealthy_after: 2,
        ..api.config(&server)
    });
    let off = client(&LlmConfig {
        max_retries: 0,
        unhealthy_after: 0,
        ..api.config(&server)
    });
    for _ in 0..3 {
        mount(&server, api, ResponseTemplate::new(500), Some(1)).await;
        complete(&c).await.unwrap_err();
        mount(&server, api, api.ok("fine"), Some(1)).await;
        complete(&c).await.unwrap();
        assert!(c.is_healthy());
    }
    server.reset().await;
    mount(&server, api, ResponseTemplate::new(500), None).await;
    for _ in 0..5 {
        complete(&off).await.unwrap_err();
    }
    assert!(
        off.is_healthy(),
        "unhealthy_after = 0 never pauses requests"
    );
}

#[tokio::test]
async fn every_request_is_counted_with_its_tokens_failed_ones_included() {
    let api = Api::Anthropic;
    let server = failing_once(api, ResponseTemplate::new(500), "done").await;
    let mut calls = Calls::default();
    api.client(&server)
        .complete_counted(&request(), in_secs(30), &mut calls)
        .await
        .unwrap();
    assert_eq!(
        calls,
        Calls {
            sent: 2,
            failed: 1,
            input_tokens: 120,
            output_tokens: 30,
            model: Some("test-model-2025".into()),
        }
    );
}

// ------------------------------------------------------- checked answers

const PREVIOUS: &str = "KEY FACTS:\n- the cache TTL is 37s\n- deploys go to eu-west-1\nCONVERSATION FLOW:\n- #2 user asked for the fix\nOPEN THREADS:\n- run the load test\n";

const GOOD: &str = "KEY FACTS:\n- the cache TTL is 45s now\nCONVERSATION FLOW:\n- #9 user raised the TTL\nOPEN THREADS:\n- run the load test\nSTATE DELTA:\n```json\n{\"key_decisions\": [\"raise the TTL to 45s\"]}\n```\n";

fn previous_summary() -> Summary {
    compactor_shared::parse::parse_rollup(PREVIOUS)
        .unwrap()
        .output
        .summary
}

/// One summarization step through `Summarizer::summarize`, against
/// `server`, on top of [`PREVIOUS`].
async fn summarize(
    config: &LlmConfig,
    usage: &mut LlmUsage,
) -> Result<compactor_shared::summary::SummarizerOutput, SummarizeError> {
    summarize_as(config, usage, SummaryFormat::Sections).await
}

/// [`summarize`] with the summary written in `format`.
async fn summarize_as(
    config: &LlmConfig,
    usage: &mut LlmUsage,
    format: SummaryFormat,
) -> Result<compactor_shared::summary::SummarizerOutput, SummarizeError> {
    let summarizer = Summarizer::Llm(client(config));
    let previous = previous_summary();
    let state = WorkstreamState::default();
    let input = CompactionInput {
        previous_summary: Some(&previous),
        state: &state,
        new_messages: "[#9 USER]\nraise the TTL to 45s",
        instructions: None,
        split_turn: false,
        format,
    };
    let engine = EngineConfig::default();
    summarizer
        .summarize(
            &input,
            &engine,
            &CharEstimator::default(),
            in_secs(30),
            usage,
        )
        .await
}

fn rejection(e: &SummarizeError) -> &Rejection {
    match e {
        SummarizeError::InvalidOutput { rejection, .. } => rejection,
        other => panic!("expected a rejected answer, got {other:?}"),
    }
}

#[tokio::test]
async fn answers_without_a_summary_are_rejected_as_invalid_output() {
    let cases = [
        (
            "unrelated JSON",
            r#"{"status": "ok", "items": [{"name": "foo", "value": 3}], "next": null}"#.to_owned(),
            Rejection::NoSections,
        ),
        (
            "a fenced delta without sections",
            "```json\n{\"key_decisions\": [\"foo\", \"bar\", \"the\"], \"tasks\": [\"baz\"]}\n```"
                .to_owned(),
            Rejection::NoSections,
        ),
        (
            "every section (none)",
            "KEY FACTS:\n- (none)\nCONVERSATION FLOW:\n- (none)\nOPEN THREADS:\n- (none)\nSTATE DELTA:\n{}"
                .to_owned(),
            Rejection::Emptied {
                previous_bullets: 4,
            },
        ),
        (
            "the template echoed back",
            "KEY FACTS:\n- durable facts, decisions with their reasons, constraints, exact values\nCONVERSATION FLOW:\n- what happened, in order, citing message numbers like #42 where useful\nOPEN THREADS:\n- unanswered questions, unfinished tasks, the next step\n"
                .to_owned(),
            Rejection::Emptied {
                previous_bullets: 4,
            },
        ),
        (
            "prose",
            "I'm sorry, I can't summarize this conversation.".to_owned(),
            Rejection::Unparseable,
        ),
    ];
    for (what, answer, expected) in cases {
        let server = answering(Api::OpenAi, Api::OpenAi.ok(&answer), Some(1)).await;
        let mut usage = LlmUsage::default();
        let e = summarize(&Api::OpenAi.config(&server), &mut usage)
            .await
            .unwrap_err();
        assert_eq!(rejection(&e), &expected, "{what}");
        assert_eq!(e.degraded_reason(), DegradedReason::InvalidOutput, "{what}");
        assert!(e.to_string().contains("invalid_output"), "{what}: {e}");
        assert!(!e.to_string().contains("foo"), "{what}: no content in {e}");
        // The call was made and paid for, and its answer not used.
        assert_eq!((e.calls().sent, e.calls().failed), (1, 1), "{what}");
        assert_eq!(e.calls().input_tokens, 120, "{what}");
        assert_eq!(usage.calls, *e.calls(), "{what}");
    }
}

#[tokio::test]
async fn a_good_answer_is_accepted_with_its_calls_counted() {
    let server = answering(Api::OpenAi, Api::OpenAi.ok(GOOD), Some(1)).await;
    let mut usage = LlmUsage::default();
    let out = summarize(&Api::OpenAi.config(&server), &mut usage)
        .await
        .unwrap();
    assert_eq!(out.summary.key_facts, ["the cache TTL is 45s now"]);
    assert_eq!((usage.calls.sent, usage.calls.failed), (1, 0));
    assert_eq!(usage.calls.model.as_deref(), Some("test-model-2025"));
}

/// [`summarize_as`] in `handoff9` against a server answering `text` once.
async fn handoff9_step(
    text: &str,
) -> (
    MockServer,
    Result<compactor_shared::summary::SummarizerOutput, SummarizeError>,
) {
    let server = answering(Api::OpenAi, Api::OpenAi.ok(text), Some(1)).await;
    let mut usage = LlmUsage::default();
    let config = Api::OpenAi.config(&server);
    let out = summarize_as(&config, &mut usage, SummaryFormat::Handoff9).await;
    (server, out)
}

/// `[engine.summary] format = "handoff9"`: the model is asked for the nine
/// sections (the previous summary converted to them), its hand-off answer
/// is used, and an answer in the three sections is no summary there.
#[tokio::test]
async fn with_handoff9_the_nine_sections_are_asked_for_and_a_sections_answer_is_rejected() {
    const HANDOFF: &str = "## 1. Primary Request and Intent\n- keep the cache fast\n## 2. User Messages\n- #9 user: raise the TTL to 45s\n## 3. Work Completed\n- (none)\n## 4. Errors and Fixes\n- (none)\n## 5. Key Technical Details\n- the cache TTL is 45s now\n## 6. Decisions Made\n- raise the TTL to 45s\n## 7. Pending/Incomplete Work\n- run the load test\n## 8. Current State\n- the TTL is raised\n## 9. Recommended Next Step\n- run the load test\nSTATE DELTA:\n{}";
    let (server, out) = handoff9_step(HANDOFF).await;
    let out = out.unwrap();
    assert_eq!(out.summary.format, SummaryFormat::Handoff9);
    assert_eq!(out.summary.technical_details, ["the cache TTL is 45s now"]);
    assert_eq!(out.summary.next_step, ["run the load test"]);
    let requests = server.received_requests().await.unwrap();
    let body = String::from_utf8_lossy(&requests[0].body);
    assert!(body.contains("## 9. Recommended Next Step"), "{body}");
    assert!(
        body.contains("## 5. Key Technical Details\\n- the cache TTL is 37s"),
        "the previous summary in the nine sections: {body}"
    );

    let e = handoff9_step(GOOD).await.1.unwrap_err();
    assert_eq!(rejection(&e), &Rejection::NoSections);
    assert_eq!(e.degraded_reason(), DegradedReason::InvalidOutput);
}

/// The `max_tokens` of each request the server received.
async fn budgets(server: &MockServer) -> Vec<u64> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["max_tokens"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

#[tokio::test]
async fn an_answer_cut_off_is_asked_again_with_twice_the_budget() {
    for api in BOTH {
        let cut = ResponseTemplate::new(200)
            .set_body_json(api.reply("KEY FACTS:\n- the cache TTL is 4", true));
        let server = failing_once(api, cut, GOOD).await;
        let mut usage = LlmUsage::default();
        let out = summarize(&api.config(&server), &mut usage).await.unwrap();
        assert_eq!(
            out.summary.key_facts,
            ["the cache TTL is 45s now"],
            "{api:?}"
        );
        let sent = budgets(&server).await;
        assert_eq!(sent.len(), 2, "{api:?}");
        assert_eq!(sent[1], sent[0] * 2, "{api:?}: twice the budget");
        assert_eq!((usage.calls.sent, usage.calls.failed), (2, 1), "{api:?}");
        assert_eq!(usage.calls.input_tokens, 240, "both calls' tokens");
    }
}

#[tokio::test]
async fn an_answer_cut_off_twice_is_rejected() {
    for api in BOTH {
        let cut =
            ResponseTemplate::new(200).set_body_json(api.reply("KEY FACTS:\n- the cache", true));
        let server = answering(api, cut, Some(2)).await;
        let mut usage = LlmUsage::default();
        let e = summarize(&api.config(&server), &mut usage)
            .await
            .unwrap_err();
        let sent = budgets(&server).await;
        assert_eq!(
            rejection(&e),
            &Rejection::Truncated {
                max_output_tokens: sent[1]
            },
            "{api:?}"
        );
        assert_eq!((e.calls().sent, e.calls().failed), (2, 2), "{api:?}");
    }
}

#[tokio::test]
async fn the_larger_budget_is_capped_and_a_refused_retry_keeps_the_rejection() {
    let api = Api::OpenAi;
    // At the cap already: no second request.
    let cut = ResponseTemplate::new(200).set_body_json(api.reply("KEY FACTS:\n- x", true));
    let server = answering(api, cut.clone(), Some(1)).await;
    let config = LlmConfig {
        retry_max_output_tokens: 100,
        ..api.config(&server)
    };
    let e = summarize(&config, &mut LlmUsage::default())
        .await
        .unwrap_err();
    assert!(matches!(rejection(&e), Rejection::Truncated { .. }));
    assert_eq!(requests(&server).await, 1);

    // Twice the budget is over the model's limit: a 400 for the retry.
    let server = answering(api, cut, Some(1)).await;
    let too_many = json!({"error": {"message": "max_tokens is too large: 8192. This model supports at most 4096 completion tokens."}});
    let too_many = ResponseTemplate::new(400).set_body_json(too_many);
    mount(&server, api, too_many, Some(1)).await;
    let e = summarize(&api.config(&server), &mut LlmUsage::default())
        .await
        .unwrap_err();
    let first = budgets(&server).await[0];
    assert_eq!(
        rejection(&e),
        &Rejection::Truncated {
            max_output_tokens: first
        }
    );
}

#[tokio::test]
async fn a_rollup_or_memory_fold_that_empties_its_input_is_rejected() {
    let api = Api::OpenAi;
    let emptied = api.ok("KEY FACTS:\n- (none)\nCONVERSATION FLOW:\n- n/a\n");
    let server = answering(api, emptied, None).await;
    let summarizer = Summarizer::Llm(api.client(&server));
    let mut usage = LlmUsage::default();
    let e = summarizer
        .rollup(
            &previous_summary(),
            500,
            &CharEstimator::default(),
            in_secs(30),
            &mut usage,
        )
        .await
        .unwrap_err();
    assert_eq!(
        rejection(&e),
        &Rejection::Emptied {
            previous_bullets: 4
        }
    );
    let e = summarizer
        .fold_memory(
            Some("- likes tea\n- lives in Oslo"),
            &["moved to Bergen".to_owned()],
            1_000,
            in_secs(30),
            &mut usage,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(rejection(&e), Rejection::Emptied { .. } | Rejection::Empty),
        "{e:?}"
    );
    assert_eq!((usage.calls.sent, usage.calls.failed), (2, 2));
}

/// Rejections and worked-around format problems are counted with bounded
/// labels (a recorder for this thread only, as above).
#[test]
fn rejections_and_format_problems_are_counted() {
    let rendered = recorded(async {
        let api = Api::OpenAi;
        let server = answering(api, api.ok(r#"{"unrelated": true}"#), Some(1)).await;
        let config = api.config(&server);
        summarize(&config, &mut LlmUsage::default())
            .await
            .unwrap_err();
        let salvaged = format!("Here you go!\n{GOOD}");
        mount(&server, api, api.ok(&salvaged), Some(1)).await;
        summarize(&config, &mut LlmUsage::default()).await.unwrap();
    });
    assert_rendered(
        &rendered,
        &[
            r#"compactor_llm_answers_rejected_total{provider="openai",reason="no_sections"} 1"#,
            r#"compactor_llm_answer_problems_total{provider="openai",problem="text_outside_sections"} 1"#,
        ],
    );
    assert!(!rendered.contains("unrelated"), "no content in labels");
}

/// The compaction pipeline drives the summarizer from `Send` futures (the
/// runtime moves jobs between threads): its steps must be `Send`.
#[test]
fn the_summarizer_steps_are_send() {
    fn send<T: Send>(_: &T) {}
    let summarizer = Summarizer::Extractive;
    let engine = EngineConfig::default();
    let estimator = CharEstimator::default();
    let state = WorkstreamState::default();
    let summary = Summary::default();
    let input = CompactionInput {
        previous_summary: None,
        state: &state,
        new_messages: "",
        instructions: None,
        split_turn: false,
        format: SummaryFormat::Sections,
    };
    let mut usage = LlmUsage::default();
    send(&summarizer.summarize(&input, &engine, &estimator, in_secs(1), &mut usage));
    send(&summarizer.rollup(&summary, 100, &estimator, in_secs(1), &mut usage));
    send(&summarizer.fold_memory(None, &[], 100, in_secs(1), &mut usage));
}

//! The drop-in proxy's requests.

use std::time::Duration;

use compactor_producer::events::catalogue::names;

use super::InternalEvent;

/// A proxied request was answered (its head passed back) after `elapsed`,
/// of which the proxy's own work before sending it on took `overhead`.
/// Every label is one of a fixed set.
#[derive(Debug)]
pub(crate) struct ProxyServed {
    pub route: &'static str,
    /// What was sent on (`proxy::Outcome`).
    pub context: &'static str,
    pub status: &'static str,
    pub elapsed: Duration,
    pub overhead: Duration,
}

impl InternalEvent for ProxyServed {
    fn emit(&self) {
        metrics::counter!(names::PROXY_REQUESTS_TOTAL, "route" => self.route, "context" => self.context, "status" => self.status)
            .increment(1);
        metrics::histogram!(names::PROXY_REQUEST_SECONDS, "route" => self.route)
            .record(self.elapsed.as_secs_f64());
        metrics::histogram!(names::PROXY_OVERHEAD_SECONDS, "route" => self.route)
            .record(self.overhead.as_secs_f64());
        tracing::debug!(
            route = self.route,
            context = self.context,
            status = self.status,
            elapsed_ms = crate::telemetry::millis(self.elapsed),
            overhead_ms = crate::telemetry::millis(self.overhead),
            "proxied a request"
        );
    }
}

/// The estimated tokens of a chat request's messages, as the client sent
/// them and as they were sent on.
#[derive(Debug)]
pub(crate) struct PromptTokens {
    pub client: u64,
    pub upstream: u64,
}

impl InternalEvent for PromptTokens {
    fn emit(&self) {
        metrics::counter!(names::PROXY_PROMPT_TOKENS_TOTAL, "side" => "client")
            .increment(self.client);
        metrics::counter!(names::PROXY_PROMPT_TOKENS_TOTAL, "side" => "upstream")
            .increment(self.upstream);
    }
}

/// Creates the proxy's counter series at zero (a worker with `[proxy]
/// listen` set).
pub(crate) fn create_proxy_series() {
    for route in crate::proxy::Route::LABELS {
        for context in crate::proxy::Outcome::LABELS {
            for status in ["2xx", "4xx", "5xx"] {
                metrics::counter!(names::PROXY_REQUESTS_TOTAL, "route" => route, "context" => context, "status" => status)
                    .increment(0);
            }
        }
    }
    for side in ["client", "upstream"] {
        metrics::counter!(names::PROXY_PROMPT_TOKENS_TOTAL, "side" => side).increment(0);
    }
}

#[cfg(test)]
mod tests {
    use compactor_producer::events::capture::{capture, Value};

    use super::*;

    #[test]
    fn a_proxied_request_counts_under_its_route_context_and_class() {
        let recorded = capture(|| {
            ProxyServed {
                route: "chat_completions",
                context: "compacted",
                status: "2xx",
                elapsed: Duration::from_millis(300),
                overhead: Duration::from_millis(2),
            }
            .emit();
            PromptTokens {
                client: 9000,
                upstream: 3000,
            }
            .emit();
        });
        recorded.assert_one(
            names::PROXY_REQUESTS_TOTAL,
            &[
                ("route", "chat_completions"),
                ("context", "compacted"),
                ("status", "2xx"),
            ],
            Value::Counter(1),
        );
        recorded.assert_one(
            names::PROXY_OVERHEAD_SECONDS,
            &[("route", "chat_completions")],
            Value::Histogram(vec![0.002]),
        );
        recorded.assert_one(
            names::PROXY_PROMPT_TOKENS_TOTAL,
            &[("side", "client")],
            Value::Counter(9000),
        );
        recorded.assert_one(
            names::PROXY_PROMPT_TOKENS_TOTAL,
            &[("side", "upstream")],
            Value::Counter(3000),
        );
        assert_eq!(recorded.len(), 5);
    }
}

//! An admin API request answered.

use std::time::Duration;

use compactor_producer::events::catalogue::names;

use super::InternalEvent;

/// A request was answered (its head written) after `elapsed`. Metrics
/// only: the access log writes the line. `route` is a route template of
/// the table or `unmatched`, `status` the class (`2xx`, …): no caller can
/// create a label value.
#[derive(Debug)]
pub(crate) struct RequestServed {
    pub route: &'static str,
    pub status: &'static str,
    pub elapsed: Duration,
}

impl InternalEvent for RequestServed {
    fn emit(&self) {
        metrics::counter!(names::HTTP_REQUESTS_TOTAL, "route" => self.route, "status" => self.status)
            .increment(1);
        metrics::histogram!(names::HTTP_REQUEST_SECONDS, "route" => self.route, "status" => self.status)
            .record(self.elapsed.as_secs_f64());
    }
}

/// A connection was shed at the connection cap after `waited` on its
/// client, to admit a new one. `listener` is `api` or `probes`.
#[derive(Debug)]
pub(crate) struct ConnectionShed {
    pub listener: &'static str,
    pub waited: Duration,
}

impl InternalEvent for ConnectionShed {
    fn emit(&self) {
        metrics::counter!(names::HTTP_CONNECTIONS_SHED_TOTAL, "listener" => self.listener)
            .increment(1);
        tracing::debug!(
            listener = self.listener,
            waited_ms = crate::telemetry::millis(self.waited),
            "shed a connection slow to send its request"
        );
    }
}

#[cfg(test)]
mod tests {
    use compactor_producer::events::capture::{capture, Value};

    use super::*;

    #[test]
    fn a_request_counts_and_times_under_its_route_and_class() {
        let recorded = capture(|| {
            RequestServed {
                route: "/metrics",
                status: "2xx",
                elapsed: Duration::from_millis(500),
            }
            .emit();
        });
        let labels = [("route", "/metrics"), ("status", "2xx")];
        recorded.assert_one(names::HTTP_REQUESTS_TOTAL, &labels, Value::Counter(1));
        recorded.assert_one(
            names::HTTP_REQUEST_SECONDS,
            &labels,
            Value::Histogram(vec![0.5]),
        );
        assert_eq!(recorded.len(), 2);
    }

    #[test]
    fn a_shed_connection_counts_under_its_listener() {
        let recorded = capture(|| {
            ConnectionShed {
                listener: "probes",
                waited: Duration::from_secs(3),
            }
            .emit();
        });
        recorded.assert_one(
            names::HTTP_CONNECTIONS_SHED_TOTAL,
            &[("listener", "probes")],
            Value::Counter(1),
        );
        assert_eq!(recorded.len(), 1);
    }
}

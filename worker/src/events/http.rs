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
}

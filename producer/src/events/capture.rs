//! A per-test metrics recorder: [`capture`] runs a closure under its own
//! `DebuggingRecorder` (thread-local, so tests in one binary run side by
//! side, each seeing only its own metrics) and returns what was recorded.
//! Every recorded metric is checked against the catalogue: its family
//! exists, with that kind and exactly those label names. Other crates'
//! tests (the worker's events) use it through the `test-util` feature, so
//! there is one such helper in the workspace.

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;

use super::catalogue::{family_named, Kind};

/// A recorded value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Counter(u64),
    Gauge(f64),
    Histogram(Vec<f64>),
}

/// One recorded series.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: Value,
}

/// Everything a closure recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Captured(Vec<Recorded>);

impl Captured {
    /// How many series were recorded.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Asserts that exactly one series `name{labels}` was recorded (labels
    /// in any order), with `value`.
    #[track_caller]
    pub fn assert_one(&self, name: &str, labels: &[(&str, &str)], value: Value) {
        let mut want: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        want.sort();
        let found: Vec<&Recorded> = self
            .0
            .iter()
            .filter(|r| {
                let mut have = r.labels.clone();
                have.sort();
                r.name == name && have == want
            })
            .collect();
        assert_eq!(found.len(), 1, "{name}{labels:?} in {:?}", self.0);
        assert_eq!(found[0].value, value, "{name}{labels:?}");
    }
}

/// Runs `f` with a fresh recorder installed on this thread and returns
/// what it recorded.
#[track_caller]
pub fn capture(f: impl FnOnce()) -> Captured {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, f);
    let recorded: Vec<Recorded> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (kind, key) = key.into_parts();
            let name = key.name().to_owned();
            let family =
                family_named(&name).unwrap_or_else(|| panic!("{name} is not in the catalogue"));
            let expected = match family.kind {
                Kind::Counter => MetricKind::Counter,
                Kind::Gauge => MetricKind::Gauge,
                Kind::Histogram => MetricKind::Histogram,
            };
            assert_eq!(kind, expected, "{name}: recorded as another kind");
            let labels: Vec<(String, String)> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            let label_names: Vec<&str> = labels.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(label_names, family.labels, "{name}: label names");
            let value = match value {
                DebugValue::Counter(n) => Value::Counter(n),
                DebugValue::Gauge(g) => Value::Gauge(g.into_inner()),
                DebugValue::Histogram(xs) => {
                    Value::Histogram(xs.into_iter().map(|x| x.into_inner()).collect())
                }
            };
            Recorded {
                name,
                labels,
                value,
            }
        })
        .collect();
    Captured(recorded)
}

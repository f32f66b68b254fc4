//! Waiting for something that happens in another task or process.

use std::time::Duration;

/// Polls `check` every 20 ms until it is true; panics after `limit`,
/// naming `what` did not happen.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    assert!(within(limit, check).await, "not within {limit:?}: {what}");
}

/// Polls `check` every 20 ms until it is true (`true`) or `limit` has
/// passed (`false`): for a test to which either outcome is an answer.
pub async fn within<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`eventually`] for a value: polls `check` every 20 ms until it gives
/// `Some`, and returns what it gave; panics after `limit`, naming `what`
/// did not happen.
pub async fn eventually_some<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {limit:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

//! When a server says to come back: `retry-after-ms` (OpenAI), else
//! `Retry-After` as seconds or as an HTTP date. A header that does not
//! parse is ignored, and the backoff applies.

use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use reqwest::header::{HeaderMap, RETRY_AFTER};

/// The delay the headers ask for, measured from `now`.
pub fn from_headers(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    text("retry-after-ms")
        .and_then(parse_millis)
        .or_else(|| text(RETRY_AFTER.as_str()).and_then(|v| parse(v, now)))
}

/// A `retry-after-ms` value: milliseconds, possibly fractional.
pub fn parse_millis(value: &str) -> Option<Duration> {
    let ms: f64 = value.trim().parse().ok()?;
    (ms.is_finite() && ms >= 0.0).then(|| Duration::from_secs_f64(ms.min(1e12) / 1_000.0))
}

/// A `Retry-After` value: delay seconds (`"20"`, also `"1.5"`), or an HTTP
/// date (IMF-fixdate, RFC 850 or asctime); a date in the past is zero.
pub fn parse(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let secs: f64 = value.parse().ok()?;
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)));
    }
    let at = http_date(value)?;
    Some((at - now).to_std().unwrap_or(Duration::ZERO))
}

fn http_date(value: &str) -> Option<DateTime<Utc>> {
    // IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") is RFC 2822.
    if let Ok(t) = DateTime::parse_from_rfc2822(value) {
        return Some(t.with_timezone(&Utc));
    }
    // The obsolete forms HTTP still accepts: RFC 850 and asctime.
    ["%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(value, format).ok())
        .map(|t| t.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("1994-11-06T08:49:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn seconds() {
        assert_eq!(parse("20", now()), Some(Duration::from_secs(20)));
        assert_eq!(parse(" 0 ", now()), Some(Duration::ZERO));
        assert_eq!(parse("1.5", now()), Some(Duration::from_millis(1_500)));
    }

    #[test]
    fn http_dates_in_all_three_forms() {
        let expected = Some(Duration::from_secs(37));
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT", now()), expected);
        assert_eq!(parse("Sunday, 06-Nov-94 08:49:37 GMT", now()), expected);
        assert_eq!(parse("Sun Nov  6 08:49:37 1994", now()), expected);
        assert_eq!(
            parse("Sun, 06 Nov 1994 08:00:00 GMT", now()),
            Some(Duration::ZERO),
            "a past date means now"
        );
    }

    #[test]
    fn malformed_values_are_ignored() {
        for v in ["", "soon", "-5", "1e3", "10s", "1.2.3", "Sun, 99 Nov 1994"] {
            assert_eq!(parse(v, now()), None, "{v}");
        }
        assert_eq!(parse_millis("abc"), None);
        assert_eq!(parse_millis("-1"), None);
        assert_eq!(parse_millis("NaN"), None);
    }

    #[test]
    fn milliseconds_win_over_seconds() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("20"));
        assert_eq!(from_headers(&h, now()), Some(Duration::from_secs(20)));
        h.insert("retry-after-ms", HeaderValue::from_static("1500.5"));
        assert_eq!(
            from_headers(&h, now()),
            Some(Duration::from_micros(1_500_500))
        );
        h.insert("retry-after-ms", HeaderValue::from_static("junk"));
        assert_eq!(from_headers(&h, now()), Some(Duration::from_secs(20)));
        assert_eq!(from_headers(&HeaderMap::new(), now()), None);
    }
}

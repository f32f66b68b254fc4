//! The console's HTML: escaping, the one page frame every page shares
//! (head, navigation, footer), and the small formatting helpers the pages
//! have in common. Plain `format!` over escaped values rather than a
//! template crate: the pages are small, and this keeps compile times low.

use std::fmt::{self, Display, Write as _};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, TimeZone, Utc};

/// `text`, HTML-escaped when displayed (safe in element content and in
/// quoted attribute values).
pub(super) struct Esc<'a>(pub(super) &'a str);

pub(super) fn esc(text: &str) -> Esc<'_> {
    Esc(text)
}

impl Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(i) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..i])?;
            f.write_str(match rest.as_bytes()[i] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[i + 1..];
        }
        f.write_str(rest)
    }
}

/// `text` percent-encoded for a URL's query value or path segment (every
/// byte but the unreserved ones of RFC 3986).
pub(super) fn url_part(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The entries of the navigation (an entry without a page would be shown
/// as not yet available).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Nav {
    Overview,
    /// Jobs by state, and one job.
    Jobs,
    Workers,
    DeadLetters,
    Workstreams,
    /// Pause and resume of the queue or a domain.
    Control,
    /// The login page and error pages: no entry is current.
    None,
}

impl Nav {
    const ENTRIES: [(Nav, &'static str, Option<&'static str>); 6] = [
        (Nav::Overview, "Overview", Some("/ui")),
        (Nav::Jobs, "Jobs", Some("/ui/jobs")),
        (Nav::Workers, "Workers", Some("/ui/workers")),
        (Nav::DeadLetters, "Dead letters", Some("/ui/dead-letters")),
        (Nav::Workstreams, "Workstreams", Some("/ui/workstreams")),
        (Nav::Control, "Pause / resume", Some("/ui/queue")),
    ];
}

/// What the frame needs besides the page's own content.
pub(super) struct Frame<'a> {
    pub(super) title: &'a str,
    pub(super) nav: Nav,
    /// The CSRF token the page's forms carry (also in a `<meta>` for the
    /// script's confirm step).
    pub(super) csrf: &'a str,
    /// A token is configured and the browser is signed in: show "sign out".
    pub(super) signed_in: bool,
}

/// A whole page: the frame around `body`, with the headers every console
/// page carries (no caching, a strict Content-Security-Policy: only the
/// console's own stylesheet and script, no frames).
pub(super) fn page(status: StatusCode, frame: &Frame<'_>, body: &str) -> Response {
    let mut html = String::with_capacity(body.len() + 2048);
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"color-scheme\" content=\"light dark\">\
         <meta name=\"csrf-token\" content=\"{csrf}\">\
         <title>{title} · compactor</title>\
         <link rel=\"stylesheet\" href=\"/ui/assets/console.css\">\
         <script src=\"/ui/assets/console.js\" defer></script></head><body>\
         <header class=\"top\"><a class=\"brand\" href=\"/ui\">compactor</a><nav>",
        csrf = esc(frame.csrf),
        title = esc(frame.title),
    );
    if frame.nav != Nav::None {
        for (entry, label, href) in Nav::ENTRIES {
            let current = if entry == frame.nav {
                " aria-current=\"page\""
            } else {
                ""
            };
            match href {
                Some(href) => {
                    let _ = write!(html, "<a href=\"{href}\"{current}>{label}</a>");
                }
                None => {
                    let _ = write!(
                        html,
                        "<span class=\"slot\" aria-disabled=\"true\" \
                         title=\"Arrives with the queue-control API\">{label}</span>"
                    );
                }
            }
        }
    }
    html.push_str("</nav>");
    if frame.signed_in {
        let _ = write!(
            html,
            "<form class=\"signout\" method=\"post\" action=\"/ui/logout\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <button type=\"submit\">Sign out</button></form>",
            esc(frame.csrf)
        );
    }
    let _ = write!(
        html,
        "</header><main><h1>{}</h1>{body}</main></body></html>",
        esc(frame.title)
    );
    html_response(status, html)
}

/// `html` as a response with the console's headers.
pub(super) fn html_response(status: StatusCode, html: String) -> Response {
    let mut response = (status, html).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Not `no-referrer`: under it browsers send `Origin: null` with the
    // console's own forms, which the CSRF check refuses.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// A UTC time as `2026-11-27 03:30:00`, in a `<time>` element.
pub(super) fn time(at: DateTime<Utc>) -> String {
    format!(
        "<time datetime=\"{}\">{}</time>",
        at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        at.format("%Y-%m-%d %H:%M:%S")
    )
}

/// A unix-millisecond time as [`time`] does (`—` when 0 or out of range).
pub(super) fn time_ms(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .filter(|&ms| ms > 0)
        .and_then(|ms| Utc.timestamp_millis_opt(ms).single())
        .map_or_else(|| "—".to_owned(), time)
}

/// A duration in milliseconds, roughly: `850 ms`, `12 s`, `5 min`, `3 h`,
/// `2 d`.
pub(super) fn age(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..120_000 => format!("{} s", ms / 1_000),
        120_000..7_200_000 => format!("{} min", ms / 60_000),
        7_200_000..172_800_000 => format!("{} h", ms / 3_600_000),
        _ => format!("{} d", ms / 86_400_000),
    }
}

/// A count with thousands separators: `1,234,567`.
pub(super) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bars of `values` (oldest first) as an inline SVG, scaled to the
/// largest; each bar has a tooltip from `label(index, value)`.
pub(super) fn sparkline(values: &[u64], label: impl Fn(usize, u64) -> String) -> String {
    const HEIGHT: u64 = 40;
    let max = values.iter().copied().max().unwrap_or(0).max(1);
    let width = values.len().max(1) * 4;
    let mut svg = format!(
        "<svg class=\"spark\" viewBox=\"0 0 {width} {HEIGHT}\" preserveAspectRatio=\"none\" \
         role=\"img\" aria-label=\"completions per minute\">"
    );
    for (i, &v) in values.iter().enumerate() {
        // At least one unit tall, so an empty minute still shows.
        let h = (v * (HEIGHT - 1) / max + 1).min(HEIGHT);
        let _ = write!(
            svg,
            "<rect x=\"{}\" y=\"{}\" width=\"3\" height=\"{h}\"><title>{}</title></rect>",
            i * 4,
            HEIGHT - h,
            esc(&label(i, v))
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_content_and_attributes() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>").to_string(),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(esc("plain").to_string(), "plain");
    }

    #[test]
    fn url_parts_keep_only_unreserved_bytes() {
        assert_eq!(url_part("compact:chat:a b|7"), "compact%3Achat%3Aa%20b%7C7");
        assert_eq!(url_part("a-Z_0.~"), "a-Z_0.~");
    }

    #[test]
    fn numbers_and_durations_read_at_a_glance() {
        assert_eq!(count(0), "0");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(999), "999");
        assert_eq!(age(850), "850 ms");
        assert_eq!(age(12_000), "12 s");
        assert_eq!(age(300_000), "5 min");
        assert_eq!(age(3 * 3_600_000), "3 h");
        assert_eq!(age(3 * 86_400_000), "3 d");
        assert_eq!(time_ms(0), "—");
    }

    #[test]
    fn a_sparkline_has_one_bar_per_value_scaled_to_the_largest() {
        let svg = sparkline(&[0, 5, 10], |i, v| format!("{i}: {v}"));
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains("height=\"40\""), "{svg}");
        assert!(svg.contains("<title>1: 5</title>"), "{svg}");
    }
}

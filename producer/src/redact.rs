//! Hiding passwords in connection strings (PostgreSQL, SQLite, Redis, and
//! comma-separated lists of Redis seed nodes), for logs, errors, `Debug`
//! output and serialized settings. Settings, the store and the queue all
//! show URLs, so redaction is a module of its own rather than a part of
//! any of them.

/// Where the user info of a connection string ends: the index of its `@`.
///
/// Written by hand, URLs are often not encoded: a password may hold `/`,
/// `?`, `#` or `@`, and the scheme may be mistyped (`redis//:pw@host`). So
/// the `@` is not looked for in a parsed authority (cut at the first `/`, a
/// password with a `/` would be shown in part) but as the last `@` of the
/// string: everything before it is treated as user info, so no part of a
/// password can be shown. The price: an `@` in the query (rare in
/// connection strings) hides the host and path as well.
fn userinfo_end(url: &str) -> Option<usize> {
    url.rfind('@')
}

/// Where the user info starts: after `scheme://`, or at the start of a
/// string whose scheme is mistyped.
fn userinfo_start(url: &str, end: usize) -> usize {
    match url[..end].find("://") {
        Some(at) => at + 3,
        None => 0,
    }
}

/// The password of a connection string, if it has one: the one in the user
/// info (`scheme://user:password@host`) and any `password=` / `sslpassword=`
/// query parameter.
fn passwords(url: &str) -> Vec<&str> {
    let mut found = Vec::new();
    if let Some(end) = userinfo_end(url) {
        let userinfo = &url[userinfo_start(url, end)..end];
        if let Some((_, password)) = userinfo.split_once(':') {
            if !password.is_empty() {
                found.push(password);
            }
        }
    }
    if let Some((_, query)) = url.split_once('?') {
        for pair in query.split(['&', '#']) {
            if let Some((key, value)) = pair.split_once('=') {
                if is_password_param(key) && !value.is_empty() {
                    found.push(value);
                }
            }
        }
    }
    found
}

fn is_password_param(key: &str) -> bool {
    key.eq_ignore_ascii_case("password") || key.eq_ignore_ascii_case("sslpassword")
}

/// Splits a comma-separated list of URLs (the seed nodes of a Redis
/// Cluster, `redis://a:6379,redis://b:6379`) into its URLs, trimmed.
///
/// A comma starts a new URL only when what follows it begins with a
/// scheme (`redis://`, `rediss://`, …): a comma inside a password, or in
/// PostgreSQL's multi-host form (`postgres://u:p@h1,h2/db`), stays part of
/// its URL. So a password can never be cut in two and shown half unredacted.
/// A trailing comma is ignored.
pub fn split_url_list(list: &str) -> Vec<&str> {
    let mut urls = Vec::new();
    let mut start = 0;
    let mut search_from = 0;
    while let Some(at) = list[search_from..].find(',').map(|i| search_from + i) {
        let rest = list[at + 1..].trim_start();
        if rest.is_empty() || starts_with_scheme(rest) {
            urls.push(list[start..at].trim());
            start = at + 1;
        }
        search_from = at + 1;
    }
    urls.push(list[start..].trim());
    urls.retain(|u| !u.is_empty());
    urls
}

/// Whether `s` begins with `<scheme>://` (RFC 3986 scheme characters).
fn starts_with_scheme(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once("://") else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `postgres://user:secret@host/db?password=x` → `postgres://user:***@host/db?password=***`.
/// A list of URLs ([`split_url_list`]) has each of its URLs redacted.
pub fn redact_url(url: &str) -> String {
    let urls = split_url_list(url);
    if urls.len() > 1 {
        return urls
            .into_iter()
            .map(redact_one_url)
            .collect::<Vec<_>>()
            .join(",");
    }
    redact_one_url(url)
}

fn redact_one_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let rest = match userinfo_end(url) {
        Some(end) => {
            let start = userinfo_start(url, end);
            out.push_str(&url[..start]);
            // Only a user name followed by `:password` is shown: without the
            // colon, the one word may be a password typed in its place.
            match url[start..end].split_once(':') {
                Some((user, _)) if start > 0 => {
                    out.push_str(user);
                    out.push_str(":***");
                }
                _ => out.push_str("***"),
            }
            out.push('@');
            &url[end + 1..]
        }
        None => url,
    };
    let (head, query) = match rest.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (rest, None),
    };
    out.push_str(head);
    if let Some(query) = query {
        out.push('?');
        let mut first = true;
        for pair in query.split('&') {
            if !first {
                out.push('&');
            }
            first = false;
            match pair.split_once('=') {
                Some((key, _)) if is_password_param(key) => {
                    out.push_str(key);
                    out.push_str("=***");
                }
                _ => out.push_str(pair),
            }
        }
    }
    out
}

/// `text` with every password of `url` replaced by `***` (for driver
/// messages that may quote the connection string).
pub(crate) fn scrub(text: &str, url: &str) -> String {
    let mut out = text.replace(url, &redact_url(url));
    for password in passwords(url) {
        out = out.replace(password, "***");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_the_password_of_the_user_info_and_of_query_parameters() {
        assert_eq!(
            redact_url("postgres://app:s3cr%40t@db.internal:5432/compactor?sslmode=require"),
            "postgres://app:***@db.internal:5432/compactor?sslmode=require"
        );
        assert_eq!(
            redact_url("postgres://app@db/x?password=hunter2&application_name=c"),
            "postgres://***@db/x?password=***&application_name=c"
        );
        assert_eq!(
            redact_url("sqlite://data/compactor.db?mode=rwc"),
            "sqlite://data/compactor.db?mode=rwc"
        );
        assert_eq!(redact_url("postgres://u:p@h"), "postgres://u:***@h");
        assert_eq!(redact_url("not a url"), "not a url");
    }

    /// Hand-written URLs are often not encoded, and their schemes get
    /// mistyped: the password must stay hidden whatever it holds.
    #[test]
    fn passwords_stay_hidden_in_unencoded_and_mistyped_urls() {
        for (url, secret, shown) in [
            // The scheme's colon forgotten: not a URL, still redacted.
            ("redis//:hunter2@cache:6379", "hunter2", "***@cache:6379"),
            ("redis:/:hunter2@cache", "hunter2", "***@cache"),
            ("redis:hunter2@cache", "hunter2", "***@cache"),
            // `/`, `?`, `@` and `#` inside the password.
            ("redis://:hun/ter2@cache/0", "ter2", "redis://:***@cache/0"),
            ("redis://:hun?ter2@cache/0", "ter2", "redis://:***@cache/0"),
            (
                "postgres://u:p@ss/w?rd@db/x?sslmode=require",
                "rd",
                "postgres://u:***@db/x?sslmode=require",
            ),
            ("postgres://u:pa#ss@db/x", "pa#ss", "postgres://u:***@db/x"),
            // A password typed without its colon, in the user's place.
            (
                "redis://hunter2@cache:6379",
                "hunter2",
                "redis://***@cache:6379",
            ),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
            assert!(!redact_url(url).contains(secret), "{url}");
            let scrubbed = scrub(&format!("driver says: {url} is bad"), url);
            assert!(!scrubbed.contains(secret), "{scrubbed}");
        }
        // An `@` in the query hides more than the password, never less.
        assert!(!redact_url("postgres://u:pw@db/x?application_name=me@corp").contains("pw"));
    }

    #[test]
    fn lists_of_urls_are_split_and_each_one_redacted() {
        assert_eq!(
            split_url_list("redis://10.0.0.1:6379, redis://10.0.0.2:6379,"),
            vec!["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"]
        );
        assert_eq!(split_url_list("redis://h:1"), vec!["redis://h:1"]);
        // A comma not followed by a scheme belongs to the URL.
        assert_eq!(
            split_url_list("redis://:pa,ss@h:1,rediss://:pa,ss@g:2"),
            vec!["redis://:pa,ss@h:1", "rediss://:pa,ss@g:2"]
        );
        assert_eq!(
            split_url_list("postgres://u:p@h1,h2:5432/db"),
            vec!["postgres://u:p@h1,h2:5432/db"]
        );
        let shown = redact_url("redis://:hunter2@a:1,redis://u:hunter,3@b:2/0");
        assert_eq!(shown, "redis://:***@a:1,redis://u:***@b:2/0");
        assert_eq!(
            redact_url("postgres://u:secret@h1,h2/db"),
            "postgres://u:***@h1,h2/db"
        );
    }

    #[test]
    fn redis_urls_are_redacted() {
        assert_eq!(
            redact_url("redis://user:secret@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
    }

    #[test]
    fn scrubs_passwords_from_driver_messages() {
        let url = "postgres://app:hunter2@db/x";
        let text = format!("The connection string '{url}' has no supporting driver. (hunter2)");
        let scrubbed = scrub(&text, url);
        assert!(!scrubbed.contains("hunter2"), "{scrubbed}");
        assert!(scrubbed.contains("postgres://app:***@db/x"), "{scrubbed}");
    }
}

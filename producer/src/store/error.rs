//! The one error type of the storage layer.
//!
//! Every variant names the operation that failed, so a log line says *what*
//! the service was doing, not only what the driver said. Connection strings
//! are only ever shown redacted ([`redact_url`]): a `StoreError` can be
//! logged, returned over the admin API or printed by the CLI without leaking
//! the database password. For the same reason a connection failure keeps the
//! driver's message as scrubbed text instead of the driver error itself
//! (sea-orm repeats the full URL in some of its messages).

use std::time::Duration;

use compactor_shared::MessageId;
use sea_orm::DbErr;

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or refused the connection.
    #[error("cannot connect to the database at {url}: {detail}")]
    Connect {
        /// The connection string, password replaced by `***`.
        url: String,
        /// The driver's message, with the password scrubbed.
        detail: String,
    },
    /// The connection attempt did not finish in time (unreachable host,
    /// firewall dropping packets, a database that accepts but never answers).
    #[error("connecting to the database at {url} did not finish within {after:?}")]
    ConnectTimeout { url: String, after: Duration },
    /// A statement failed (connection lost, constraint violated, …).
    #[error("{op}: {source}")]
    Db {
        op: &'static str,
        #[source]
        source: DbErr,
    },
    /// A stored row does not decode (its JSON, role or outcome is not one
    /// this build understands). Never skipped silently: a row that is left
    /// out of a compaction would be lost from the summary.
    #[error("corrupt row {table}#{id}: {detail}")]
    CorruptRow {
        table: &'static str,
        id: i64,
        detail: String,
    },
    /// A value could not be encoded as JSON for storage.
    #[error("{op}: cannot encode {what} as JSON: {source}")]
    Encode {
        op: &'static str,
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// The workstream id does not exist (deleted, or never created).
    #[error("{op}: workstream {workstream_id} does not exist")]
    UnknownWorkstream {
        op: &'static str,
        workstream_id: i64,
    },
    /// A message of an append carries a client id that names a stored
    /// message (or an earlier message of the same append) with other
    /// content: a client id names one message, for good.
    #[error("{op}: client id {client_id:?} already names a message with other content (message {index} of the request)")]
    ClientIdConflict {
        op: &'static str,
        client_id: String,
        /// Position of the conflicting message in the request (0-based).
        index: usize,
    },
    /// A message the operation names is not a message of the workstream.
    #[error("{op}: message {message_id} does not belong to workstream {workstream_id}")]
    UnknownMessage {
        op: &'static str,
        workstream_id: i64,
        message_id: MessageId,
    },
}

impl StoreError {
    pub(crate) fn db(op: &'static str) -> impl FnOnce(DbErr) -> StoreError {
        move |source| StoreError::Db { op, source }
    }

    /// Whether retrying later may succeed: the database was unreachable,
    /// the connection pool was exhausted, or a statement ran out of its
    /// `statement_timeout` (PostgreSQL cancelled it, or SQLite waited that
    /// long for a lock), as opposed to a corrupt row or a statement the
    /// database refused.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Connect { .. } | StoreError::ConnectTimeout { .. } => true,
            StoreError::Db { source, .. } => {
                matches!(source, DbErr::Conn(_) | DbErr::ConnectionAcquire(_))
                    || statement_timed_out(source)
            }
            _ => false,
        }
    }

    /// Whether a statement ran out of `[database] statement_timeout`.
    pub fn is_statement_timeout(&self) -> bool {
        matches!(self, StoreError::Db { source, .. } if statement_timed_out(source))
    }
}

/// PostgreSQL's `query_canceled` (SQLSTATE 57014: `statement_timeout`
/// fired), or SQLite's `SQLITE_BUSY` and its extended codes (the busy
/// timeout ran out waiting for another writer's lock).
fn statement_timed_out(error: &DbErr) -> bool {
    use sea_orm::RuntimeErr;
    let (DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e))) = error
    else {
        return false;
    };
    let Some(db) = e.as_database_error() else {
        return false;
    };
    let code = db.code().unwrap_or_default();
    if db
        .try_downcast_ref::<sea_orm::sqlx::sqlite::SqliteError>()
        .is_some()
    {
        // Extended result codes keep the primary code in the low byte.
        return code.parse::<u32>().is_ok_and(|c| c & 0xff == 5);
    }
    code == "57014"
}

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
    fn scrubs_passwords_from_driver_messages() {
        let url = "postgres://app:hunter2@db/x";
        let text = format!("The connection string '{url}' has no supporting driver. (hunter2)");
        let scrubbed = scrub(&text, url);
        assert!(!scrubbed.contains("hunter2"), "{scrubbed}");
        assert!(scrubbed.contains("postgres://app:***@db/x"), "{scrubbed}");
    }
}

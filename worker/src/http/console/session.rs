//! Who may see the console, and proof that a form was sent from it.
//!
//! **Sign-in.** With `[admin] token_env` set, the console shows nothing
//! but its login page until the browser is signed in: the login form takes
//! the admin token (the `/v1` bearer token) and sets an `HttpOnly`,
//! `SameSite=Strict` session cookie. The cookie is not the token: it is
//! `<expiry>.<HMAC-SHA256(token, expiry)>`, so it expires (after
//! [`SESSION_TTL_SECS`], 12 hours) and stops working when the token is changed, and a
//! cookie that leaks does not reveal the API token. It is checked in
//! constant time, as the bearer token is. A request with the bearer token
//! itself (`Authorization: Bearer …`) is let in too (scripts, the bench).
//! Without a configured token the console is open, as `/v1` is (the
//! admin server then listens on loopback only).
//!
//! **Forms.** Every POST carries a CSRF token in a form field that must
//! equal the `SameSite=Strict` CSRF cookie (a double-submit: another site
//! can neither read the cookie nor make the browser send it), and a
//! request whose `Origin` names another host is refused. [`CsrfForm`] is
//! the only way a handler reads a form, so no form skips the check.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{FromRequest, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::error::ConsoleError;
use super::html::{esc, page, Frame, Nav};
use crate::http::AppState;
use crate::settings::AdminToken;

/// The session cookie's name.
pub(super) const SESSION_COOKIE: &str = "compactor_session";
/// The CSRF cookie's name.
pub(super) const CSRF_COOKIE: &str = "compactor_csrf";
/// How long a sign-in lasts.
pub(super) const SESSION_TTL_SECS: u64 = 12 * 3600;

/// What the guard learned about the request, for the handlers.
#[derive(Debug, Clone)]
pub(super) struct Visitor {
    /// The CSRF token of the browser (from its cookie, or new).
    pub(super) csrf: String,
    /// A token is configured and the request proved it.
    pub(super) signed_in: bool,
}

impl Visitor {
    /// The frame of a page for this visitor.
    pub(super) fn frame<'a>(&'a self, title: &'a str, nav: Nav) -> Frame<'a> {
        Frame {
            title,
            nav,
            csrf: &self.csrf,
            signed_in: self.signed_in,
        }
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Visitor {
    type Rejection = ConsoleError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Visitor>()
            .cloned()
            .ok_or(ConsoleError::Forbidden("no console session"))
    }
}

/// Paths served to anyone: the login page, and the stylesheet and script
/// (which carry no data).
fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/ui/login" | "/ui/assets/console.css" | "/ui/assets/console.js"
    )
}

/// The guard in front of every `/ui` route: finds (or makes) the CSRF
/// token, decides whether the request is signed in, and answers anything
/// but the public paths with the login page (401) when it is not.
pub(super) async fn guard(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let existing = cookie(headers, CSRF_COOKIE)
        .filter(|v| v.len() == 43 && v.bytes().all(is_base64url))
        .map(str::to_owned);
    let fresh_csrf = existing.is_none();
    let csrf = existing.unwrap_or_else(new_csrf_token);
    let (allowed, signed_in) = match state.token() {
        None => (true, false),
        Some(token) => {
            let ok = has_bearer(headers, token)
                || cookie(headers, SESSION_COOKIE)
                    .is_some_and(|v| session_valid(token, v, now_secs()));
            (ok, ok)
        }
    };
    let visitor = Visitor { csrf, signed_in };
    let path = request.uri().path().to_owned();
    let mut response = if allowed || is_public(&path) {
        request.extensions_mut().insert(visitor.clone());
        next.run(request).await
    } else {
        // Only the login page: no data, whatever was asked for (not even
        // the path asked for, which may name a workstream: signing in
        // leads to the overview).
        login_page(&visitor, StatusCode::UNAUTHORIZED, None, None)
    };
    if fresh_csrf {
        if let Ok(value) = HeaderValue::from_str(&format!(
            "{CSRF_COOKIE}={}; Path=/ui; HttpOnly; SameSite=Strict",
            visitor.csrf
        )) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

fn is_base64url(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// 32 random bytes, base64url (43 characters).
fn new_csrf_token() -> String {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    URL_SAFE_NO_PAD.encode(bytes)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The value of cookie `name`, if the request has it.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn has_bearer(headers: &HeaderMap, token: &AdminToken) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| super::super::auth::bearer(v.as_bytes()))
        .is_some_and(|presented| token.matches(presented))
}

/// The MAC of a session expiring at `expires` (unix seconds).
fn session_mac(token: &AdminToken, expires: u64) -> Vec<u8> {
    // HMAC takes a key of any length: this cannot fail.
    let mut mac = match <Hmac<Sha256> as KeyInit>::new_from_slice(token.hmac_key()) {
        Ok(mac) => mac,
        Err(_) => return Vec::new(),
    };
    mac.update(b"compactor-console-session\0");
    mac.update(expires.to_string().as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// A session cookie's value for `token`, expiring [`SESSION_TTL_SECS`]
/// after `now` (unix seconds).
pub(super) fn session_value(token: &AdminToken, now: u64) -> String {
    let expires = now + SESSION_TTL_SECS;
    format!(
        "{expires}.{}",
        URL_SAFE_NO_PAD.encode(session_mac(token, expires))
    )
}

/// Whether `value` is a session cookie made with `token` that has not
/// expired at `now` (the MAC compared in constant time).
pub(super) fn session_valid(token: &AdminToken, value: &str, now: u64) -> bool {
    let Some((expires, mac)) = value.split_once('.') else {
        return false;
    };
    let Ok(expires) = expires.parse::<u64>() else {
        return false;
    };
    if expires <= now || expires > now + SESSION_TTL_SECS {
        return false;
    }
    let Ok(mac) = URL_SAFE_NO_PAD.decode(mac) else {
        return false;
    };
    session_mac(token, expires).ct_eq(&mac).into()
}

/// A form sent from the console: its CSRF field matched the browser's
/// CSRF cookie, and its `Origin` (when sent) is this host.
pub(super) struct CsrfForm<T>(pub(super) T);

/// The CSRF field every console form has, beside its own fields.
#[derive(Deserialize)]
struct CsrfField {
    #[serde(default)]
    csrf: String,
}

impl<S, T> FromRequest<S> for CsrfForm<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ConsoleError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let headers = request.headers();
        if !same_origin(headers) {
            return Err(ConsoleError::Forbidden(
                "the form was sent from another site",
            ));
        }
        let expected = cookie(headers, CSRF_COOKIE).map(str::to_owned);
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(|_| ConsoleError::BadRequest("unreadable form".to_owned()))?;
        let field: CsrfField = serde_urlencoded_from(&bytes)?;
        let matches = expected.is_some_and(|cookie| {
            !field.csrf.is_empty() && bool::from(cookie.as_bytes().ct_eq(field.csrf.as_bytes()))
        });
        if !matches {
            return Err(ConsoleError::Forbidden(
                "the form's CSRF token is missing or stale: reload the page and try again",
            ));
        }
        Ok(CsrfForm(serde_urlencoded_from(&bytes)?))
    }
}

/// Decodes a form body (`application/x-www-form-urlencoded`).
fn serde_urlencoded_from<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ConsoleError> {
    serde_urlencoded::from_bytes(bytes).map_err(|e| ConsoleError::BadRequest(e.to_string()))
}

/// No `Origin`, or one whose host is the request's `Host`.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let origin_host = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or_default();
    !host.is_empty() && origin_host.eq_ignore_ascii_case(host)
}

/// The login page (`problem`: why the last try failed).
pub(super) fn login_page(
    visitor: &Visitor,
    status: StatusCode,
    problem: Option<&str>,
    next: Option<&str>,
) -> Response {
    let problem = problem
        .map(|p| format!("<p class=\"notice bad\" role=\"alert\">{}</p>", esc(p)))
        .unwrap_or_default();
    let next = next.filter(|n| safe_next(n)).unwrap_or("/ui");
    let body = format!(
        "{problem}<form class=\"login card\" method=\"post\" action=\"/ui/login\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <input type=\"hidden\" name=\"next\" value=\"{next}\">\
         <label for=\"token\">Admin token</label>\
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required autofocus>\
         <button type=\"submit\">Sign in</button>\
         <p class=\"hint\">The bearer token of the admin API (<code>[admin] token_env</code>).</p></form>",
        csrf = esc(&visitor.csrf),
        next = esc(next),
    );
    let frame = Frame {
        title: "Sign in",
        nav: Nav::None,
        csrf: &visitor.csrf,
        signed_in: false,
    };
    page(status, &frame, &body)
}

/// A path to return to after signing in: one of the console's own.
fn safe_next(next: &str) -> bool {
    (next == "/ui" || next.starts_with("/ui/"))
        && !next.contains("//")
        && !next.contains('\\')
        && next.bytes().all(|b| b.is_ascii_graphic())
}

/// `GET /ui/login`.
pub(super) async fn login_form(State(state): State<AppState>, visitor: Visitor) -> Response {
    if state.token().is_none() || visitor.signed_in {
        return Redirect::to("/ui").into_response();
    }
    login_page(&visitor, StatusCode::OK, None, None)
}

#[derive(Deserialize)]
pub(super) struct LoginForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    next: String,
}

/// `POST /ui/login`: signs the browser in when the token is right.
pub(super) async fn login(
    State(state): State<AppState>,
    visitor: Visitor,
    CsrfForm(form): CsrfForm<LoginForm>,
) -> Response {
    let Some(token) = state.token() else {
        return Redirect::to("/ui").into_response();
    };
    if !token.matches(form.token.as_bytes()) {
        return login_page(
            &visitor,
            StatusCode::UNAUTHORIZED,
            Some("That is not the admin token."),
            Some(&form.next),
        );
    }
    let next = if safe_next(&form.next) {
        form.next.as_str()
    } else {
        "/ui"
    };
    let mut response = Redirect::to(next).into_response();
    if let Ok(value) = HeaderValue::from_str(&format!(
        "{SESSION_COOKIE}={}; Path=/ui; Max-Age={SESSION_TTL_SECS}; HttpOnly; SameSite=Strict",
        session_value(token, now_secs())
    )) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

#[derive(Deserialize)]
pub(super) struct Nothing {}

/// `POST /ui/logout`: forgets the session cookie.
pub(super) async fn logout(CsrfForm(_): CsrfForm<Nothing>) -> Response {
    let mut response = Redirect::to("/ui/login").into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "compactor_session=; Path=/ui; Max-Age=0; HttpOnly; SameSite=Strict",
        ),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_valid_for_its_token_until_it_expires() {
        let token = AdminToken::new("s3cret");
        let value = session_value(&token, 1_000);
        assert!(session_valid(&token, &value, 1_000));
        assert!(session_valid(&token, &value, 1_000 + SESSION_TTL_SECS - 1));
        assert!(!session_valid(&token, &value, 1_000 + SESSION_TTL_SECS));
        assert!(!session_valid(&AdminToken::new("other"), &value, 1_000));
        assert!(!value.contains("s3cret"), "the cookie is not the token");
    }

    #[test]
    fn a_forged_or_malformed_session_is_refused() {
        let token = AdminToken::new("s3cret");
        let value = session_value(&token, 1_000);
        let (expires, mac) = value.split_once('.').unwrap();
        let later = expires.parse::<u64>().unwrap() + 10;
        assert!(!session_valid(&token, &format!("{later}.{mac}"), 1_000));
        for bad in [
            "",
            ".",
            "x.y",
            "123",
            &format!("{expires}."),
            "99999999999999999999.a",
        ] {
            assert!(!session_valid(&token, bad, 1_000), "{bad}");
        }
    }

    #[test]
    fn cookies_are_found_by_exact_name() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; compactor_csrf_x=2; compactor_csrf=3"),
        );
        assert_eq!(cookie(&headers, CSRF_COOKIE), Some("3"));
        assert_eq!(cookie(&headers, "b"), None);
    }

    #[test]
    fn a_form_from_another_origin_is_refused() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:9000"));
        assert!(same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:9000"),
        );
        assert!(same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert!(!same_origin(&headers));
        headers.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert!(!same_origin(&headers));
    }

    #[test]
    fn only_console_paths_are_returned_to_after_signing_in() {
        assert!(safe_next("/ui"));
        assert!(safe_next("/ui/workstreams/chat/a"));
        assert!(!safe_next("//evil.example/ui"));
        assert!(!safe_next("/ui//evil"));
        assert!(!safe_next("https://evil.example"));
        assert!(!safe_next("/v1/events/deliveries"));
    }

    #[test]
    fn csrf_tokens_are_fresh_and_base64url() {
        let a = new_csrf_token();
        assert_eq!(a.len(), 43);
        assert!(a.bytes().all(is_base64url));
        assert_ne!(a, new_csrf_token());
    }
}

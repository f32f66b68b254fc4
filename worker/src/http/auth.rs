//! The optional bearer token of the `/v1` routes (`[admin] token_env`).
//! `/metrics`, `/healthz` and `/readyz` stay open: probes and scrapers do
//! not carry credentials, and they reveal no conversation.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::AppState;

/// Lets the request through when no token is configured or when it carries
/// `Authorization: Bearer <token>` with the right token (compared in
/// constant time); otherwise 401.
pub(super) async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = state.token() else {
        return next.run(request).await;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| bearer(value.as_bytes()));
    match presented {
        None => ApiError::Unauthorized("missing bearer token (Authorization: Bearer <token>)")
            .into_response(),
        Some(token) if expected.matches(token) => next.run(request).await,
        Some(_) => ApiError::Unauthorized("invalid bearer token").into_response(),
    }
}

/// The token of an `Authorization` value of the `Bearer` scheme (the
/// scheme name is case-insensitive, RFC 9110 §11.1).
pub(super) fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, token) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = token.trim_ascii();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::bearer;

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_needs_a_token() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bearer "), None);
        assert_eq!(bearer(b"Bearer"), None);
    }
}

//! Extractors that turn every way a request can be malformed into an
//! [`ApiError`] (JSON, a precise 4xx) instead of axum's plain-text
//! rejections.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use compactor_producer::client::{IdempotencyKey, IDEMPOTENCY_KEY_MAX_BYTES};
use compactor_shared::EntityKey;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use utoipa::IntoParams;

use super::error::ApiError;

/// The workstream named by the `{domain}/{entity}` path segments,
/// validated by [`EntityKey::parse`] (the same rules as every other entry
/// point, so a key the API accepts is one the queue and the store accept).
#[derive(Debug, Clone)]
pub struct Workstream(pub EntityKey);

impl<S: Send + Sync> FromRequestParts<S> for Workstream {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(WorkstreamPath { domain, entity }) =
            Path::<WorkstreamPath>::from_request_parts(parts, state)
                .await
                .map_err(|rejection| ApiError::InvalidKey(rejection.body_text()))?;
        EntityKey::parse(&domain, &entity)
            .map(Workstream)
            .map_err(|e| ApiError::InvalidKey(e.to_string()))
    }
}

/// The path parameters of a workstream route, as the OpenAPI document
/// states them (the patterns are [`EntityKey::parse`]'s rules; anything
/// else is a 400 `invalid_key`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct WorkstreamPath {
    /// The workstream's domain: 1-32 of `a-z 0-9 _ -`, starting with a
    /// letter.
    #[param(pattern = "^[a-z][a-z0-9_-]{0,31}$")]
    domain: String,
    /// The entity's id: 1-128 of `A-Z a-z 0-9 _ - .`, starting with a
    /// letter or a digit.
    #[param(pattern = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")]
    entity: String,
}

/// The `Idempotency-Key` header, when the request has one: makes an append
/// safe to retry (see `IdempotencyKey`). Malformed (not 1-200 bytes of
/// printable ASCII, or given twice) is a 400 `invalid_header`.
#[derive(Debug, Clone)]
pub struct IdempotencyKeyHeader(pub Option<IdempotencyKey>);

/// The header's name.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKeyHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let mut values = parts.headers.get_all(IDEMPOTENCY_KEY).iter();
        let Some(value) = values.next() else {
            return Ok(IdempotencyKeyHeader(None));
        };
        if values.next().is_some() {
            return Err(ApiError::InvalidHeader(
                "Idempotency-Key: give it once".to_owned(),
            ));
        }
        let key = value
            .to_str()
            .ok()
            .and_then(|v| IdempotencyKey::parse(v).ok())
            .ok_or_else(|| {
                ApiError::InvalidHeader(format!(
                    "Idempotency-Key: use 1-{IDEMPOTENCY_KEY_MAX_BYTES} bytes of printable ASCII"
                ))
            })?;
        Ok(IdempotencyKeyHeader(Some(key)))
    }
}

/// A JSON body of type `T`, whatever the `Content-Type` (clients in other
/// languages, and `curl -d`, often send none or a form type). An empty
/// body is malformed JSON here; see [`OptionalJson`].
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(req, state).await?;
        parse(&bytes).map(JsonBody)
    }
}

/// Like [`JsonBody`], but an empty body, or `null`, stands for
/// `T::default()` (for routes whose every field is optional, and whose
/// document says so with an optional, nullable body).
#[derive(Debug)]
pub struct OptionalJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        parse::<Option<T>>(&bytes).map(|body| OptionalJson(body.unwrap_or_default()))
    }
}

/// The body, at most the route's body limit (`admin.max_body_bytes`,
/// enforced by the router's `RequestBodyLimit` layer: a chunked body that
/// passes it fails here with 413).
async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(
                "the request body is larger than admin.max_body_bytes".to_owned(),
            )
        } else {
            ApiError::InvalidBody(rejection.body_text())
        }
    })
}

fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::InvalidBody(e.to_string()))
}

/// Query parameters of type `T`; unknown or malformed ones are a 400.
#[derive(Debug)]
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(t)| QueryParams(t))
            .map_err(|rejection| ApiError::InvalidQuery(rejection.body_text()))
    }
}

//! The console's errors: an HTML page with a status, never a panic, and
//! never the details of a failing backend beyond its kind (those go to the
//! log at warn, as the API's do).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use compactor_producer::queue::QueueError;
use compactor_producer::store::StoreError;
use tracing::warn;

use super::html::{esc, page, Frame, Nav};

#[derive(Debug, thiserror::Error)]
pub(super) enum ConsoleError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    #[error("the database did not answer: {0}")]
    Store(#[from] StoreError),
    #[error("Redis did not answer: {0}")]
    Queue(#[from] QueueError),
}

impl ConsoleError {
    fn status(&self) -> StatusCode {
        match self {
            ConsoleError::NotFound(_) => StatusCode::NOT_FOUND,
            ConsoleError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ConsoleError::Forbidden(_) => StatusCode::FORBIDDEN,
            ConsoleError::Store(_) | ConsoleError::Queue(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// What the page says: the whole message for the operator's own
    /// mistakes, only the kind of failure for a backend's.
    fn shown(&self) -> String {
        match self {
            ConsoleError::Store(_) => {
                "The database did not answer; see the worker's log.".to_owned()
            }
            ConsoleError::Queue(_) => "Redis did not answer; see the worker's log.".to_owned(),
            other => other.to_string(),
        }
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        if matches!(self, ConsoleError::Store(_) | ConsoleError::Queue(_)) {
            warn!(error = %self, "console page failed");
        }
        let status = self.status();
        // The error page carries no data, so no CSRF token is needed on it.
        let frame = Frame {
            title: status.canonical_reason().unwrap_or("Error"),
            nav: Nav::None,
            csrf: "",
            signed_in: false,
        };
        let body = format!(
            "<p class=\"notice bad\" role=\"alert\">{}</p><p><a href=\"/ui\">Back to the overview</a></p>",
            esc(&self.shown())
        );
        page(status, &frame, &body)
    }
}

//! The console's stylesheet and script, compiled into the binary (no CDN,
//! no build step): one hand-written CSS file (responsive, light and dark
//! by `prefers-color-scheme`) and one small script that only adds a
//! confirm dialog in front of destructive forms, which work without it.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

const CSS: &str = include_str!("console.css");
const JS: &str = include_str!("console.js");

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// `GET /ui/assets/console.css`.
pub(super) async fn css() -> Response {
    asset(CSS, "text/css; charset=utf-8")
}

/// `GET /ui/assets/console.js`.
pub(super) async fn js() -> Response {
    asset(JS, "text/javascript; charset=utf-8")
}

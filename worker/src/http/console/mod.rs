//! The operator's web console at `/ui`, served by the admin server:
//! server-rendered HTML pages, one stylesheet and one small script
//! compiled in (no CDN, no build step), usable on a phone and in dark
//! mode.
//!
//! - [`session`]: who may see it (the admin token, through a login form and
//!   a session cookie) and the CSRF check of every form.
//! - [`html`]: escaping and the one page frame (navigation) every page
//!   shares; [`assets`]: the stylesheet and script.
//! - One module per page: [`overview`], [`jobs`] (by state, one by id,
//!   cancel), [`workers`], [`dead_letters`], [`control`] (pause and
//!   resume), [`workstreams`] (search, the compaction timeline, a run's
//!   diff, with [`summary_view`] and [`diff`]).
//!
//! A page slots in as a module, a line in [`routes`] and its entry in
//! [`html::Nav`].
//!
//! The console's routes are not part of the JSON API's route table (nor
//! of its OpenAPI document): they answer HTML, errors included, and their
//! requests are counted in the request metrics under the route `/ui`.

mod assets;
mod control;
mod dead_letters;
mod diff;
mod error;
mod html;
mod jobs;
mod overview;
mod session;
mod summary_view;
mod workers;
mod workstreams;

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, FromRequestParts, Query};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware;
use axum::response::Response;
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use serde::de::DeserializeOwned;

use super::{limits, AppState};
use error::ConsoleError;
use html::{page, Nav};
use session::Visitor;

/// Largest form body the console reads (its forms are a few fields).
const MAX_FORM_BYTES: usize = 16 * 1024;

/// Every console route: `(method, path, handler)`.
fn routes() -> Vec<(Method, &'static str, MethodRouter<AppState>)> {
    vec![
        (Method::GET, "/ui", get(overview::overview)),
        (Method::GET, "/ui/login", get(session::login_form)),
        (Method::POST, "/ui/login", post(session::login)),
        (Method::POST, "/ui/logout", post(session::logout)),
        (Method::GET, "/ui/assets/console.css", get(assets::css)),
        (Method::GET, "/ui/assets/console.js", get(assets::js)),
        (Method::GET, "/ui/workers", get(workers::workers)),
        (Method::GET, "/ui/dead-letters", get(dead_letters::list)),
        (
            Method::POST,
            "/ui/dead-letters/retry",
            post(dead_letters::retry),
        ),
        (
            Method::GET,
            "/ui/dead-letters/purge",
            get(dead_letters::confirm_purge),
        ),
        (
            Method::POST,
            "/ui/dead-letters/purge",
            post(dead_letters::purge),
        ),
        (Method::GET, "/ui/jobs", get(jobs::list)),
        (Method::GET, "/ui/jobs/{id}", get(jobs::job)),
        (
            Method::GET,
            "/ui/jobs/{id}/cancel",
            get(jobs::confirm_cancel),
        ),
        (Method::POST, "/ui/jobs/{id}/cancel", post(jobs::cancel)),
        (Method::GET, "/ui/queue", get(control::control)),
        (Method::GET, "/ui/queue/pause", get(control::confirm_pause)),
        (Method::POST, "/ui/queue/pause", post(control::pause)),
        (Method::POST, "/ui/queue/resume", post(control::resume)),
        (Method::GET, "/ui/workstreams", get(workstreams::search)),
        (
            Method::GET,
            "/ui/workstreams/{domain}/{entity}",
            get(workstreams::workstream),
        ),
        (
            Method::GET,
            "/ui/workstreams/{domain}/{entity}/runs/{run}/diff",
            get(workstreams::run_diff),
        ),
        // Anything else under /ui: behind the guard too (the login page
        // when signed out), then an HTML 404.
        (Method::GET, "/ui/{*rest}", get(not_found)),
    ]
}

/// `(method, path)` of every console route.
pub fn console_routes() -> Vec<(Method, &'static str)> {
    routes().into_iter().map(|(m, p, _)| (m, p)).collect()
}

/// The console's router: every route bounded by `request_timeout` and
/// behind [`session::guard`].
pub(super) fn router(state: AppState, request_timeout: Duration) -> Router<AppState> {
    let mut router = Router::new();
    // A path routed twice (GET and POST) gets both methods: axum merges
    // the method routers of one path.
    for (_, path, route) in routes() {
        router = router.route(path, limits::with_timeout(route, request_timeout));
    }
    router
        .route_layer(middleware::from_fn_with_state(state, session::guard))
        .layer(DefaultBodyLimit::max(MAX_FORM_BYTES))
}

async fn not_found(visitor: Visitor) -> Response {
    page(
        StatusCode::NOT_FOUND,
        &visitor.frame("Not found", Nav::None),
        "<p>No such page. <a href=\"/ui\">Back to the overview</a></p>",
    )
}

/// A page's query string; malformed is a 400 page (not the API's JSON).
struct PageQuery<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for PageQuery<T> {
    type Rejection = ConsoleError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(t)| PageQuery(t))
            .map_err(|rejection| ConsoleError::BadRequest(rejection.body_text()))
    }
}

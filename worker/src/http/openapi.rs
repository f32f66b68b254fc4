//! The API's OpenAPI document, generated from the handlers' `#[utoipa::path]`
//! attributes and the `ToSchema` types they take and answer, so it cannot
//! drift from the code. Served open at `GET /openapi.json`;
//! `docs/openapi.json` is a copy, kept equal by a test (rewrite it with
//! `COMPACTOR_WRITE_OPENAPI=1 cargo test -p compactor-worker --lib openapi`).
//!
//! What the derives cannot say is added to the JSON here, next to the
//! rules it states: the append body's cross-field rules
//! ([`workstreams::constrain_append_request`]), the bulk dead-letter body's
//! filter-or-`all` rule ([`dead_letters::constrain_bulk_request`]),
//! `additionalProperties:
//! false` on each `Part` variant (serde's `deny_unknown_fields` on the
//! enum), the bearer scheme, and the 405 answer.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use utoipa::OpenApi;

use super::error::{ErrorBody, ErrorCode};
use super::{
    branches, dead_letters, events, probes, queue_control, queue_jobs, recall, runs,
    workstream_list, workstreams,
};

/// The derived part of the document.
#[derive(OpenApi)]
#[openapi(
    info(title = "compactor-worker admin HTTP API", version = "1"),
    servers((url = "http://127.0.0.1:9464", description = "`[admin] listen` of config/default.toml")),
    paths(
        workstream_list::list,
        workstreams::append,
        workstreams::compact,
        branches::move_head,
        workstreams::status,
        workstreams::context,
        workstreams::wait,
        runs::list,
        recall::recall,
        events::list,
        events::retry_one,
        events::retry_failed,
        dead_letters::list,
        dead_letters::retry,
        dead_letters::purge,
        queue_control::overview,
        queue_control::pause,
        queue_control::resume,
        queue_jobs::list,
        queue_jobs::get_one,
        queue_jobs::cancel,
        queue_jobs::workers,
        probes::metrics,
        probes::healthz,
        probes::readyz,
        probes::worker_readyz,
        openapi_json,
    ),
    components(schemas(ErrorBody, ErrorCode)),
    security(("bearer" = []), ()),
    tags(
        (name = "workstreams", description = "The client API for chat backends (bearer token when configured)."),
        (name = "events", description = "Webhook deliveries of compaction events, listed and retried (bearer token when configured)."),
        (name = "queue", description = "The queue at a glance, paused and resumed (whole or by domain); its jobs by state and by id, cancelled; its workers; its dead letters listed, retried and purged in bulk (bearer token when configured)."),
        (name = "probes", description = "Liveness, readiness, metrics and this document (open)."),
    )
)]
struct ApiDoc;

/// The document as JSON: the derived part with what derives cannot say.
pub fn document() -> Value {
    let mut doc = match serde_json::to_value(ApiDoc::openapi()) {
        Ok(doc) => doc,
        // The document is plain data; serializing it cannot fail.
        Err(e) => json!({ "error": e.to_string() }),
    };
    doc["info"]["description"] = Value::from(include_str!("openapi.md"));
    let schemas = &mut doc["components"]["schemas"];
    workstreams::constrain_append_request(&mut schemas["AppendRequest"]);
    dead_letters::constrain_bulk_request(&mut schemas["BulkRequest"]);
    // Part is `deny_unknown_fields`: each variant takes only its fields.
    if let Some(variants) = schemas["Part"]["oneOf"].as_array_mut() {
        for variant in variants {
            variant["additionalProperties"] = Value::Bool(false);
        }
    }
    doc["components"]["securitySchemes"] = json!({
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "The value of the variable `[admin] token_env` names (when set)."
        }
    });
    doc["components"]["responses"] = json!({
        "MethodNotAllowed": {
            "description": "Any route, with a method it does not take: 405 `method_not_allowed`; `Allow` lists the methods it takes.",
            "headers": {
                "Allow": { "schema": { "type": "string" } }
            },
            "content": {
                "application/json": {
                    "schema": { "$ref": "#/components/schemas/ErrorBody" }
                }
            }
        }
    });
    doc
}

/// The document as served and committed: pretty JSON with a final newline.
pub fn document_text() -> String {
    let mut text = serde_json::to_string_pretty(&document()).unwrap_or_default();
    text.push('\n');
    text
}

static DOCUMENT: LazyLock<String> = LazyLock::new(document_text);

/// `GET /openapi.json`: this document.
///
/// Open like the probes: it holds nothing secret, and tools read it
/// before they have a token.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "probes",
    operation_id = "openapi",
    security(()),
    responses((status = 200, description = "This document (OpenAPI 3.1).", body = Object, content_type = "application/json")),
)]
pub(super) async fn openapi_json() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        DOCUMENT.as_str(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::{document, document_text};

    /// What the server refuses, the document refuses too: an empty
    /// `messages` or a `usage` without `finalize`, a `Part` missing its
    /// fields or with an extra one; and it states the 405, every error
    /// code and the bearer scheme.
    #[test]
    fn the_document_states_what_the_server_refuses() {
        let doc = document();
        let schemas = &doc["components"]["schemas"];
        let append = &schemas["AppendRequest"];
        assert_eq!(append["additionalProperties"], false);
        assert_eq!(append["required"], json!(["messages"]));
        assert_eq!(append["anyOf"][1]["properties"]["messages"]["minItems"], 1);
        assert_eq!(append["anyOf"][1]["properties"]["usage"]["type"], "null");
        assert_eq!(append["anyOf"][0]["properties"]["finalize"]["const"], true);

        let variants = schemas["Part"]["oneOf"].as_array().unwrap();
        let mut kinds = Vec::new();
        for variant in variants {
            assert_eq!(variant["additionalProperties"], false, "{variant}");
            let required = variant["required"].as_array().unwrap();
            assert!(required.len() >= 2, "more than `type`: {variant}");
            kinds.push(variant["properties"]["type"]["enum"][0].clone());
        }
        assert_eq!(
            kinds,
            json!(["text", "tool_call", "tool_result", "reasoning", "file"])
                .as_array()
                .unwrap()
                .clone()
        );
        assert_eq!(
            schemas["IncomingMessage"]["properties"]["parts"]["minItems"],
            1
        );

        let codes = schemas["ErrorCode"]["enum"].as_array().unwrap();
        assert!(codes.contains(&json!("method_not_allowed")));
        assert_eq!(codes.len(), super::ErrorCode::ALL.len());
        assert!(doc["components"]["responses"]["MethodNotAllowed"].is_object());
        assert_eq!(
            doc["components"]["securitySchemes"]["bearer"]["scheme"],
            "bearer"
        );
    }

    /// `docs/openapi.json` is the generated document: a change to a
    /// handler or a type that changes the API fails here until the file is
    /// rewritten (`COMPACTOR_WRITE_OPENAPI=1`), so the committed document
    /// cannot drift from the server.
    #[test]
    fn docs_openapi_json_is_the_generated_document() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
        let generated = document_text();
        if std::env::var_os("COMPACTOR_WRITE_OPENAPI").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "docs/openapi.json differs from the document the code generates; rewrite it with \
             COMPACTOR_WRITE_OPENAPI=1 cargo test -p compactor-worker --lib openapi"
        );
    }
}

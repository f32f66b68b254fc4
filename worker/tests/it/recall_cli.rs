//! `compactor recall`, run as a process against a real database (a SQLite
//! file or a PostgreSQL schema of the test's own): it finds a stored
//! message by its words, answers an unknown workstream with exit 1
//! (`unknown_workstream`) and a query without words with exit 2
//! (`invalid_query`). It needs no Redis.

use std::process::{Command, Output};

use compactor_e2e::db::{Backend, TestDb};
use compactor_producer::client::IncomingMessage;
use compactor_producer::store::NewMessage;
use compactor_shared::{EntityKey, Role};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_compactor");

fn run(db: &TestDb, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("DATABASE_URL", &db.url)
        // Recall never talks to Redis: an address nothing listens on.
        .env("REDIS_URL", "redis://127.0.0.1:1")
        .output()
        .unwrap()
}

async fn recall_from_the_cli(backend: Backend) {
    let db = TestDb::new(backend).await;
    let key = EntityKey::parse("chat", "cli-recall").unwrap();
    let message = IncomingMessage::text(Role::User, "ship invoice INV-2024-0042 on Friday");
    let appended = db
        .store
        .append_messages(
            &key,
            &[NewMessage {
                role: message.role,
                parts: message.parts.clone(),
                pinned: false,
                token_estimate: 10,
                client_id: None,
            }],
        )
        .await
        .unwrap();

    let out = run(
        &db,
        &[
            "--json",
            "recall",
            "chat",
            "cli-recall",
            "invoice",
            "inv-2024-0042",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["messages"][0]["id"], appended.ids[0].0, "{json}");
    assert_eq!(json["messages"][0]["compacted"], false);
    assert_eq!(
        json["terms"],
        serde_json::json!(["invoice", "inv-2024-0042"])
    );

    let text = run(&db, &["recall", "chat", "cli-recall", "INV-2024-0042"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains(&format!("#{} user", appended.ids[0])),
        "{text}"
    );
    assert!(
        text.contains("ship invoice INV-2024-0042 on Friday"),
        "{text}"
    );
    assert!(text.contains("not compacted"), "{text}");

    let out = run(&db, &["--json", "recall", "chat", "nobody", "invoice"]);
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["error"]["code"], "unknown_workstream", "{json}");

    let out = run(&db, &["--json", "recall", "chat", "cli-recall", "*", "("]);
    assert_eq!(out.status.code(), Some(2));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["error"]["code"], "invalid_query", "{json}");
}

#[tokio::test]
async fn recall_from_the_cli_on_sqlite() {
    recall_from_the_cli(Backend::Sqlite).await;
}

#[tokio::test]
async fn recall_from_the_cli_on_postgres() {
    recall_from_the_cli(Backend::Postgres).await;
}

//! `TestDb`: a fresh, migrated database per test, removed on drop.
//!
//! - PostgreSQL (`TEST_DATABASE_URL`, default
//!   `postgres://postgres@127.0.0.1:5432/test`): a schema `test_<unique>`
//!   is created, the store connects with `search_path` set to it, and the
//!   schema is dropped with everything in it on drop.
//! - SQLite: a file in the temp directory, deleted (with its WAL files) on
//!   drop.
//!
//! Tests therefore run in parallel and can be re-run. Include it with
//! `#[path = "support/db.rs"] mod db;`.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use compactor_producer::store::Store;
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};

/// Which database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// The PostgreSQL server tests use.
pub fn postgres_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A database of its own for one test.
pub struct TestDb {
    pub store: Store,
    /// The URL `store` was connected with (another `Store::connect(url)`
    /// sees the same database).
    pub url: String,
    pub backend: Backend,
    cleanup: Cleanup,
}

enum Cleanup {
    Postgres { server_url: String, schema: String },
    Sqlite { path: PathBuf },
}

fn unique_name(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "{prefix}_{}_{}_{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

impl TestDb {
    /// A migrated PostgreSQL schema.
    pub async fn postgres() -> TestDb {
        TestDb::new(Backend::Postgres).await
    }

    /// A migrated SQLite file.
    pub async fn sqlite() -> TestDb {
        TestDb::new(Backend::Sqlite).await
    }

    /// A migrated database on `backend`.
    pub async fn new(backend: Backend) -> TestDb {
        let db = TestDb::unmigrated(backend).await;
        db.store.migrate().await.expect("migrate the test database");
        db
    }

    /// An empty database on `backend` (no migration applied).
    pub async fn unmigrated(backend: Backend) -> TestDb {
        match backend {
            Backend::Postgres => {
                let server_url = postgres_url();
                let schema = unique_name("test");
                let admin = Database::connect(server_url.as_str())
                    .await
                    .expect("connect to the test PostgreSQL (TEST_DATABASE_URL)");
                admin
                    .execute_unprepared(&format!("CREATE SCHEMA \"{schema}\""))
                    .await
                    .expect("create the test schema");
                admin.close().await.expect("close the admin connection");
                let sep = if server_url.contains('?') { '&' } else { '?' };
                let url = format!("{server_url}{sep}options=-c%20search_path%3D{schema}");
                let cleanup = Cleanup::Postgres { server_url, schema };
                let store = Store::connect(&url).await.expect("connect the test store");
                TestDb {
                    store,
                    url,
                    backend,
                    cleanup,
                }
            }
            Backend::Sqlite => {
                let path = std::env::temp_dir().join(format!("{}.db", unique_name("compactor")));
                let url = format!("sqlite://{}?mode=rwc", path.display());
                let cleanup = Cleanup::Sqlite { path };
                let store = Store::connect(&url).await.expect("connect the test store");
                TestDb {
                    store,
                    url,
                    backend,
                    cleanup,
                }
            }
        }
    }

    /// Runs one SQL statement on the test database (for setting up states
    /// the repository would never write, such as a corrupt row).
    pub async fn exec(&self, sql: &str) {
        self.store
            .connection()
            .execute_unprepared(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// The single integer a query returns (`SELECT COUNT(*) AS n …`), read
    /// from its column `n`.
    pub async fn scalar(&self, sql: &str) -> i64 {
        let backend = self.store.connection().get_database_backend();
        let row = self
            .store
            .connection()
            .query_one_raw(Statement::from_string(backend, sql.to_owned()))
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .unwrap_or_else(|| panic!("{sql}: no row"));
        row.try_get::<i64>("", "n")
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    pub fn db_backend(&self) -> DbBackend {
        self.store.connection().get_database_backend()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::Postgres { server_url, schema } => {
                // Drop runs in a synchronous context, possibly inside the
                // test's runtime: the schema is dropped on a thread of its
                // own with a runtime of its own.
                let server_url = server_url.clone();
                let schema = schema.clone();
                let dropped = std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| e.to_string())?;
                    rt.block_on(async {
                        let admin = Database::connect(server_url.as_str())
                            .await
                            .map_err(|e| e.to_string())?;
                        admin
                            .execute_unprepared(&format!(
                                "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
                            ))
                            .await
                            .map_err(|e| e.to_string())?;
                        admin.close().await.map_err(|e| e.to_string())
                    })
                })
                .join();
                if !matches!(dropped, Ok(Ok(()))) {
                    eprintln!("could not drop test schema: {dropped:?}");
                }
            }
            Cleanup::Sqlite { path } => {
                for suffix in ["", "-wal", "-shm"] {
                    let mut file = path.clone().into_os_string();
                    file.push(suffix);
                    let _ = std::fs::remove_file(file);
                }
            }
        }
    }
}

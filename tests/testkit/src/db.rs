//! A database of a test's own, removed on drop.
//!
//! - PostgreSQL (`TEST_DATABASE_URL`, default
//!   `postgres://postgres@127.0.0.1:5432/test`): a schema `test_<unique>`
//!   is created, and the URL handed out sets `search_path` to it; on drop
//!   the schema is dropped with everything in it.
//! - SQLite: a file in the temp directory, deleted (with its WAL files) on
//!   drop.
//!
//! Tests therefore run in parallel and can be re-run. Connecting (and
//! migrating) is the caller's: the producer's tests wrap this in a
//! `TestDb` that holds a `Store`.

use std::path::PathBuf;

use sea_orm::{ConnectionTrait, Database};

use crate::names::unique_name;

/// Which database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// The PostgreSQL server tests use: `TEST_DATABASE_URL`, else the
/// machine's `postgres://postgres@127.0.0.1:5432/test`.
pub fn postgres_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// An empty database of one test's own (see the module doc).
pub struct TestDatabase {
    /// Connect here to see this database (and only it).
    pub url: String,
    pub backend: Backend,
    cleanup: Cleanup,
}

enum Cleanup {
    Postgres { server_url: String, schema: String },
    Sqlite { path: PathBuf },
}

impl TestDatabase {
    /// A PostgreSQL schema.
    pub async fn postgres() -> TestDatabase {
        TestDatabase::new(Backend::Postgres).await
    }

    /// A SQLite file (its name only: the file is created on the first
    /// connection).
    pub fn sqlite() -> TestDatabase {
        let path = std::env::temp_dir().join(format!("{}.db", unique_name("compactor")));
        TestDatabase {
            url: sqlite_url(&path),
            backend: Backend::Sqlite,
            cleanup: Cleanup::Sqlite { path },
        }
    }

    /// An empty database on `backend`.
    pub async fn new(backend: Backend) -> TestDatabase {
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
                TestDatabase {
                    url,
                    backend,
                    cleanup: Cleanup::Postgres { server_url, schema },
                }
            }
            Backend::Sqlite => TestDatabase::sqlite(),
        }
    }
}

/// The URL of a SQLite file at `path`, created on first connection.
pub fn sqlite_url(path: &std::path::Path) -> String {
    format!("sqlite://{}?mode=rwc", path.display())
}

impl Drop for TestDatabase {
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

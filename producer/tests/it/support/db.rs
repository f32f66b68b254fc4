//! `TestDb`: a fresh, migrated database per test, removed on drop — the
//! testkit's [`TestDatabase`] (a PostgreSQL schema or a SQLite file) with
//! a `Store` connected to it. The end-to-end tests use this file too
//! (`compactor_e2e::db`, by `#[path]`): one `TestDb` for the workspace.

#![allow(dead_code, unreachable_pub)]

use compactor_producer::store::Store;
use compactor_testkit::TestDatabase;
use sea_orm::{ConnectionTrait, DbBackend, Statement};

pub use compactor_testkit::db::Backend;

/// `n`: the compacted messages of the database (see
/// [`TestDb::compacted_messages`]).
pub const COMPACTED_COUNT: &str = "SELECT COUNT(*) AS n FROM messages m \
     JOIN workstreams w ON w.id = m.workstream_id \
     WHERE NOT m.kept AND m.id <= w.last_compacted_message_id";

/// A database of its own for one test.
pub struct TestDb {
    pub store: Store,
    /// The URL `store` was connected with (another `Store::connect(url)`
    /// sees the same database).
    pub url: String,
    pub backend: Backend,
    /// Last: the database is removed after the store let go of it.
    database: TestDatabase,
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
        let database = TestDatabase::new(backend).await;
        let store = Store::connect(&database.url)
            .await
            .expect("connect the test store");
        TestDb {
            store,
            url: database.url.clone(),
            backend,
            database,
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

    /// How many messages of the database are compacted: at or below their
    /// workstream's watermark and not kept (the rule of the store's
    /// `compacted` module, spelled out so that tests check it).
    pub async fn compacted_messages(&self) -> i64 {
        self.scalar(COMPACTED_COUNT).await
    }

    pub fn db_backend(&self) -> DbBackend {
        self.store.connection().get_database_backend()
    }
}

//! The connection pool for either database, and the one place that picks a SQL dialect.
//!
//! Every store function is written once: static SQL uses `$n` placeholders, which both SQLite
//! (through sqlx) and PostgreSQL read, and dynamic SQL is built with sea-query for the backend
//! at hand. `on_pool!` expands the same body for each pool type so rows decode natively.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sea_query::{PostgresQueryBuilder, SqliteQueryBuilder};
use sea_query_sqlx::{SqlxBinder, SqlxValues};
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};

use crate::database::Result;
use crate::database::StoreError;
use crate::database::quick_read::QuickReads;
use crate::database::write_turn::{self, Turn, Waiter};
use crate::sql::backend::Backend;

/// The SQLite migrations of this version; a backup is checked against them before a restore.
pub(crate) static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// Pool options for SQLite: a connection is never tested before it is handed out. sqlx tests
/// by default with a ping, which on SQLite is one more round trip to the connection's worker
/// thread for every statement, and a local file cannot have hung up (docs/benchmarks.md,
/// "Commands").
fn sqlite_pool() -> SqlitePoolOptions {
    SqlitePoolOptions::new().test_before_acquire(false)
}

/// Pool options for PostgreSQL: a connection idle for more than a second is pinged before it is
/// handed out (the server may have closed it meanwhile); one in steady use is not, which spares
/// a network round trip per statement. For a while after a failure that suggests a failover,
/// every connection is asked whether it leads to a writable primary, and dropped if not
/// (`primary`).
fn postgres_pool() -> PgPoolOptions {
    PgPoolOptions::new()
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if crate::database::primary::suspected() {
                    // A connection that cannot even answer is dropped as quietly as one that
                    // leads to a standby.
                    return Ok(crate::database::primary::is_writable(conn).await.unwrap_or(false));
                }
                if meta.idle_for > Duration::from_secs(1) {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

/// A pool on SQLite or PostgreSQL; cheap to clone.
#[derive(Clone, Debug)]
pub enum Db {
    /// The pool, and for the request pool, the connections that serve short reads on the
    /// calling thread (`quick_read`).
    Sqlite(SqlitePool, Option<Arc<QuickReads>>),
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to the concrete pool, once per backend.
macro_rules! on_pool {
    ($db:expr, |$pool:ident| $body:expr) => {
        match $db {
            $crate::database::db::Db::Sqlite($pool, ..) => $body,
            $crate::database::db::Db::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_pool;

/// The values of a static statement's `$1`, `$2`…, in order, bound alike on both databases.
macro_rules! values {
    ($($value:expr),* $(,)?) => {
        sea_query_sqlx::SqlxValues(sea_query::Values(vec![$(sea_query::Value::from($value)),*]))
    };
}
pub(crate) use values;

/// A row type both databases decode.
pub(crate) trait Row:
    for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin
{
}

impl<T> Row for T where T: for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin {}

impl Db {
    /// Opens the database named by `url` (`sqlite:…` or `postgres://…`) and applies migrations.
    ///
    /// SQLite runs in WAL mode with `synchronous=NORMAL`: a committed transaction survives a
    /// killed process (only an OS crash can lose the last commits), and readers never block the
    /// writer. Foreign keys are enforced on both databases.
    pub async fn connect(url: &str) -> Result<Db> {
        let db = if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .foreign_keys(true)
                // REGEXP backs the case-insensitive `like` filter (see `collection`).
                .with_regexp()
                .busy_timeout(Duration::from_secs(10))
                // 8 MB of page cache per connection: up to 16 connections (writers and
                // requests) hold at most 128 MB between them. Larger caches measured no faster
                // under full ingest (docs/benchmarks.md, "Abuse"), and each connection fills
                // its own.
                .pragma("cache_size", "-8000")
                // Statement journals (multi-row upserts inside a transaction) in memory rather
                // than in temporary files: one write syscall per journalled page otherwise.
                .pragma("temp_store", "MEMORY")
                // No checkpoint inside a commit: a task of its own copies the log (`wal`).
                .pragma("wal_autocheckpoint", "0")
                .pragma("journal_size_limit", crate::database::wal::KEEP_BYTES);
            let pool = sqlite_pool()
                .max_connections(8)
                .min_connections(1)
                .connect_with(options)
                .await?;
            Db::Sqlite(pool, None)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = postgres_pool()
                .max_connections(16)
                .acquire_timeout(Duration::from_secs(10))
                .connect(url)
                .await?;
            Db::Postgres(pool)
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_string()));
        };
        db.migrate().await?;
        match &db {
            Db::Sqlite(pool, ..) => drop(tokio::spawn(crate::database::wal::checkpointer(pool.clone()))),
            // Rows written before the service's first retention pass land in their partition.
            // A failure (the table stayed locked) is left to that pass, which tries again.
            Db::Postgres(pool) => {
                if let Err(e) = crate::database::partitions::prepare(
                    pool,
                    crate::database::unix_now(),
                    crate::database::partitions::AHEAD,
                )
                .await
                {
                    tracing::warn!(error = %e, "time partitions could not be made at start");
                }
            }
        }
        Ok(db)
    }

    /// A second pool on the same database for requests (API and dashboard), apart from the
    /// writers (ingest, command log, webhook bookkeeping), so neither can take every
    /// connection from the other. A statement on it runs at most `timeout`, then the database
    /// cancels it and the call fails with [`StoreError::Timeout`]: PostgreSQL through
    /// `statement_timeout`, SQLite through a progress handler that interrupts a statement
    /// running longer (`deadline`), and a busy timeout of the same length for the write lock. Waiting for a free connection is bounded by the same
    /// `timeout`.
    pub fn for_requests(&self, timeout: Duration, max_connections: u32) -> Db {
        match self {
            Db::Sqlite(pool, ..) => {
                // A write waiting for the write lock gives up at the same time, so a request
                // answered 503 never writes afterwards.
                let options = (*pool.connect_options()).clone().busy_timeout(timeout);
                let quick = QuickReads::new(options.get_filename());
                let pool = sqlite_pool()
                    .max_connections(max_connections)
                    .min_connections(0)
                    .acquire_timeout(timeout)
                    .after_connect(move |conn, _| Box::pin(crate::database::deadline::install(conn, timeout)))
                    .connect_lazy_with(options);
                Db::Sqlite(pool, quick)
            }
            Db::Postgres(pool) => {
                let millis = timeout.as_millis().max(1).to_string();
                let options = (*pool.connect_options())
                    .clone()
                    .options([("statement_timeout", millis.as_str())]);
                let pool = postgres_pool()
                    .max_connections(max_connections)
                    .acquire_timeout(timeout)
                    .connect_lazy_with(options);
                Db::Postgres(pool)
            }
        }
    }

    /// A pool of its own for a writer that runs one transaction at a time (the ingest writer).
    /// On SQLite it holds one connection: a pool hands its connections out in turn, each
    /// filling a page cache of its own with the same pages, so a busy writer spread over eight
    /// connections held eight caches (docs/benchmarks.md, "Abuse"). On PostgreSQL, where the
    /// server keeps the cache, this pool.
    pub fn dedicated(&self) -> Db {
        match self {
            Db::Sqlite(pool, ..) => Db::Sqlite(
                sqlite_pool()
                    .max_connections(1)
                    .min_connections(0)
                    .connect_lazy_with((*pool.connect_options()).clone()),
                None,
            ),
            Db::Postgres(_) => self.clone(),
        }
    }

    /// Applies the migrations of this backend that are not applied yet.
    async fn migrate(&self) -> Result<()> {
        match self {
            Db::Sqlite(pool, ..) => SQLITE_MIGRATIONS.run(pool).await?,
            Db::Postgres(pool) => sqlx::migrate!("./migrations/postgres").run(pool).await?,
        }
        Ok(())
    }

    /// The backend of this pool.
    pub fn backend(&self) -> Backend {
        match self {
            Db::Sqlite(..) => Backend::Sqlite,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    /// `clause` (a row lock such as ` FOR UPDATE`) on PostgreSQL; nothing on SQLite, where one
    /// writer at a time holds the whole store.
    pub(crate) fn row_lock(&self, clause: &'static str) -> &'static str {
        match self.backend() {
            Backend::Postgres => clause,
            Backend::Sqlite => "",
        }
    }

    /// Renders a sea-query statement in this backend's dialect.
    pub(crate) fn build<S: SqlxBinder>(&self, statement: &S) -> (String, SqlxValues) {
        match self {
            Db::Sqlite(..) => statement.build_sqlx(SqliteQueryBuilder),
            Db::Postgres(_) => statement.build_sqlx(PostgresQueryBuilder),
        }
    }

    /// Waits for this process's turn to write the store (`write_turn`: SQLite's one write lock,
    /// taken first come first served); hold it until the transaction ends. Never take a second
    /// turn while holding one: the queue would wait for itself.
    pub(crate) async fn write_turn(&self) -> Result<Turn> {
        self.write_turn_as(Waiter::Prompt).await
    }

    /// [`Db::write_turn`] as `waiter`: a background writer waits as `Patient`, which the ingest
    /// writer is not cut short for.
    pub(crate) async fn write_turn_as(&self, waiter: Waiter) -> Result<Turn> {
        match self {
            Db::Sqlite(pool, ..) => write_turn::of_pool(pool, waiter).await,
            Db::Postgres(_) => Ok(Turn::NONE),
        }
    }

    /// The turn of the ingest writer: after the bulk gate (`write_turn::Gate`) that a log
    /// checkpoint closes against the bulk writers (it and the retention's removal).
    pub(crate) async fn bulk_turn(&self) -> Result<Turn> {
        match self {
            Db::Sqlite(pool, ..) => write_turn::of_pool_in_bulk(pool, Waiter::Prompt).await,
            Db::Postgres(_) => Ok(Turn::NONE),
        }
    }

    /// Runs a writing statement with its [`values!`] in its turn; returns the rows it changed.
    pub(crate) async fn execute(&self, sql: impl sqlx::SqlSafeStr, values: SqlxValues) -> Result<u64> {
        let _turn = self.write_turn().await?;
        Ok(on_pool!(self, |p| sqlx::query_with(sql, values)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?)
    }

    /// The rows of a query with its [`values!`].
    pub(crate) async fn rows<T: Row>(&self, sql: impl sqlx::SqlSafeStr, values: SqlxValues) -> Result<Vec<T>> {
        Ok(on_pool!(self, |p| sqlx::query_as_with(sql, values).fetch_all(p).await)?)
    }

    /// The first row of a query with its [`values!`], if there is one.
    pub(crate) async fn row<T: Row>(&self, sql: impl sqlx::SqlSafeStr, values: SqlxValues) -> Result<Option<T>> {
        Ok(on_pool!(self, |p| sqlx::query_as_with(sql, values)
            .fetch_optional(p)
            .await)?)
    }

    /// Whether the database answers a trivial query (for `/readyz`).
    pub async fn ping(&self) -> Result<()> {
        self.row::<(i64,)>("SELECT 1", values![]).await?;
        Ok(())
    }

    /// Writes this node's row of the readiness probe: fails when the store answers but cannot
    /// be written (a full disk, a read-only file system or database).
    pub async fn write_probe(&self, node: &str, now: i64) -> Result<()> {
        let sql = "INSERT INTO readiness_probe (node, probed_at) VALUES ($1, $2) \
                   ON CONFLICT (node) DO UPDATE SET probed_at = excluded.probed_at";
        self.execute(sql, values![node, now]).await?;
        Ok(())
    }

    /// Closes every connection; used on shutdown so SQLite checkpoints its WAL.
    pub async fn close(&self) {
        on_pool!(self, |p| p.close().await)
    }
}

/// An open transaction on either database, for write paths built from SQL text and values
/// (the same `$n` text serves both). It holds the write turn until it ends.
pub(crate) enum Tx {
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>, Turn),
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
}

impl Tx {
    /// Renders a sea-query statement in this transaction's dialect.
    pub(crate) fn build<S: SqlxBinder>(&self, statement: &S) -> (String, SqlxValues) {
        match self {
            Tx::Sqlite(..) => statement.build_sqlx(SqliteQueryBuilder),
            Tx::Postgres(_) => statement.build_sqlx(PostgresQueryBuilder),
        }
    }

    /// Takes the write turn, then begins.
    pub(crate) async fn begin(db: &Db) -> Result<Tx> {
        let turn = db.write_turn().await?;
        Tx::begin_in(db, turn).await
    }

    /// Takes the write turn as background work that no one waits for at once (a job's batch, a
    /// batch of gateways' reports): the ingest writer is not cut short for it
    /// (`write_turn::Waiter::Patient`), so a fleet's job does not shrink ingest's group commits.
    pub(crate) async fn begin_patient(db: &Db) -> Result<Tx> {
        let turn = db.write_turn_as(Waiter::Patient).await?;
        Tx::begin_in(db, turn).await
    }

    /// Takes the ingest writer's turn ([`Db::bulk_turn`]), then begins.
    pub(crate) async fn begin_bulk(db: &Db) -> Result<Tx> {
        let turn = db.bulk_turn().await?;
        Tx::begin_in(db, turn).await
    }

    async fn begin_in(db: &Db, turn: Turn) -> Result<Tx> {
        Ok(match db {
            Db::Sqlite(p, ..) => Tx::Sqlite(p.begin().await?, turn),
            Db::Postgres(p) => Tx::Postgres(p.begin().await?),
        })
    }

    /// Whether another writer waits for the write turn this transaction holds (never on
    /// PostgreSQL, where writers do not queue).
    pub(crate) fn others_waiting(&self) -> bool {
        match self {
            Tx::Sqlite(_, turn) => turn.others_waiting(),
            Tx::Postgres(_) => false,
        }
    }

    pub(crate) fn backend(&self) -> Backend {
        match self {
            Tx::Sqlite(..) => Backend::Sqlite,
            Tx::Postgres(_) => Backend::Postgres,
        }
    }

    /// On PostgreSQL, locks the rows of `table` whose `column` is one of `keys` as an update
    /// would, in the column's order; on SQLite, where writers take turns, nothing. Writers that
    /// update many rows of one table lock them this way first, all in one statement, so that two
    /// of them can never each hold a row the other waits for (a deadlock): an
    /// `UPDATE … FROM (VALUES …)` locks rows in whatever order its join yields them, and a group
    /// commit updates its slices one after another (docs/operations.md, "Several nodes").
    pub(crate) async fn lock_in_order<K>(&mut self, table: &str, column: &str, keys: &[K]) -> sqlx::Result<()>
    where
        K: for<'q> sqlx::Encode<'q, sqlx::Postgres>
            + sqlx::Type<sqlx::Postgres>
            + sqlx::postgres::PgHasArrayType
            + Sync,
    {
        let Tx::Postgres(tx) = self else {
            return Ok(());
        };
        let sql = format!("SELECT 1 FROM {table} WHERE {column} = ANY($1) ORDER BY {column} FOR NO KEY UPDATE");
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(keys)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Runs one statement; returns the rows it affected.
    pub(crate) async fn execute(&mut self, sql: String, values: SqlxValues) -> sqlx::Result<u64> {
        let sql = sqlx::AssertSqlSafe(sql);
        Ok(match self {
            Tx::Sqlite(tx, _) => sqlx::query_with(sql, values).execute(&mut **tx).await?.rows_affected(),
            Tx::Postgres(tx) => sqlx::query_with(sql, values).execute(&mut **tx).await?.rows_affected(),
        })
    }

    /// The one integer of a statement's first row (a count, or an id from `RETURNING`).
    pub(crate) async fn scalar(&mut self, sql: String, values: SqlxValues) -> sqlx::Result<i64> {
        let sql = sqlx::AssertSqlSafe(sql);
        match self {
            Tx::Sqlite(tx, _) => sqlx::query_scalar_with(sql, values).fetch_one(&mut **tx).await,
            Tx::Postgres(tx) => sqlx::query_scalar_with(sql, values).fetch_one(&mut **tx).await,
        }
    }

    /// The rows of a query, decoded as `T` (a tuple or a `FromRow` type).
    pub(crate) async fn rows<T: Row>(&mut self, sql: String, values: SqlxValues) -> sqlx::Result<Vec<T>> {
        let sql = sqlx::AssertSqlSafe(sql);
        match self {
            Tx::Sqlite(tx, _) => sqlx::query_as_with(sql, values).fetch_all(&mut **tx).await,
            Tx::Postgres(tx) => sqlx::query_as_with(sql, values).fetch_all(&mut **tx).await,
        }
    }

    /// Rows of three integers. On SQLite the rows come back as one JSON array built by SQLite
    /// (`json_group_array`), since sqlx hands SQLite rows over one by one; `select` must name
    /// its three columns `a`, `b` and `c`.
    pub(crate) async fn triples(&mut self, select: String, values: SqlxValues) -> sqlx::Result<Vec<(i64, i64, i64)>> {
        match self {
            Tx::Sqlite(tx, _) => {
                let sql = format!("SELECT json_group_array(json_array(a, b, c)) FROM ({select})");
                let text: String = sqlx::query_scalar_with(sqlx::AssertSqlSafe(sql), values)
                    .fetch_one(&mut **tx)
                    .await?;
                serde_json::from_str(&text).map_err(|e| sqlx::Error::Decode(Box::new(e)))
            }
            Tx::Postgres(tx) => {
                sqlx::query_as_with(sqlx::AssertSqlSafe(select), values)
                    .fetch_all(&mut **tx)
                    .await
            }
        }
    }

    pub(crate) async fn rollback(self) -> sqlx::Result<()> {
        match self {
            Tx::Sqlite(tx, _) => tx.rollback().await,
            Tx::Postgres(tx) => tx.rollback().await,
        }
    }

    pub(crate) async fn commit(self) -> sqlx::Result<()> {
        match self {
            Tx::Sqlite(tx, _) => tx.commit().await,
            Tx::Postgres(tx) => tx.commit().await,
        }
    }
}

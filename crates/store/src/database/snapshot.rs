//! A read-only transaction: several statements that see the store as of one moment, so that a
//! point moved from a row into a chunk between two of them is seen once (the streamed export
//! reads a window's chunks and rows in one snapshot).

use sea_query_sqlx::SqlxValues;

use crate::database::Result;
use crate::database::db::{Db, Row};

/// An open read-only transaction; dropped, it ends without effect.
pub enum Snapshot {
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
}

impl Snapshot {
    /// Begins one. On SQLite a deferred transaction reads one WAL snapshot and takes no write
    /// lock; on PostgreSQL it is `REPEATABLE READ, READ ONLY`.
    pub(crate) async fn begin(db: &Db) -> Result<Snapshot> {
        Ok(match db {
            Db::Sqlite(p, ..) => Snapshot::Sqlite(p.begin().await?),
            Db::Postgres(p) => {
                let mut tx = p.begin().await?;
                sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    .execute(&mut *tx)
                    .await?;
                Snapshot::Postgres(tx)
            }
        })
    }

    /// The rows of a query with its values. The statement is not kept prepared: the queries
    /// made here name their series and chunks in the text, so each is new, and a connection's
    /// cache of prepared statements would fill with them (megabytes each on SQLite).
    pub(crate) async fn rows<T: Row>(&mut self, sql: String, values: SqlxValues) -> Result<Vec<T>> {
        let sql = sqlx::AssertSqlSafe(sql);
        Ok(match self {
            Snapshot::Sqlite(tx) => {
                sqlx::query_as_with(sql, values)
                    .persistent(false)
                    .fetch_all(&mut **tx)
                    .await?
            }
            Snapshot::Postgres(tx) => {
                sqlx::query_as_with(sql, values)
                    .persistent(false)
                    .fetch_all(&mut **tx)
                    .await?
            }
        })
    }
}

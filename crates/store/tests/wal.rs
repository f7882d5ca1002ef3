//! The write-ahead log is copied into the database by the store's own task, never inside a
//! commit (docs/operations.md, "Storage"). SQLite only: PostgreSQL has no such log to manage.

mod common;

use std::time::{Duration, Instant};

use devicecloud_store::ingest::{self, Point};
use devicecloud_store::{Db, wal};

#[tokio::test]
async fn commits_never_checkpoint_and_the_background_task_copies_the_log() {
    let store = common::store("wal").await;
    let Db::Sqlite(pool, ..) = &store.db else {
        return;
    };
    let automatic: i64 = sqlx::query_scalar("PRAGMA wal_autocheckpoint")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(automatic, 0, "no checkpoint inside a commit");

    let (_, _, key) = common::series(&store, "WAL", "CORE", 1).await;
    let file = sqlx::query_scalar::<_, String>("SELECT file FROM pragma_database_list WHERE name = 'main'")
        .fetch_one(pool)
        .await
        .unwrap();
    let size = || std::fs::metadata(&file).unwrap().len();
    let before = size();
    let points: Vec<Point> = (0..50_000)
        .map(|s| Point {
            container_key: key,
            seconds: 1_700_000_000 + s,
            microseconds: 0,
            value: s as f64,
            session_key: None,
        })
        .collect();
    ingest::write(&store, &points, &[]).await.unwrap();

    // The database file grows only when a checkpoint copies the pages into it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while size() < before + 500_000 {
        assert!(Instant::now() < deadline, "the log was not copied within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let done = wal::checkpoint(pool, wal::Mode::Beside).await.unwrap();
    assert_eq!(done.log, done.checkpointed, "{done:?}");
}

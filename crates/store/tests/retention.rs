//! Retention on a real SQLite store (and PostgreSQL with `DEVICECLOUD_TEST_DATABASE_URL`): a
//! pass removes raw points and rollups older than their group's cutoff and nothing newer,
//! leaves groups that keep forever alone, marks sessions whose points went, and on PostgreSQL
//! drops whole partitions.

use devicecloud_store::ingest::{self, Point};
use devicecloud_store::retention::{self, Kind, Retention, cutoff};
use devicecloud_store::{Backend, Db, data_sessions, partitions};
use std::time::Duration;

mod common;
use common::{execute, integer, series, store};

const DAY: i64 = 86_400;

/// A group with one gateway and one series holding a point every `step` seconds over the
/// `days` days before `now`; returns the group, the gateway and the series key.
async fn filled_group(db: &Db, name: &str, now: i64, days: i64, step: i64) -> (String, String, i64) {
    let (id_group, device, key) = series(db, name, "GO", 1).await;
    let points: Vec<Point> = (0..days * DAY / step)
        .map(|i| Point {
            container_key: key,
            seconds: now - days * DAY + i * step,
            microseconds: 0,
            value: (i % 7) as f64,
            session_key: None,
        })
        .collect();
    for chunk in points.chunks(10_000) {
        ingest::write(db, chunk, &[]).await.unwrap();
    }
    (id_group, device, key)
}

/// The oldest time and the number of rows of one series in one kind's table.
async fn span(db: &Db, kind: Kind, key: i64) -> (Option<i64>, i64) {
    let (table, column) = match (kind, db.backend()) {
        (Kind::Raw, Backend::Sqlite) => ("raw_points", "seconds"),
        // PostgreSQL keeps a point's time in microseconds.
        (Kind::Raw, Backend::Postgres) => ("raw_points", "time_us / 1000000"),
        (Kind::Minute, _) => ("rollup_minute", "bucket"),
        (Kind::Hour, _) => ("rollup_hour", "bucket"),
        (Kind::Day, _) => ("rollup_day", "bucket"),
    };
    let sql = format!("SELECT MIN({column}), COUNT(*) FROM {table} WHERE container_key = $1");
    match db {
        Db::Sqlite(p, ..) => sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(key)
            .fetch_one(p)
            .await
            .unwrap(),
        Db::Postgres(p) => sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(key)
            .fetch_one(p)
            .await
            .unwrap(),
    }
}

#[tokio::test]
async fn a_pass_removes_what_is_past_each_groups_retention_and_nothing_newer() {
    let db = store("pass").await;
    let now = devicecloud_store::unix_now();
    let (kept_group, _, limited) = filled_group(&db, "limited", now, 14, 60).await;
    let (_, _, forever) = filled_group(&db, "forever", now, 14, 60).await;
    let own = Retention {
        raw_days: Some(2),
        minute_days: Some(5),
        hour_days: Some(9),
        day_days: None,
    };
    retention::set(&db, &kept_group, &own, now).await.unwrap();
    assert_eq!(retention::get(&db, &kept_group).await.unwrap(), Some(own));
    let before: Vec<_> = spans(&db, forever).await;

    let pruned = retention::prune(&db, &Retention::default(), now, Duration::from_millis(40))
        .await
        .unwrap();
    assert!(pruned.rows[0] > 0, "{pruned:?}");

    for kind in Kind::ALL {
        let (oldest, count) = span(&db, kind, limited).await;
        match kind.days(&own) {
            Some(days) => {
                let first = cutoff(days, now);
                assert_eq!(oldest.map(|t| t >= first), Some(true), "{kind:?}: {oldest:?} < {first}");
                // Nothing newer went: one point a minute from the cutoff on, in each band.
                let width = match kind {
                    Kind::Raw => 60,
                    Kind::Minute => 60,
                    Kind::Hour => 3_600,
                    Kind::Day => DAY,
                };
                let expected = (now - first + width - 1) / width;
                assert!(
                    (count - expected).abs() <= 1,
                    "{kind:?}: {count} rows, expected {expected}"
                );
            }
            None => assert_eq!(oldest.map(|t| t <= now - 13 * DAY), Some(true), "{kind:?}"),
        }
    }
    // The group following the defaults (keep forever) lost nothing.
    assert_eq!(spans(&db, forever).await, before);

    // A second pass finds nothing more to remove.
    let again = retention::prune(&db, &Retention::default(), now, Duration::from_millis(40))
        .await
        .unwrap();
    assert_eq!(again.rows, [0; 4]);
}

async fn spans(db: &Db, key: i64) -> Vec<(Option<i64>, i64)> {
    let mut out = Vec::new();
    for kind in Kind::ALL {
        out.push(span(db, kind, key).await);
    }
    out
}

#[tokio::test]
async fn defaults_apply_to_groups_without_their_own_and_sessions_say_their_points_went() {
    let db = store("defaults").await;
    let now = devicecloud_store::unix_now();
    let (id_group, gateway, key) = filled_group(&db, "sessions", now, 6, 600).await;
    let old = data_sessions::open(&db, &id_group, &gateway, now - 5 * DAY)
        .await
        .unwrap();
    data_sessions::close(&db, &gateway, now - 4 * DAY).await.unwrap();
    let recent = data_sessions::open(&db, &id_group, &gateway, now - 600).await.unwrap();
    // The points of each session's span carry its key, as ingest gives them.
    let tag = match db.backend() {
        Backend::Sqlite => {
            "UPDATE raw_points SET session_key = $1 WHERE container_key = $2 AND seconds >= $3 AND seconds < $4"
        }
        Backend::Postgres => {
            "UPDATE raw_points SET session_key = $1 WHERE container_key = $2 \
                              AND time_us >= $3 * 1000000 AND time_us < $4 * 1000000"
        }
    };
    for (session, from, to) in [(old, now - 5 * DAY, now - 4 * DAY), (recent, now - 600, now + 1)] {
        execute(&db, tag, &[session, key, from, to]).await;
    }
    let defaults = Retention {
        raw_days: Some(1),
        ..Retention::default()
    };
    let pruned = retention::prune(&db, &defaults, now, Duration::from_millis(40))
        .await
        .unwrap();
    assert_eq!(pruned.sessions, 1);
    assert!(span(&db, Kind::Raw, key).await.0.unwrap() >= cutoff(1, now));
    assert_eq!(
        span(&db, Kind::Minute, key).await.0,
        Some((now - 6 * DAY).div_euclid(60) * 60)
    );
    let archived = "SELECT archived_at FROM data_sessions WHERE session_key = $1";
    assert_eq!(integer(&db, archived, &[old]).await, Some(now));
    assert_eq!(integer(&db, archived, &[recent]).await, None);
}

#[tokio::test]
async fn postgres_drops_whole_partitions_once_every_group_is_past_them() {
    let db = store("partitions").await;
    let Db::Postgres(pool) = &db.db else {
        return; // SQLite has no partitions; covered by the tests above.
    };
    let now = devicecloud_store::unix_now();
    // Partitions for the last 10 days, as a service running then would have made.
    for day in 1..=10 {
        partitions::prepare(pool, now - day * DAY, 0).await.unwrap();
    }
    let (a, _, key_a) = filled_group(&db, "a", now, 10, 300).await;
    let (b, _, _) = filled_group(&db, "b", now, 10, 300).await;
    let mut conn = pool.acquire().await.unwrap();
    let before = partitions::list(&mut conn, Kind::Raw).await.unwrap();
    assert!(before.len() >= 11, "{before:?}");
    // Points sent late, for days without a partition, get theirs at the next pass.
    let late = now - 20 * DAY;
    execute(
        &db,
        "INSERT INTO raw_points (container_key, time_us, value) VALUES ($1, $2 * 1000000, 1.0)",
        &[key_a, late],
    )
    .await;
    partitions::prepare(pool, now, partitions::AHEAD).await.unwrap();
    let holding = partitions::list(&mut pool.acquire().await.unwrap(), Kind::Raw)
        .await
        .unwrap();
    assert!(holding.iter().any(|p| p.start <= late && late < p.end), "{holding:?}");
    // Nothing in the default partition: every row found its day.
    let stray: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM raw_points_default")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(stray, 0);

    // One group keeps 3 days, the other 5: partitions older than 5 days go whole, the rows of
    // `a` between its cutoff and 5 days are deleted one by one.
    let three = Retention {
        raw_days: Some(3),
        ..Retention::default()
    };
    let five = Retention {
        raw_days: Some(5),
        ..Retention::default()
    };
    retention::set(&db, &a, &three, now).await.unwrap();
    retention::set(&db, &b, &five, now).await.unwrap();
    // A partition a stopped pass detached but did not drop.
    sqlx::query("CREATE TABLE raw_points_19991231 (LIKE raw_points)")
        .execute(pool)
        .await
        .unwrap();
    let pruned = retention::prune(&db, &Retention::default(), now, Duration::from_millis(40))
        .await
        .unwrap();
    let left: Option<String> =
        sqlx::query_scalar("SELECT relname::text FROM pg_class WHERE relname = 'raw_points_19991231'")
            .fetch_optional(pool)
            .await
            .unwrap();
    assert_eq!(left, None);
    let after = partitions::list(&mut conn, Kind::Raw).await.unwrap();
    assert!(pruned.partitions >= 5, "{pruned:?}");
    assert!(after.iter().all(|p| p.end > cutoff(5, now)), "{after:?}");
    assert!(after.iter().any(|p| p.start == cutoff(5, now)), "{after:?}");
    assert!(pruned.rows[0] > 0, "{pruned:?}");
    assert!(span(&db, Kind::Raw, key_a).await.0.unwrap() >= cutoff(3, now));
}

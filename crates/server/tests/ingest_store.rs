//! The store's ingest write path on the real databases: raw points, rollups equal to a
//! recomputation from the raw rows, latest values, `last_data_at`, session counts, and resent
//! points stored and counted once; and the ingest queue's outcomes when the store refuses a
//! write.

mod common;

use std::collections::BTreeMap;

use devicecloud_engine::metrics::{self, Failed, MESSAGES, Outcome, POINTS};
use devicecloud_store::devices::{self, NewGateway};
use devicecloud_store::groups::{self, NewGroup};
use devicecloud_store::ingest::{self, Point, SeriesId, Written};
use devicecloud_store::{Backend, Db, unix_now};

struct Fixture {
    db: Db,
    device: String,
    _dir: common::TempDir,
}

async fn fixture() -> Fixture {
    let dir = std::env::temp_dir().join(format!("dc-ingest-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = common::fresh_db(&dir).await;
    Fixture {
        device: gateway(&db).await,
        db,
        _dir: common::TempDir(dir),
    }
}

/// A group with a gateway in it; returns the gateway's id.
async fn gateway(db: &Db) -> String {
    let group = groups::create(
        db,
        &NewGroup {
            label: "g",
            r#type: "0",
            subtype: "",
            id_country: None,
        },
        0,
    )
    .await
    .unwrap();
    let gateway = NewGateway {
        id_group: &group.id_group,
        serial_hardware: "GW",
        kind: "CORE",
        label: "",
        expected_offline_interval: 60,
    };
    devices::provision(db, &gateway, "hash", unix_now())
        .await
        .unwrap()
        .id_physical_device
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

async fn series(f: &Fixture, datatype: i64) -> i64 {
    let group = devices::get(&f.db, &f.device).await.unwrap().unwrap().id_group;
    ingest::container_key(
        &f.db,
        &SeriesId {
            id_group: group,
            source_device: f.device.clone(),
            datatype,
        },
        usize::MAX,
    )
    .await
    .unwrap()
    .unwrap()
}

async fn fetch<T>(db: &Db, sql: &'static str) -> Vec<T>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
        + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
        + Send
        + Unpin,
{
    match db {
        Db::Sqlite(p, ..) => sqlx::query_as(sql).fetch_all(p).await.unwrap(),
        Db::Postgres(p) => sqlx::query_as(sql).fetch_all(p).await.unwrap(),
    }
}

type Rollup = (i64, i64, f64, f64, f64, i64);
/// A series' key and latest seconds, microseconds and value.
type Latest = (i64, Option<i64>, Option<i64>, Option<f64>);

/// Asserts that every rollup table equals the aggregation of the raw rows.
async fn assert_rollups_match_raw(db: &Db) {
    // PostgreSQL keeps a point's time in microseconds (docs/operations.md, "Storage").
    let sql = match db.backend() {
        Backend::Sqlite => "SELECT container_key, seconds, value FROM raw_points",
        Backend::Postgres => "SELECT container_key, time_us / 1000000, value FROM raw_points",
    };
    let raw: Vec<(i64, i64, f64)> = fetch(db, sql).await;
    for (table, width) in [("rollup_minute", 60), ("rollup_hour", 3600), ("rollup_day", 86_400)] {
        let mut expected: BTreeMap<(i64, i64), (f64, f64, f64, i64)> = BTreeMap::new();
        for (key, seconds, value) in &raw {
            let e = expected
                .entry((*key, seconds - seconds.rem_euclid(width)))
                .or_insert((f64::MAX, f64::MIN, 0.0, 0));
            e.0 = e.0.min(*value);
            e.1 = e.1.max(*value);
            e.2 += value;
            e.3 += 1;
        }
        let sql = match table {
            "rollup_minute" => {
                "SELECT container_key, bucket, min_val, max_val, sum_val, count_val FROM rollup_minute ORDER BY 1, 2"
            }
            "rollup_hour" => {
                "SELECT container_key, bucket, min_val, max_val, sum_val, count_val FROM rollup_hour ORDER BY 1, 2"
            }
            _ => "SELECT container_key, bucket, min_val, max_val, sum_val, count_val FROM rollup_day ORDER BY 1, 2",
        };
        let stored: Vec<Rollup> = fetch(db, sql).await;
        assert_eq!(stored.len(), expected.len(), "{table}: bucket count");
        for ((key, bucket, min, max, sum, count), ((ek, eb), (emin, emax, esum, ecount))) in
            stored.iter().zip(&expected)
        {
            assert_eq!((key, bucket, count), (ek, eb, ecount), "{table}");
            assert_eq!((min, max), (emin, emax), "{table} {key} {bucket}");
            assert!((sum - esum).abs() < 1e-6, "{table} sum {sum} vs {esum}");
        }
    }
}

fn point(container_key: i64, seconds: i64, microseconds: i64, value: f64) -> Point {
    Point {
        container_key,
        seconds,
        microseconds,
        value,
        session_key: None,
    }
}

#[tokio::test]
async fn a_batch_stores_points_rollups_latest_values_and_last_data_at() {
    let f = fixture().await;
    let (a, b) = (series(&f, 12).await, series(&f, 13).await);
    assert_eq!(series(&f, 12).await, a, "a series keeps its key");
    let day = 1_763_683_200; // 2025-11-21 00:00:00 UTC
    let mut points = Vec::new();
    for i in 0..2_500 {
        // 2,500 points over two days, every 67 s, both series; crosses minute, hour and day edges.
        let t = day + i * 67;
        points.push(point(a, t, (i % 7) * 1000, (i as f64).sin() * 10.0));
        points.push(point(b, t, 0, i as f64));
    }
    let written = ingest::write(&f.db, &points, &[(f.device.clone(), day + 2_499 * 67)])
        .await
        .unwrap();
    assert_eq!(
        written,
        Written {
            inserted: 5_000,
            duplicates: 0
        }
    );
    assert_rollups_match_raw(&f.db).await;

    let latest: Vec<Latest> = fetch(
        &f.db,
        "SELECT container_key, latest_seconds, latest_microseconds, latest_value FROM containers ORDER BY 1",
    )
    .await;
    let last = day + 2_499 * 67;
    assert_eq!(
        latest[0],
        (
            a,
            Some(last),
            Some(0), /* 2,499 is a multiple of 7 */
            Some((2_499f64).sin() * 10.0)
        )
    );
    assert_eq!(latest[1], (b, Some(last), Some(0), Some(2_499.0)));
    assert_eq!(
        devices::get(&f.db, &f.device).await.unwrap().unwrap().last_data_at,
        last
    );

    // Older data later does not move the latest value or last_data_at back.
    ingest::write(&f.db, &[point(b, day - 10, 0, -1.0)], &[(f.device.clone(), day - 10)])
        .await
        .unwrap();
    let latest: Vec<(i64, Option<f64>)> =
        fetch(&f.db, "SELECT container_key, latest_value FROM containers ORDER BY 1").await;
    assert_eq!(latest[1], (b, Some(2_499.0)));
    assert_eq!(
        devices::get(&f.db, &f.device).await.unwrap().unwrap().last_data_at,
        last
    );
    assert_rollups_match_raw(&f.db).await;
}

#[tokio::test]
async fn resent_points_are_stored_and_counted_once() {
    let f = fixture().await;
    let a = series(&f, 1).await;
    let t0 = 1_763_726_400;
    let first: Vec<Point> = (0..100).map(|i| point(a, t0 + i, 250_000, i as f64)).collect();
    assert_eq!(
        ingest::write(&f.db, &first, &[]).await.unwrap(),
        Written {
            inserted: 100,
            duplicates: 0
        }
    );

    // The same batch again: nothing new.
    assert_eq!(
        ingest::write(&f.db, &first, &[]).await.unwrap(),
        Written {
            inserted: 0,
            duplicates: 100
        }
    );
    // Half old, half new, and a repeat inside the batch.
    let mut mixed: Vec<Point> = (50..150).map(|i| point(a, t0 + i, 250_000, i as f64)).collect();
    mixed.push(point(a, t0 + 149, 250_000, 149.0));
    assert_eq!(
        ingest::write(&f.db, &mixed, &[]).await.unwrap(),
        Written {
            inserted: 50,
            duplicates: 51
        }
    );
    // Same second, other microsecond: a different point.
    assert_eq!(
        ingest::write(&f.db, &[point(a, t0, 250_001, 7.0)], &[])
            .await
            .unwrap()
            .inserted,
        1
    );

    let count: Vec<(i64,)> = fetch(&f.db, "SELECT COUNT(*) FROM raw_points").await;
    assert_eq!(count[0].0, 151);
    let minute: Vec<(i64,)> = fetch(&f.db, "SELECT CAST(SUM(count_val) AS BIGINT) FROM rollup_minute").await;
    assert_eq!(minute[0].0, 151);
    assert_rollups_match_raw(&f.db).await;
}

#[tokio::test]
async fn points_count_towards_their_data_session() {
    let f = fixture().await;
    let a = series(&f, 1).await;
    let group = devices::get(&f.db, &f.device).await.unwrap().unwrap().id_group;
    let insert = "INSERT INTO data_sessions (id_data_session, id_group, id_physical_device, start, created_at, updated_at) \
                  VALUES ('s-1', $1, $2, 0, 0, 0)";
    let key: i64 = match &f.db {
        Db::Sqlite(p, ..) => {
            sqlx::query(insert)
                .bind(&group)
                .bind(&f.device)
                .execute(p)
                .await
                .unwrap();
            sqlx::query_scalar("SELECT session_key FROM data_sessions")
                .fetch_one(p)
                .await
                .unwrap()
        }
        Db::Postgres(p) => {
            sqlx::query(insert)
                .bind(&group)
                .bind(&f.device)
                .execute(p)
                .await
                .unwrap();
            sqlx::query_scalar("SELECT session_key FROM data_sessions")
                .fetch_one(p)
                .await
                .unwrap()
        }
    };
    let points: Vec<Point> = (0..30)
        .map(|i| Point {
            session_key: Some(key),
            ..point(a, 1_763_726_400 + i, 0, 1.0)
        })
        .collect();
    ingest::write(&f.db, &points, &[]).await.unwrap();
    ingest::write(&f.db, &points[..10], &[]).await.unwrap();
    let counts: Vec<(i64,)> = fetch(&f.db, "SELECT datapoint_count FROM data_sessions").await;
    assert_eq!(counts[0].0, 30);
}

/// A counter of the process's `/metrics` (the tests of this file that count are alone in
/// counting ingest outcomes).
fn counted(family: &str, outcome: Outcome) -> u64 {
    metrics::read(&metrics::handle().render(), family, outcome)
}

/// Makes the database refuse raw points of value -666 (a trigger), as it may refuse a write.
async fn refuse_value(db: &Db) {
    match db {
        Db::Sqlite(p, ..) => {
            let trigger = "CREATE TRIGGER refuse_point BEFORE INSERT ON raw_points WHEN NEW.value = -666 \
                           BEGIN SELECT RAISE(ABORT, 'refused'); END";
            sqlx::raw_sql(trigger).execute(p).await.unwrap();
        }
        Db::Postgres(p) => {
            let function = "CREATE FUNCTION refuse_point() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                            IF NEW.value = -666 THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$";
            let trigger =
                "CREATE TRIGGER refuse_point BEFORE INSERT ON raw_points FOR EACH ROW EXECUTE FUNCTION refuse_point()";
            sqlx::raw_sql(function).execute(p).await.unwrap();
            sqlx::raw_sql(trigger).execute(p).await.unwrap();
        }
    }
}

/// A group commit the store refuses is written again job by job: the good message is stored
/// and the refused one fails, and each ends counted once, its points with it.
#[tokio::test]
async fn a_refused_group_commit_is_retried_job_by_job_and_every_outcome_counted() {
    let app = common::TestApp::spawn().await;
    let db = &app.state.db;
    let device = gateway(db).await;
    let group = devices::get(db, &device).await.unwrap().unwrap().id_group;
    let key = ingest::container_key(
        db,
        &SeriesId {
            id_group: group,
            source_device: device.clone(),
            datatype: 1,
        },
        usize::MAX,
    )
    .await
    .unwrap()
    .unwrap();
    refuse_value(db).await;
    let before = |family, outcome| (family, outcome, counted(family, outcome));
    let expected = [
        (before(MESSAGES, Outcome::Stored), 1),
        (before(MESSAGES, Outcome::Failed(Failed::Store)), 1),
        (before(POINTS, Outcome::Stored), 3),
        (before(POINTS, Outcome::Duplicate), 0),
        (before(POINTS, Outcome::Failed(Failed::Store)), 2),
    ];
    let t = 1_763_726_400;
    let good: Vec<Point> = (0..3).map(|i| point(key, t + i, 0, 1.0)).collect();
    let bad = vec![point(key, t + 10, 0, 2.0), point(key, t + 11, 0, -666.0)];
    // Both queued before the writer runs (one thread), so they are one group commit.
    let good = app
        .state
        .gateway
        .ingest
        .enqueue(&device, good, vec![(device.clone(), t)])
        .await
        .unwrap();
    let bad = app
        .state
        .gateway
        .ingest
        .enqueue(&device, bad, vec![(device.clone(), t)])
        .await
        .unwrap();
    assert!(good.await.is_ok());
    assert!(bad.await.is_err());
    let stored: Vec<(i64,)> = fetch(db, "SELECT COUNT(*) FROM raw_points").await;
    assert_eq!(stored[0].0, 3);
    for ((family, outcome, before), more) in expected {
        assert_eq!(counted(family, outcome), before + more, "{family} {outcome:?}");
    }
}

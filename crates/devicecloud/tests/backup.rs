//! `devicecloud admin backup` and `admin restore` as an operator runs them (docs/operations.md,
//! "Backup and restore"), over the real binary and real MQTT: a backup taken while gateways
//! publish holds every point acknowledged before it began, with rollups that agree, and a store
//! restored from it serves them; a backup never overwrites, a restore only fills an empty data
//! dir, never beside a running `serve`, and only from a devicecloud backup. Points packed into
//! compressed chunks are in a backup as chunks, and the restored store answers for them as the
//! live one did. On PostgreSQL (`DEVICECLOUD_TEST_DATABASE_URL`) the printed `pg_dump` and
//! `pg_restore` commands are run.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use devicecloud_protocol::{Measurement, ModuleKind, Timestamp, measurements_payload};
use devicecloud_simulator::Provisioner;
use devicecloud_store::chunks::pack_closed;
use devicecloud_store::{Backend, Db};
use rumqttc::{AsyncClient, ConnectReturnCode, Event, MqttOptions, Packet, QoS};
use serde_json::Value;
use tokio::process::Command;

mod common;

use common::{Credentials, Dir, Serve, Store, fresh_postgres};
/// Gateways publishing at once; each waits for its PUBACK before the next message.
const GATEWAYS: usize = 4;
/// Each message: this many seconds in a row, each with a value of every datatype.
const SECONDS_PER_MESSAGE: i64 = 20;
const DATATYPES: u32 = 3;
/// The first second of every gateway's series, 2023-11-14 23:20 UTC: a run's points fill many
/// minute and hour buckets, and two days from the 120th message on.
const FIRST_SECOND: i64 = 1_700_004_000;

/// One acknowledged message: `SECONDS_PER_MESSAGE` seconds of every datatype of a gateway.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Acked {
    serial: String,
    message: i64,
}

fn payload(message: i64) -> Vec<u8> {
    let batch: Vec<Measurement> = (0..SECONDS_PER_MESSAGE)
        .map(|i| {
            let seconds = FIRST_SECOND + message * SECONDS_PER_MESSAGE + i;
            Measurement {
                device: None,
                ts: Some(Timestamp {
                    seconds,
                    microseconds: 0,
                }),
                values: (1..=DATATYPES)
                    .map(|d| (d, (seconds % 1000) as f64 + f64::from(d)))
                    .collect(),
            }
        })
        .collect();
    measurements_payload(&batch)
}

/// Publishes messages 0, 1, 2, … at QoS 1, one at a time, recording each once its PUBACK came,
/// until `stop` is set.
async fn publish(
    mqtt: std::net::SocketAddr,
    serial: String,
    token: String,
    acked: Arc<Mutex<Vec<Acked>>>,
    stop: Arc<AtomicBool>,
) {
    let mut options = MqttOptions::new(serial.clone(), mqtt.ip().to_string(), mqtt.port());
    options.set_credentials(serial.clone(), token);
    options.set_keep_alive(Duration::from_secs(30));
    let (client, mut events) = AsyncClient::new(options, 8);
    let mut message = 0;
    let mut waiting = false;
    while !stop.load(Ordering::Relaxed) {
        if !waiting {
            client
                .publish("v1/gateway/measurements", QoS::AtLeastOnce, false, payload(message))
                .await
                .unwrap();
            waiting = true;
        }
        let event = tokio::time::timeout(Duration::from_secs(10), events.poll())
            .await
            .expect("no MQTT event in 10 s")
            .unwrap_or_else(|e| panic!("{serial}: connection failed: {e}"));
        match event {
            Event::Incoming(Packet::ConnAck(ack)) => assert_eq!(ack.code, ConnectReturnCode::Success),
            Event::Incoming(Packet::PubAck(_)) => {
                acked.lock().unwrap().push(Acked {
                    serial: serial.clone(),
                    message,
                });
                message += 1;
                waiting = false;
            }
            _ => {}
        }
    }
    let _ = client.disconnect().await;
}

/// What [`ingest_around`] left in a store.
struct Ingested {
    /// Every message acknowledged before the call began.
    acked: HashSet<Acked>,
    credentials: Credentials,
    /// The group of the gateways.
    group: String,
}

/// Runs `serve` on `store` with gateways publishing without pause, calls `during` once some
/// messages are acknowledged, and stops. Returns what `during` returned.
async fn ingest_around<T, F>(store: &Store, during: F) -> (Ingested, T)
where
    F: AsyncFnOnce() -> T,
{
    let credentials = store.bootstrap().await;
    let serve = store.serve().await;
    let token = serve.token(&credentials).await;
    let provisioner = Provisioner::new(&serve.base(), &token);
    let group = provisioner.create_group("backup").await.unwrap();
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut publishers = Vec::new();
    for n in 0..GATEWAYS {
        let gateway = provisioner
            .gateway(&group, &format!("GW-BACKUP-{n}"), ModuleKind::Core)
            .await
            .unwrap();
        publishers.push(tokio::spawn(publish(
            serve.mqtt,
            gateway.serial,
            gateway.token,
            acked.clone(),
            stop.clone(),
        )));
    }
    // Ingest well under way: a few hundred messages of every gateway.
    let count = || acked.lock().unwrap().len();
    for _ in 0..600 {
        if count() >= GATEWAYS * 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before: HashSet<Acked> = acked.lock().unwrap().iter().cloned().collect();
    assert!(
        before.len() >= GATEWAYS * 50,
        "too few messages acknowledged: {}",
        before.len()
    );
    let out = during().await;
    let after_call = count();
    for _ in 0..100 {
        if count() > after_call {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for publisher in publishers {
        publisher.await.unwrap();
    }
    // They never paused: acknowledgements went on after the call, so they did during it.
    let total = count();
    assert!(
        total > after_call,
        "gateways must go on publishing: {} acknowledged before the call, {after_call} when it ended, {total} in all",
        before.len()
    );
    serve.stop().await;
    let ingested = Ingested {
        acked: before,
        credentials,
        group,
    };
    (ingested, out)
}

/// Checks the restored store: every message of `acked` is there, point by point, and every
/// series' minute, hour and day rollups count its raw points. Returns the number of points.
async fn check_restored(url: &str, acked: &HashSet<Acked>) -> i64 {
    let db = Db::connect(url).await.unwrap();
    let seconds = match db.backend() {
        Backend::Sqlite => "r.seconds",
        Backend::Postgres => "r.time_us / 1000000",
    };
    let points_sql = format!(
        "SELECT d.serial_hardware, c.datatype, {seconds} FROM raw_points r \
         JOIN containers c ON c.container_key = r.container_key \
         JOIN physical_devices d ON d.id_physical_device = c.source_device"
    );
    let counts_sql = "SELECT c.container_key, \
                      (SELECT COUNT(*) FROM raw_points r WHERE r.container_key = c.container_key), \
                      (SELECT CAST(COALESCE(SUM(count_val), 0) AS BIGINT) FROM rollup_minute m WHERE m.container_key = c.container_key), \
                      (SELECT CAST(COALESCE(SUM(count_val), 0) AS BIGINT) FROM rollup_hour h WHERE h.container_key = c.container_key), \
                      (SELECT CAST(COALESCE(SUM(count_val), 0) AS BIGINT) FROM rollup_day d WHERE d.container_key = c.container_key) \
                      FROM containers c ORDER BY c.container_key";
    type Counts = (i64, i64, i64, i64, i64);
    let (points, counts): (Vec<(String, i64, i64)>, Vec<Counts>) = match &db {
        Db::Sqlite(p, ..) => (
            sqlx::query_as(sqlx::AssertSqlSafe(points_sql.as_str()))
                .fetch_all(p)
                .await
                .unwrap(),
            sqlx::query_as(counts_sql).fetch_all(p).await.unwrap(),
        ),
        Db::Postgres(p) => (
            sqlx::query_as(sqlx::AssertSqlSafe(points_sql.as_str()))
                .fetch_all(p)
                .await
                .unwrap(),
            sqlx::query_as(counts_sql).fetch_all(p).await.unwrap(),
        ),
    };
    db.close().await;
    let stored: HashSet<(String, i64, i64)> = points.into_iter().collect();
    let mut missing = 0;
    for a in acked {
        for i in 0..SECONDS_PER_MESSAGE {
            for d in 1..=i64::from(DATATYPES) {
                let seconds = FIRST_SECOND + a.message * SECONDS_PER_MESSAGE + i;
                if !stored.contains(&(a.serial.clone(), d, seconds)) {
                    missing += 1;
                }
            }
        }
    }
    assert_eq!(
        missing, 0,
        "points acknowledged before the backup began are missing from the restored store"
    );
    assert_eq!(
        counts.len(),
        GATEWAYS * DATATYPES as usize,
        "one series per gateway and datatype"
    );
    for (container, raw, minute, hour, day) in &counts {
        assert_eq!(
            (*minute, *hour, *day),
            (*raw, *raw, *raw),
            "rollups of series {container} must count its {raw} raw points"
        );
    }
    counts.iter().map(|c| c.1).sum()
}

/// Serves the restored store: the accounts sign in, and the API counts the points checked.
async fn check_served(store: &Store, ingested: &Ingested, points: i64) {
    let serve = store.serve().await;
    let token = serve.token(&ingested.credentials).await;
    assert_eq!(serve.total(&token, "/api/v2/physical-device").await, GATEWAYS as i64);
    let data = format!("/api/v2/data?per-page=1&filter[id_group]={}", ingested.group);
    assert_eq!(serve.total(&token, &data).await, points);
    serve.stop().await;
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_ingest_restores_every_point_acknowledged_before_it_with_rollups_that_agree() {
    let live_dir = Dir::new("live");
    let live = Store::sqlite(&live_dir);
    let backups = Dir::new("files");
    let file = backups.join("devicecloud.backup");
    let (ingested, out) = ingest_around(&live, async || {
        live.admin_ok(&["backup", "--to", file.to_str().unwrap()]).await
    })
    .await;

    let keys: Vec<&str> = out.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "backend",
            "store",
            "backup",
            "bytes",
            "took_ms",
            "secret_key",
            "signing_key"
        ],
        "{out}"
    );
    assert_eq!(out["backend"], "sqlite");
    assert_eq!(out["backup"], file.to_str().unwrap());
    assert_eq!(out["bytes"], std::fs::metadata(&file).unwrap().len());
    let key_copy = backups.join("devicecloud.backup.secret.key");
    assert_eq!(out["secret_key"], key_copy.to_str().unwrap());
    assert_eq!(
        std::fs::read(&key_copy).unwrap(),
        std::fs::read(live_dir.join("secret.key")).unwrap()
    );
    let signing_copy = backups.join("devicecloud.backup.signing.key");
    assert_eq!(out["signing_key"], signing_copy.to_str().unwrap());
    assert_eq!(
        std::fs::read(&signing_copy).unwrap(),
        std::fs::read(live_dir.join("signing.key")).unwrap()
    );
    #[cfg(unix)]
    assert_eq!(
        (mode(&file), mode(&key_copy), mode(&signing_copy)),
        (0o600, 0o600, 0o600)
    );
    // Nothing but the backup and its keys: no temporary file left behind.
    assert_eq!(std::fs::read_dir(&backups.0).unwrap().count(), 3);

    let restored_dir = Dir::new("restored");
    let restored = Store::sqlite(&restored_dir);
    let out = restored.admin_ok(&["restore", "--from", file.to_str().unwrap()]).await;
    assert_eq!(out["backend"], "sqlite");
    assert_eq!(out["store"], restored_dir.join("devicecloud.db").to_str().unwrap());
    assert_eq!(out["secret_key"], "restored");
    assert_eq!(out["signing_key"], "restored");
    assert_eq!(
        out["signing_key_file"],
        restored_dir.join("signing.key").to_str().unwrap()
    );
    assert_eq!(out["backup_migration"], out["migration"]);
    for key in ["secret.key", "signing.key"] {
        assert_eq!(
            std::fs::read(restored_dir.join(key)).unwrap(),
            std::fs::read(live_dir.join(key)).unwrap(),
            "{key}"
        );
    }
    let points = check_restored(&restored.url(), &ingested.acked).await;
    assert!(points >= ingested.acked.len() as i64 * SECONDS_PER_MESSAGE * i64::from(DATATYPES));
    check_served(&restored, &ingested, points).await;
}

#[tokio::test]
async fn a_backup_never_overwrites_a_file() {
    let dir = Dir::new("exists");
    let store = Store::sqlite(&dir);
    store.bootstrap().await;
    let taken = dir.join("taken.backup");
    std::fs::write(&taken, "keep me").unwrap();
    let refused = store.admin_refused(&["backup", "--to", taken.to_str().unwrap()]).await;
    assert!(
        refused.contains(&format!("{} already exists", taken.display())),
        "{refused}"
    );
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "keep me");
    // No store yet: nothing is made, and the data dir is named.
    let empty_dir = Dir::new("no-store");
    let empty = Store::sqlite(&empty_dir);
    let refused = empty
        .admin_refused(&["backup", "--to", dir.join("new.backup").to_str().unwrap()])
        .await;
    assert!(refused.contains("there is no store at"), "{refused}");
    assert!(!dir.join("new.backup").exists());
}

/// A store with its first accounts, and a backup of it, `store.backup`, in its directory.
async fn bootstrapped_backup(name: &str) -> (Dir, PathBuf) {
    let dir = Dir::new(name);
    let store = Store::sqlite(&dir);
    store.bootstrap().await;
    let file = dir.join("store.backup");
    store.admin_ok(&["backup", "--to", file.to_str().unwrap()]).await;
    (dir, file)
}

#[tokio::test]
async fn a_restore_fills_only_an_empty_data_dir_from_a_devicecloud_backup_and_never_beside_serve() {
    let (source_dir, file) = bootstrapped_backup("source").await;
    let file = file.to_str().unwrap();

    // Into a data dir that has a store: refused, naming the store, which is left as it was.
    let taken_dir = Dir::new("taken");
    let taken = Store::sqlite(&taken_dir);
    taken.bootstrap().await;
    let db = taken_dir.join("devicecloud.db");
    let before = std::fs::read(&db).unwrap();
    let refused = taken.admin_refused(&["restore", "--from", file]).await;
    assert!(
        refused.contains(&format!("{} already exists and is not empty", db.display())),
        "{refused}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);

    // Beside a running serve: refused, naming serve.
    let serve = taken.serve().await;
    let refused = taken.admin_refused(&["restore", "--from", file]).await;
    assert!(
        refused.contains("a devicecloud serve is running on the SQLite store"),
        "{refused}"
    );
    serve.stop().await;

    // From files that are not backups: refused, naming the file, and nothing is made.
    let empty_dir = Dir::new("empty");
    let empty = Store::sqlite(&empty_dir);
    let text = source_dir.join("notes.txt");
    std::fs::write(&text, "not a database at all, but long enough to have a header").unwrap();
    let other = source_dir.join("other.sqlite");
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=rwc", other.display()))
        .await
        .unwrap();
    sqlx::query("CREATE TABLE t (x INTEGER)").execute(&pool).await.unwrap();
    pool.close().await;
    for (path, reason) in [
        (&text, "not an SQLite database"),
        (
            &other,
            "an SQLite database without the migrations of a devicecloud store",
        ),
    ] {
        let refused = empty
            .admin_refused(&["restore", "--from", path.to_str().unwrap()])
            .await;
        assert!(
            refused.contains(&format!("{} is not a devicecloud backup: {reason}", path.display())),
            "{refused}"
        );
    }
    let missing = source_dir.join("missing.backup");
    let refused = empty
        .admin_refused(&["restore", "--from", missing.to_str().unwrap()])
        .await;
    assert!(refused.contains(missing.to_str().unwrap()), "{refused}");
    assert!(!empty_dir.join("devicecloud.db").exists());

    // A store in use (its write-ahead log beside it) is not a backup either.
    let live = source_dir.join("devicecloud.db");
    std::fs::write(source_dir.join("devicecloud.db-wal"), "frames").unwrap();
    let refused = empty
        .admin_refused(&["restore", "--from", live.to_str().unwrap()])
        .await;
    assert!(refused.contains("devicecloud.db-wal lies beside it"), "{refused}");

    // And the good one restores into the empty dir.
    let out = empty.admin_ok(&["restore", "--from", file]).await;
    assert_eq!(out["secret_key"], "not in the backup");
    assert_eq!(out["signing_key"], "not in the backup");
}

#[tokio::test]
async fn an_older_backup_is_carried_forward_by_the_migrations_of_this_version() {
    let (_source_dir, file) = bootstrapped_backup("older").await;
    // The backup as the version before migration 8 made it: without the columns that
    // migration adds, nor its row.
    let backup = sqlx::SqlitePool::connect(&format!("sqlite://{}", file.display()))
        .await
        .unwrap();
    for sql in [
        "ALTER TABLE webhooks DROP COLUMN disabled_reason",
        "ALTER TABLE webhooks DROP COLUMN disabled_at",
        "DELETE FROM _sqlx_migrations WHERE version = 8",
    ] {
        sqlx::query(sql).execute(&backup).await.unwrap();
    }
    backup.close().await;

    let restored_dir = Dir::new("carried");
    let restored = Store::sqlite(&restored_dir);
    restored.admin_ok(&["restore", "--from", file.to_str().unwrap()]).await;
    let db = sqlx::SqlitePool::connect(&restored.url()).await.unwrap();
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE version = 8 AND success")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(applied, 1, "migration 8 applied by the restore");
    sqlx::query("SELECT disabled_reason, disabled_at FROM webhooks")
        .fetch_all(&db)
        .await
        .unwrap();
    db.close().await;
}

// ---------------------------------------------------------------------------------------------
// A backup of a store whose older points are packed into compressed chunks.

/// 2023-11-15 00:00:00 UTC. The packed points span the hour before it and the hour after it (two
/// UTC days, so every series has a chunk of each), the points sent after packing the hour after
/// that.
const MIDNIGHT: i64 = 1_700_006_400;
const PACKED_FROM: i64 = MIDNIGHT - 3_600;
/// The packing horizon: every point before this second is packed, none after it.
const PACK_BEFORE: i64 = MIDNIGHT + 3_600;
const ROWS_UNTIL: i64 = MIDNIGHT + 7_200;
/// Seconds between two measurements of a series (each with a fraction of its own).
const STEP_S: i64 = 7;
/// Gateways of the test; each sends datatypes 1 to [`DATATYPES`] itself and [`ASSET_DATATYPE`]
/// of an asset behind it.
const PACKING_GATEWAYS: usize = 2;
const ASSET_DATATYPE: u32 = 5;
const SERIES: usize = PACKING_GATEWAYS * (DATATYPES as usize + 1);
/// Measurements per MQTT message: about 7 KB, under rumqttc's default packet limit of 10 KiB.
const PER_MESSAGE: usize = 80;
const DAY_US: i64 = 86_400 * 1_000_000;
/// The settings of both serves: the background packer never packs (its horizon is a century
/// back) and runs once a day, so only the test decides what is packed.
const NO_BACKGROUND_PACKING: [(&str, &str); 2] = [
    ("DEVICECLOUD_PACK_AFTER_S", "3153600000"),
    ("DEVICECLOUD_PACK_INTERVAL_S", "86400"),
];

/// What identifies a point in a `data` item: datatype, second, microseconds, the value's bits.
type PointKey = (i64, i64, i64, u64);

/// Gateway `n`'s measurements of the seconds `from..until`, every [`STEP_S`], with
/// microsecond fractions: of the gateway itself and of its asset `<serial>-MB`.
fn measurements(n: usize, serial: &str, from: i64, until: i64) -> Vec<Measurement> {
    let mut out = Vec::new();
    for seconds in (from..until).step_by(STEP_S as usize) {
        let k = (seconds - PACKED_FROM) / STEP_S;
        let ts = Timestamp {
            seconds,
            microseconds: ((k * 104_729 + n as i64 * 7_919) % 1_000_000) as u32,
        };
        let phase = k as f64 * 0.37 + n as f64;
        out.push(Measurement {
            device: None,
            ts: Some(ts),
            values: (1..=DATATYPES).map(|d| (d, phase.sin() * 1e3 / f64::from(d))).collect(),
        });
        out.push(Measurement {
            device: Some(format!("{serial}-MB")),
            ts: Some(ts),
            values: vec![(ASSET_DATATYPE, k as f64 / 3.0 + n as f64 * 1e6)],
        });
    }
    out
}

/// The keys of every point of `measurements`.
fn keys_of(measurements: &[Measurement]) -> Vec<PointKey> {
    measurements
        .iter()
        .flat_map(|m| {
            let ts = m.ts.unwrap();
            m.values
                .iter()
                .map(move |&(d, v)| (i64::from(d), ts.seconds, i64::from(ts.microseconds), v.to_bits()))
        })
        .collect()
}

/// Publishes `measurements` as gateway `serial` at QoS 1, [`PER_MESSAGE`] to a message, each
/// once the one before was acknowledged (after its commit).
async fn send(mqtt: std::net::SocketAddr, serial: &str, token: &str, measurements: &[Measurement]) {
    let mut options = MqttOptions::new(serial, mqtt.ip().to_string(), mqtt.port());
    options.set_credentials(serial, token);
    options.set_keep_alive(Duration::from_secs(30));
    let (client, mut events) = AsyncClient::new(options, 8);
    for part in measurements.chunks(PER_MESSAGE) {
        client
            .publish(
                "v1/gateway/measurements",
                QoS::AtLeastOnce,
                false,
                measurements_payload(part),
            )
            .await
            .unwrap();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(10), events.poll())
                .await
                .expect("no PUBACK within 10 s")
                .unwrap_or_else(|e| panic!("{serial}: connection failed: {e}"));
            match event {
                Event::Incoming(Packet::ConnAck(ack)) => assert_eq!(ack.code, ConnectReturnCode::Success),
                Event::Incoming(Packet::PubAck(_)) => break,
                _ => {}
            }
        }
    }
    let _ = client.disconnect().await;
}

/// Every row of `point_chunks`, in key order: series, first and last time, points, payload.
type ChunkRow = (i64, i64, i64, i64, Vec<u8>);

const CHUNKS_SQL: &str = "SELECT container_key, first_us, last_us, points, payload FROM point_chunks \
                          ORDER BY container_key, first_us";

async fn chunk_rows(db: &Db) -> Vec<ChunkRow> {
    let Db::Sqlite(pool, ..) = db else {
        panic!("the packing backup test runs on SQLite")
    };
    sqlx::query_as(CHUNKS_SQL).fetch_all(pool).await.unwrap()
}

async fn raw_rows(db: &Db) -> i64 {
    let Db::Sqlite(pool, ..) = db else {
        panic!("the packing backup test runs on SQLite")
    };
    sqlx::query_scalar("SELECT COUNT(*) FROM raw_points")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// One answer as a client reads it: what was asked, the status, the pagination headers and the
/// JSON body, with the serve's own address written `BASE` (absolute links name the host asked).
#[derive(Debug, PartialEq)]
struct Answer {
    request: String,
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Value,
}

const PAGINATION: [&str; 5] = [
    "x-pagination-total-count",
    "x-pagination-page-count",
    "x-pagination-current-page",
    "x-pagination-per-page",
    "link",
];

/// Every string in `value` with `base` written `BASE`.
fn without_base(value: &mut Value, base: &str) {
    match value {
        Value::String(s) => *s = s.replace(base, "BASE"),
        Value::Array(items) => items.iter_mut().for_each(|v| without_base(v, base)),
        Value::Object(map) => map.values_mut().for_each(|v| without_base(v, base)),
        _ => {}
    }
}

async fn answer(serve: &Serve, token: &str, request: &str) -> Answer {
    let base = serve.base();
    let reply = reqwest::Client::new()
        .get(format!("{base}{request}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = reply.status().as_u16();
    let headers = PAGINATION
        .iter()
        .filter_map(|name| {
            let value = reply.headers().get(*name)?.to_str().unwrap();
            Some((*name, value.replace(&base, "BASE")))
        })
        .collect();
    let text = reply.text().await.unwrap();
    let mut body: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {request}: {status}, not JSON ({e}): {text}"));
    without_base(&mut body, &base);
    Answer {
        request: request.to_string(),
        status,
        headers,
        body,
    }
}

/// Every page of the collection `path` (which has a query already), page 1 first.
async fn every_page(serve: &Serve, token: &str, path: &str) -> Vec<Answer> {
    let first = answer(serve, token, &format!("{path}&page=1")).await;
    let pages = first.body["_meta"]["pageCount"]
        .as_u64()
        .unwrap_or_else(|| panic!("GET {path}: {} without _meta.pageCount: {}", first.status, first.body));
    let mut out = vec![first];
    for page in 2..=pages {
        out.push(answer(serve, token, &format!("{path}&page={page}")).await);
    }
    out
}

/// The collections compared: every page of `data` in three orders and of a filter on a span
/// across the packing horizon, and `data-downsampled` per day, per minute, and raw (from chunks
/// only across the midnight, from chunks and rows across the horizon).
fn packed_collections(group: &str) -> Vec<String> {
    let data = format!("/api/v2/data?filter[id_group]={group}");
    let down = format!("/api/v2/data-downsampled?filter[id_group]={group}");
    let span = |lo: i64, hi: i64| format!("&filter[timestamp_seconds][gte]={lo}&filter[timestamp_seconds][lt]={hi}");
    vec![
        data.clone(),
        format!("{data}&per-page=10000&sort=timestamp_seconds"),
        format!("{data}&per-page=997&sort=-value"),
        format!(
            "{data}&filter[datatype]={ASSET_DATATYPE}&per-page=100{}",
            span(MIDNIGHT - 600, PACK_BEFORE + 600)
        ),
        format!("{down}&per-page=10000"),
        format!("{down}&per-page=10000{}", span(PACKED_FROM, ROWS_UNTIL)),
        format!("{down}&per-page=500{}", span(MIDNIGHT - 1_800, MIDNIGHT + 1_800)),
        format!(
            "{down}&per-page=10000{}",
            span(PACK_BEFORE - 1_800, PACK_BEFORE + 1_800)
        ),
    ]
}

/// The items of every page of the collection `path` of [`packed_collections`] in `answers`.
fn items_of<'a>(answers: &'a [Answer], path: &str) -> impl Iterator<Item = &'a Value> {
    let pages = format!("{path}&page=");
    answers
        .iter()
        .filter(move |a| a.request.starts_with(&pages))
        .flat_map(|a| a.body["items"].as_array().unwrap())
}

/// The answers to every page of every collection of [`packed_collections`].
async fn capture(serve: &Serve, token: &str, group: &str) -> Vec<Answer> {
    let mut out = Vec::new();
    for path in packed_collections(group) {
        out.extend(every_page(serve, token, &path).await);
    }
    out
}

/// The first place where two JSON values differ, with both sides there.
fn json_difference(at: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) if x.keys().eq(y.keys()) => x
            .iter()
            .find_map(|(k, v)| json_difference(&format!("{at}.{k}"), v, &y[k])),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (v, w))| json_difference(&format!("{at}[{i}]"), v, w)),
        _ if a == b => None,
        _ => {
            let short = |v: &Value| v.to_string().chars().take(600).collect::<String>();
            Some(format!("at {at}: {} | {}", short(a), short(b)))
        }
    }
}

/// Panics unless `restored` answers as `live` did, naming the first differences.
fn assert_same_answers(live: &[Answer], restored: &[Answer]) {
    let mut differences = Vec::new();
    if live.len() != restored.len() {
        differences.push(format!(
            "{} answers from the live store, {} from the restored one",
            live.len(),
            restored.len()
        ));
    }
    for (l, r) in live.iter().zip(restored) {
        if l.request != r.request {
            // Another page count: every later request differs too.
            differences.push(format!("GET {} | GET {}", l.request, r.request));
            break;
        }
        if l == r {
            continue;
        }
        let why = if (l.status, &l.headers) != (r.status, &r.headers) {
            format!(
                "status and headers {} {:?} | {} {:?}",
                l.status, l.headers, r.status, r.headers
            )
        } else {
            json_difference("body", &l.body, &r.body).unwrap_or_default()
        };
        differences.push(format!("GET {}: {why}", l.request));
    }
    assert!(
        differences.is_empty(),
        "the restored store answers otherwise (live | restored), {} differences:\n{}",
        differences.len(),
        differences.iter().take(6).cloned().collect::<Vec<_>>().join("\n")
    );
}

fn total(answer: &Answer) -> i64 {
    let header = answer
        .headers
        .iter()
        .find(|(name, _)| *name == "x-pagination-total-count")
        .map(|(_, v)| v.parse::<i64>().unwrap());
    let meta = answer.body["_meta"]["totalCount"].as_i64();
    assert_eq!(header, meta, "GET {}: the header and _meta count apart", answer.request);
    meta.unwrap_or_else(|| panic!("GET {}: no total count", answer.request))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_carries_packed_points() {
    let live_dir = Dir::new("packed-live");
    let mut live = Store::sqlite(&live_dir);
    live.env = NO_BACKGROUND_PACKING.iter().map(|(k, v)| (*k, v.to_string())).collect();
    let credentials = live.bootstrap().await;
    let serve = live.serve().await;
    let token = serve.token(&credentials).await;
    let provisioner = Provisioner::new(&serve.base(), &token);
    let group = provisioner.create_group("packed").await.unwrap();
    let mut gateways = Vec::new();
    for n in 0..PACKING_GATEWAYS {
        let gateway = provisioner
            .gateway(&group, &format!("GW-PACKED-{n}"), ModuleKind::Core)
            .await
            .unwrap();
        gateways.push((gateway.serial, gateway.token));
    }

    // The first two hours, across the midnight, are packed; then the hour after them comes.
    let mut sent = Vec::new();
    let mut packed_points = 0;
    for (n, (serial, token)) in gateways.iter().enumerate() {
        let batch = measurements(n, serial, PACKED_FROM, PACK_BEFORE);
        send(serve.mqtt, serial, token, &batch).await;
        packed_points += keys_of(&batch).len();
        sent.extend(keys_of(&batch));
    }
    let db = Db::connect(&live.url()).await.unwrap();
    let packed = pack_closed(&db, PACK_BEFORE, usize::MAX).await.unwrap();
    assert_eq!(packed.series, SERIES, "{packed:?}");
    assert_eq!(packed.points, packed_points as u64, "{packed:?}");
    assert!(packed.chunks >= 2 * SERIES as u64, "a chunk of each day: {packed:?}");
    assert_eq!(raw_rows(&db).await, 0, "every point sent so far is packed");
    for (n, (serial, token)) in gateways.iter().enumerate() {
        let batch = measurements(n, serial, PACK_BEFORE, ROWS_UNTIL);
        send(serve.mqtt, serial, token, &batch).await;
        sent.extend(keys_of(&batch));
    }
    let rows = (sent.len() - packed_points) as i64;
    assert_eq!(raw_rows(&db).await, rows, "the points sent after packing are rows");
    let chunks = chunk_rows(&db).await;
    let in_chunks: i64 = chunks.iter().map(|c| c.3).sum();
    assert_eq!(in_chunks, packed_points as i64);
    let days: HashSet<(i64, i64)> = chunks.iter().map(|c| (c.0, c.1.div_euclid(DAY_US))).collect();
    assert_eq!(days.len(), 2 * SERIES, "every series has chunks of both days");
    db.close().await;

    // What a client reads of the live store: every point, packed or not.
    let before = capture(&serve, &token, &group).await;
    for a in &before {
        assert_eq!(a.status, 200, "GET {}: {}", a.request, a.body);
    }
    let collections = packed_collections(&group);
    let mut read: Vec<PointKey> = items_of(&before, &collections[1])
        .map(|item| {
            (
                item["datatype"].as_i64().unwrap(),
                item["timestamp_seconds"].as_i64().unwrap(),
                item["microseconds"].as_i64().unwrap(),
                item["value"].as_f64().unwrap().to_bits(),
            )
        })
        .collect();
    read.sort_unstable();
    sent.sort_unstable();
    assert_eq!(read.len(), sent.len(), "points read from the live store");
    assert!(read == sent, "the live store answers other points than were sent");
    assert_eq!(total(&before[0]), sent.len() as i64);
    // The raw answer across the horizon holds packed points and rows.
    let starts: Vec<f64> = items_of(&before, &collections[7])
        .map(|item| item["timestamp_seconds"].as_f64().unwrap())
        .collect();
    assert!(
        starts.iter().any(|&t| t < PACK_BEFORE as f64) && starts.iter().any(|&t| t > PACK_BEFORE as f64),
        "raw points on both sides of the horizon"
    );

    // The backup, taken while serve runs, holds the same chunks and rows.
    let backups = Dir::new("packed-files");
    let file = backups.join("devicecloud.backup");
    live.admin_ok(&["backup", "--to", file.to_str().unwrap()]).await;
    serve.stop().await;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&file)
        .read_only(true)
        .immutable(true);
    let backup = sqlx::SqlitePool::connect_with(options).await.unwrap();
    let backup_chunks: Vec<ChunkRow> = sqlx::query_as(CHUNKS_SQL).fetch_all(&backup).await.unwrap();
    let backup_rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM raw_points")
        .fetch_one(&backup)
        .await
        .unwrap();
    backup.close().await;
    assert!(!backup_chunks.is_empty(), "the backup holds no point_chunks rows");
    assert_eq!(backup_chunks.len(), chunks.len(), "point_chunks rows in the backup");
    assert!(backup_chunks == chunks, "the backup's chunks differ from the store's");
    assert_eq!(backup_rows, rows, "raw_points rows in the backup");

    // Restored into a fresh data dir and served, it answers the same: every page's JSON, its
    // pagination headers and counts.
    let restored_dir = Dir::new("packed-restored");
    let mut restored = Store::sqlite(&restored_dir);
    restored.env = live.env.clone();
    restored.admin_ok(&["restore", "--from", file.to_str().unwrap()]).await;
    let serve = restored.serve().await;
    let token = serve.token(&credentials).await;
    let after = capture(&serve, &token, &group).await;
    serve.stop().await;
    assert_same_answers(&before, &after);
    assert_eq!(total(&after[0]), sent.len() as i64);

    // And the restored store still keeps them packed: nothing was unpacked or packed again.
    let db = Db::connect(&restored.url()).await.unwrap();
    assert!(chunk_rows(&db).await == chunks, "the restored store's chunks differ");
    assert_eq!(raw_rows(&db).await, rows);
    db.close().await;
}

/// The test database server, when one is named.
fn postgres_base() -> Option<String> {
    std::env::var("DEVICECLOUD_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

/// Runs a printed PostgreSQL command, with the password of the test server in `PGPASSWORD`.
async fn run_printed(out: &Value, base: &str) {
    let argv: Vec<&str> = out["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let password = url::Url::parse(base)
        .unwrap()
        .password()
        .unwrap_or_default()
        .to_string();
    let ran = Command::new(argv[0])
        .args(&argv[1..])
        .env("PGPASSWORD", password)
        .output()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): install the PostgreSQL client tools (apt-get install postgresql-client)",
                argv[0]
            )
        });
    assert!(
        ran.status.success(),
        "{} failed: {}",
        out["shell"],
        String::from_utf8_lossy(&ran.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_the_printed_pg_dump_and_pg_restore_commands_carry_every_acknowledged_point() {
    let Some(base) = postgres_base() else {
        eprintln!("SKIPPED: set DEVICECLOUD_TEST_DATABASE_URL to run the PostgreSQL backup commands");
        return;
    };
    let files = Dir::new("pg");
    let live = Store {
        data_dir: files.join("live"),
        database_url: Some(fresh_postgres(&base, "live").await),
        env: Vec::new(),
    };
    let dump = files.join("devicecloud.dump");
    let (ingested, out) = ingest_around(&live, async || {
        let out = live.admin_ok(&["backup", "--to", dump.to_str().unwrap()]).await;
        run_printed(&out, &base).await;
        out
    })
    .await;
    assert_eq!(out["backend"], "postgres");
    let shell = out["shell"].as_str().unwrap();
    assert!(shell.starts_with("pg_dump --format=custom --file "), "{shell}");
    let password = url::Url::parse(&base).unwrap().password().map(str::to_string);
    if let Some(password) = password.filter(|p| !p.is_empty()) {
        assert!(
            !out.to_string().contains(&format!(":{password}@")),
            "the password is printed: {out}"
        );
    }
    // The dump exists now, so the same name is refused.
    let refused = live.admin_refused(&["backup", "--to", dump.to_str().unwrap()]).await;
    assert!(refused.contains("already exists"), "{refused}");

    let restored = Store {
        data_dir: files.join("restored"),
        database_url: Some(fresh_postgres(&base, "restored").await),
        env: Vec::new(),
    };
    let out = restored.admin_ok(&["restore", "--from", dump.to_str().unwrap()]).await;
    assert!(
        out["shell"].as_str().unwrap().starts_with("pg_restore --no-owner"),
        "{out}"
    );
    run_printed(&out, &base).await;
    // The serve of the restored store needs the key the webhook secrets were sealed with.
    std::fs::create_dir_all(&restored.data_dir).unwrap();
    std::fs::copy(live.data_dir.join("secret.key"), restored.data_dir.join("secret.key")).unwrap();
    let points = check_restored(&restored.url(), &ingested.acked).await;
    check_served(&restored, &ingested, points).await;
    // A file that is not a dump is refused before anything is printed.
    let refused = restored
        .admin_refused(&[
            "restore",
            "--from",
            files.join("restored").join("secret.key").to_str().unwrap(),
        ])
        .await;
    assert!(refused.contains("is not a pg_dump archive"), "{refused}");
}

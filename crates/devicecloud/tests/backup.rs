//! `devicecloud admin backup` and `admin restore` as an operator runs them (docs/operations.md,
//! "Backup and restore"), over the real binary and real MQTT: a backup taken while gateways
//! publish holds every point acknowledged before it began, with rollups that agree, and a store
//! restored from it serves them; a backup never overwrites, a restore only fills an empty data
//! dir, never beside a running `serve`, and only from a devicecloud backup. On PostgreSQL
//! (`DEVICECLOUD_TEST_DATABASE_URL`) the printed `pg_dump` and `pg_restore` commands are run.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use devicecloud_protocol::{Measurement, ModuleKind, Timestamp, measurements_payload};
use devicecloud_simulator::Provisioner;
use devicecloud_store::{Backend, Db};
use rumqttc::{AsyncClient, ConnectReturnCode, Event, MqttOptions, Packet, QoS};
use serde_json::Value;
use tokio::process::Command;

mod common;

use common::{Credentials, Dir, Store, fresh_postgres};
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
        ["backend", "store", "backup", "bytes", "took_ms", "secret_key"],
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
    #[cfg(unix)]
    assert_eq!((mode(&file), mode(&key_copy)), (0o600, 0o600));
    // Nothing but the backup and its key: no temporary file left behind.
    assert_eq!(std::fs::read_dir(&backups.0).unwrap().count(), 2);

    let restored_dir = Dir::new("restored");
    let restored = Store::sqlite(&restored_dir);
    let out = restored.admin_ok(&["restore", "--from", file.to_str().unwrap()]).await;
    assert_eq!(out["backend"], "sqlite");
    assert_eq!(out["store"], restored_dir.join("devicecloud.db").to_str().unwrap());
    assert_eq!(out["secret_key"], "restored");
    assert_eq!(out["backup_migration"], out["migration"]);
    assert_eq!(
        std::fs::read(restored_dir.join("secret.key")).unwrap(),
        std::fs::read(live_dir.join("secret.key")).unwrap()
    );
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

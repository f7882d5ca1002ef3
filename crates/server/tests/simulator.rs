//! The simulated fleet against the real service: GO, CORE and PLUS gateways stream
//! measurements of their assets, announce those assets, and GO modules that power off and on
//! close and open data sessions (docs/gateway-protocol.md, "Messages").

mod common;

use std::time::Duration;

use common::TestApp;
use devicecloud_protocol::ModuleKind;
use devicecloud_simulator::{Fleet, FleetOptions, Provisioner};
use devicecloud_store::{Backend, Db};

/// One integer of a query on either database.
macro_rules! scalar {
    ($db:expr, $sql:expr, $($bind:expr),*) => {
        match $db {
            Db::Sqlite(pool, ..) => sqlx::query_scalar::<_, i64>($sql)$(.bind($bind))*.fetch_one(pool).await.unwrap(),
            Db::Postgres(pool) => sqlx::query_scalar::<_, i64>($sql)$(.bind($bind))*.fetch_one(pool).await.unwrap(),
        }
    };
}

#[tokio::test]
async fn a_fleet_streams_and_go_modules_cycle_their_data_sessions() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let provisioner = Provisioner::new(&app.base, &admin);
    let group = provisioner.create_group("fleet").await.unwrap();
    let specs = provisioner.fleet(&group, "FLEET", 3).await.unwrap();
    let kinds: Vec<ModuleKind> = specs.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, [ModuleKind::Go, ModuleKind::Core, ModuleKind::Plus]);
    let go = specs[0].id.clone().unwrap();
    let mut options = FleetOptions::new(app.mqtt_addr, Duration::from_millis(100));
    options.power_cycle = Some(Duration::from_millis(700));
    let fleet = Fleet::start(specs, options);
    assert!(fleet.wait_connected(3, Duration::from_secs(20)).await);
    // The GO module turns off (session closed) and on again (a new session).
    assert!(
        fleet
            .wait_until(Duration::from_secs(20), |s| s.power_cycles >= 1
                && s.connects >= 4
                && s.connected == 3)
            .await,
        "{:?}",
        fleet.stats()
    );
    fleet.stop().await;

    let db = &app.state.db;
    let closed = scalar!(
        db,
        "SELECT COUNT(*) FROM data_sessions WHERE id_physical_device = $1 AND \"end\" IS NOT NULL",
        &go
    );
    let sessions = scalar!(
        db,
        "SELECT COUNT(*) FROM data_sessions WHERE id_physical_device = $1",
        &go
    );
    assert!(closed >= 1 && sessions >= 2, "closed {closed} of {sessions} sessions");
    // Assets behind the gateways: GO sensor, CORE and PLUS flow meters, two PLUS Z-wave nodes.
    let assets = scalar!(
        db,
        "SELECT COUNT(*) FROM physical_devices WHERE id_group = $1 AND id_parent IS NOT NULL",
        &group
    );
    assert_eq!(assets, 5);
    let zwave = scalar!(
        db,
        "SELECT COUNT(*) FROM physical_devices WHERE id_group = $1 AND id_device_type = 'zwave'",
        &group
    );
    assert_eq!(zwave, 2);
    // Every gateway and every asset has data.
    let sources = scalar!(
        db,
        "SELECT COUNT(DISTINCT c.source_device) FROM containers c JOIN raw_points r ON r.container_key = c.container_key \
         WHERE c.id_group = $1",
        &group
    );
    assert_eq!(sources, 8);
    // GO points belong to sessions.
    let in_sessions = scalar!(
        db,
        "SELECT COUNT(*) FROM raw_points r JOIN containers c ON c.container_key = r.container_key \
         WHERE c.source_device = $1 AND r.session_key IS NOT NULL",
        &go
    );
    assert!(in_sessions > 0);
}

#[tokio::test]
async fn gateways_send_their_history_before_live_data_but_go_modules_do_not() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let provisioner = Provisioner::new(&app.base, &admin);
    let group = provisioner.create_group("history").await.unwrap();
    let specs = provisioner.fleet(&group, "HIST", 2).await.unwrap();
    let (go, core) = (specs[0].id.clone().unwrap(), specs[1].id.clone().unwrap());
    let mut options = FleetOptions::new(app.mqtt_addr, Duration::ZERO);
    options.history = Some(devicecloud_simulator::History {
        span: Duration::from_secs(3600),
        step: Duration::from_secs(300),
    });
    let fleet = Fleet::start(specs, options);
    // Connected counts once the history is acknowledged.
    assert!(fleet.wait_connected(2, Duration::from_secs(20)).await);
    fleet.stop().await;
    let db = &app.state.db;
    let now = devicecloud_store::unix_now();
    // Twelve readings, 5 minutes apart, the oldest an hour ago, for the CORE module's own
    // temperature (datatype 1).
    let of_core = "SELECT {} FROM raw_points r JOIN containers c ON c.container_key = r.container_key \
                   WHERE c.source_device = $1 AND c.datatype = 1";
    let count = scalar!(db, sqlx::AssertSqlSafe(of_core.replace("{}", "COUNT(*)")), &core);
    let first = match db.backend() {
        Backend::Sqlite => "MIN(r.seconds)",
        Backend::Postgres => "MIN(r.time_us) / 1000000",
    };
    let oldest = scalar!(db, sqlx::AssertSqlSafe(of_core.replace("{}", first)), &core);
    assert_eq!(count, 12);
    assert!(
        (now - 3600 - 5..=now - 3600 + 60).contains(&oldest),
        "oldest {oldest}, now {now}"
    );
    let go_points = scalar!(
        db,
        "SELECT COUNT(*) FROM raw_points r JOIN containers c ON c.container_key = r.container_key WHERE c.source_device = $1",
        &go
    );
    assert_eq!(go_points, 0);
}

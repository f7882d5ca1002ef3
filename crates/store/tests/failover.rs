//! What the store does when its PostgreSQL primary goes away and comes back as something else,
//! as in a failover: the pooled connections are cut, then the server they reach refuses writes
//! (a demoted primary, now a standby), then a writable primary answers again. Played on one
//! server: its backends terminated, then the database set read-only by default, then not.
//! PostgreSQL only (`DEVICECLOUD_TEST_DATABASE_URL`); the real failover under Patroni is in
//! `crates/devicecloud/tests/patroni.rs`.

mod common;

use std::time::{Duration, Instant};

use devicecloud_store::groups::{self, NewGroup};
use devicecloud_store::{Db, StoreError};

const GROUP: NewGroup<'static> = NewGroup {
    label: "Plant",
    r#type: "0",
    subtype: "",
    id_country: None,
};

/// Runs `sql` on the server's maintenance database, apart from the store's pool.
async fn as_admin(sql: String) {
    let base = std::env::var("DEVICECLOUD_TEST_DATABASE_URL").unwrap();
    let admin = sqlx::PgPool::connect(&base).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&admin).await.unwrap();
    admin.close().await;
}

#[tokio::test]
async fn a_demoted_primary_answers_unavailable_and_its_connections_are_dropped() {
    let store = common::store("failover").await;
    let Db::Postgres(pool) = &store.db else {
        eprintln!("PostgreSQL only: set DEVICECLOUD_TEST_DATABASE_URL");
        return;
    };
    let name: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(pool)
        .await
        .unwrap();
    let requests = store.db.for_requests(Duration::from_millis(1500), 4);
    groups::create(&requests, &GROUP, 1).await.unwrap();

    // The primary goes: every session of the database is cut.
    as_admin(format!("ALTER DATABASE {name} SET default_transaction_read_only = on")).await;
    as_admin(format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()"
    ))
    .await;
    let cut = groups::create(&requests, &GROUP, 2).await.unwrap_err();
    assert!(matches!(cut, StoreError::Unavailable(_)), "{cut:?}");
    assert!(devicecloud_store::primary::suspected());

    // What answers now refuses writes: no connection to it is handed out, so a write waits its
    // turn and answers 503 (a timeout), never a read-only error from a pooled connection.
    let refused = groups::create(&requests, &GROUP, 3).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::Timeout(_) | StoreError::Unavailable(_)),
        "{refused:?}"
    );

    // A writable primary again: the next write goes through at once.
    as_admin(format!("ALTER DATABASE {name} RESET default_transaction_read_only")).await;
    let started = Instant::now();
    let row = groups::create(&requests, &GROUP, 4).await.unwrap();
    assert_eq!(row.created_at, 4);
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
}

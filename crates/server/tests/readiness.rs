//! `/readyz` takes a write (docs/operations.md, "Probes"): a store that answers but cannot be
//! written (here a trigger refuses the probe's write, as a full disk would) reports not ready,
//! and ready again once it can be written.

mod common;

use std::time::Duration;

use common::{TestApp, send};
use devicecloud_store::Db;

/// Makes the store refuse the probe's writes, or take them again.
async fn refuse_writes(db: &Db, refuse: bool) {
    let statements: &[&str] = match (db, refuse) {
        (Db::Sqlite(..), true) => &[
            "CREATE TRIGGER refuse_probe BEFORE INSERT ON readiness_probe BEGIN SELECT RAISE(ABORT, 'disk full'); END",
            "CREATE TRIGGER refuse_probe_update BEFORE UPDATE ON readiness_probe BEGIN SELECT RAISE(ABORT, 'disk full'); END",
        ],
        (Db::Sqlite(..), false) => &["DROP TRIGGER refuse_probe", "DROP TRIGGER refuse_probe_update"],
        (Db::Postgres(_), true) => &[
            "CREATE FUNCTION refuse_probe() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$",
            "CREATE TRIGGER refuse_probe BEFORE INSERT OR UPDATE ON readiness_probe FOR EACH ROW EXECUTE FUNCTION refuse_probe()",
        ],
        (Db::Postgres(_), false) => &[
            "DROP TRIGGER refuse_probe ON readiness_probe",
            "DROP FUNCTION refuse_probe()",
        ],
    };
    for sql in statements {
        match db {
            Db::Sqlite(p, ..) => sqlx::raw_sql(sqlx::AssertSqlSafe(*sql)).execute(p).await.map(|_| ()),
            Db::Postgres(p) => sqlx::raw_sql(sqlx::AssertSqlSafe(*sql)).execute(p).await.map(|_| ()),
        }
        .unwrap();
    }
}

#[tokio::test]
async fn a_store_that_cannot_be_written_is_not_ready() {
    let app = TestApp::spawn().await;
    send(app.http.get(app.url("/readyz"))).await.expect(200);
    refuse_writes(&app.running.pools.writer, true).await;
    // A probe answers for a second; the next one writes again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let reply = send(app.http.get(app.url("/readyz"))).await;
    assert_eq!(reply.status, 503, "{}", reply.text);
    common::assert_error_exact(
        &reply.json(),
        503,
        "Service Unavailable",
        "The store cannot be reached or written.",
    );
    // Reads still work, and the process is live.
    send(app.http.get(app.url("/healthz"))).await.expect(200);
    refuse_writes(&app.running.pools.writer, false).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    send(app.http.get(app.url("/readyz"))).await.expect(200);
}

//! What the store's tests share: a fresh store on SQLite, or on PostgreSQL when
//! `DEVICECLOUD_TEST_DATABASE_URL` names a server (a database of its own per test), and plain
//! statements with integer values on either.

#![allow(dead_code)]

use devicecloud_store::devices::{self, NewGateway};
use devicecloud_store::groups::{self, NewGroup};
use devicecloud_store::ingest::{self, SeriesId};
use devicecloud_store::{Db, new_id};

/// A fresh, migrated store, whose SQLite files go with it.
pub struct TestStore {
    pub db: Db,
    dir: Option<std::path::PathBuf>,
}

impl std::ops::Deref for TestStore {
    type Target = Db;
    fn deref(&self) -> &Db {
        &self.db
    }
}

impl Drop for TestStore {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A fresh, migrated store; `tag` names the PostgreSQL database, unique per test.
pub async fn store(tag: &str) -> TestStore {
    match std::env::var("DEVICECLOUD_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
    {
        Some(base) => {
            let name = format!("dc_test_{tag}_{}", std::process::id());
            let admin = sqlx::PgPool::connect(&base).await.unwrap();
            for sql in [
                format!("DROP DATABASE IF EXISTS {name}"),
                format!("CREATE DATABASE {name}"),
            ] {
                sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&admin).await.unwrap();
            }
            let (server, _) = base.rsplit_once('/').unwrap();
            let db = Db::connect(&format!("{server}/{name}")).await.unwrap();
            TestStore { db, dir: None }
        }
        None => {
            let dir = std::env::temp_dir().join(format!("dc-store-{}", new_id()));
            std::fs::create_dir_all(&dir).unwrap();
            let db = Db::connect(&format!("sqlite://{}", dir.join("store.db").display()))
                .await
                .unwrap();
            TestStore { db, dir: Some(dir) }
        }
    }
}

/// Runs `sql` with integer `values` on either database.
pub async fn execute(db: &Db, sql: &str, values: &[i64]) {
    macro_rules! run {
        ($pool:expr) => {{
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.to_string()));
            for value in values {
                query = query.bind(*value);
            }
            query.execute($pool).await.map(|_| ()).unwrap()
        }};
    }
    match db {
        Db::Sqlite(p, ..) => run!(p),
        Db::Postgres(p) => run!(p),
    }
}

/// Runs `sql` with one text value on either database.
pub async fn execute_text(db: &Db, sql: &str, value: &str) {
    let query = sqlx::query(sqlx::AssertSqlSafe(sql.to_string())).bind(value.to_string());
    match db {
        Db::Sqlite(p, ..) => query.execute(p).await.map(|_| ()).unwrap(),
        Db::Postgres(p) => sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
            .bind(value.to_string())
            .execute(p)
            .await
            .map(|_| ())
            .unwrap(),
    }
}

/// The first column of the first row of `sql` with integer `values`: an integer or NULL.
pub async fn integer(db: &Db, sql: &str, values: &[i64]) -> Option<i64> {
    macro_rules! run {
        ($pool:expr) => {{
            let mut query = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()));
            for value in values {
                query = query.bind(*value);
            }
            query.fetch_one($pool).await.unwrap()
        }};
    }
    match db {
        Db::Sqlite(p, ..) => run!(p),
        Db::Postgres(p) => run!(p),
    }
}

/// One series: a new group `name` holding a gateway of `kind` with serial `name`, and the
/// series of `datatype` of that gateway. Returns the group, the gateway and the series key.
pub async fn series(db: &Db, name: &str, kind: &str, datatype: i64) -> (String, String, i64) {
    let new_group = NewGroup {
        label: name,
        r#type: "1",
        subtype: "",
        id_country: None,
    };
    let group = groups::create(db, &new_group, 0).await.unwrap();
    let gateway = NewGateway {
        id_group: &group.id_group,
        serial_hardware: name,
        kind,
        label: "",
        expected_offline_interval: 600,
    };
    let device = devices::provision(db, &gateway, "hash", 0).await.unwrap();
    let id = SeriesId {
        id_group: group.id_group.clone(),
        source_device: device.id_physical_device.clone(),
        datatype,
    };
    let key = ingest::container_key(db, &id, usize::MAX).await.unwrap().unwrap();
    (group.id_group, device.id_physical_device, key)
}

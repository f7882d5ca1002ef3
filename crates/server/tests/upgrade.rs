//! A store made before the account and webhook credential migrations (0007, 0008) is carried
//! forward by the next start, on SQLite and PostgreSQL: its token pair keeps working (and its
//! refresh stays bounded by the pair's first grant), its accounts are enabled, and its webhook
//! credentials, written in clear by the earlier release, are sealed and still sign deliveries.
//! A store made before retention (0009) keeps every point and rollup; on PostgreSQL they move
//! into time partitions. A store of the schema before 0011 keeps every point to the
//! microsecond; on PostgreSQL its partitions keep their names and days, and the rows ingest
//! updates leave room on their pages. Memberships made before they carried their group's times
//! (0013) and were counted per user (0014) list the same groups, in the same order, with the
//! same count, which every later grant, removal and deletion keeps right.

mod common;

use std::borrow::Cow;
use std::time::Duration;

use common::webhook_receiver::{Receiver, assert_signed, header};
use common::{TempDir, TestApp, fresh_db_url, send};
use devicecloud_engine::auth::secrets::{hash_password, random_token, token_hash};
use devicecloud_server::Settings;
use devicecloud_store::unix_now;
use reqwest::Method;
use serde_json::json;

/// The last migration of the release before the credential migrations.
const EARLIER_RELEASE: i64 = 6;

/// Runs `statements` (each with its text binds, cast where a column is a number) on the store
/// at `url`.
async fn execute(url: &str, statements: &[(&str, Vec<String>)]) {
    macro_rules! run {
        ($pool:expr) => {
            for (sql, binds) in statements {
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.to_string()));
                for bind in binds {
                    query = query.bind(bind.clone());
                }
                query.execute(&$pool).await.unwrap();
            }
        };
    }
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        run!(pool);
        pool.close().await;
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        run!(pool);
        pool.close().await;
    }
}

/// The schema as the earlier release left it: the migrations up to [`EARLIER_RELEASE`].
async fn earlier_schema(url: &str) {
    schema_up_to(url, EARLIER_RELEASE).await
}

/// The schema of the migrations up to `last`.
async fn schema_up_to(url: &str, last: i64) {
    macro_rules! migrate {
        ($migrator:expr, $pool:expr) => {{
            let mut migrator = $migrator;
            let earlier: Vec<_> = migrator
                .migrations
                .iter()
                .filter(|m| m.version <= last)
                .cloned()
                .collect();
            assert_eq!(earlier.len() as i64, last);
            migrator.migrations = Cow::Owned(earlier);
            migrator.run(&$pool).await.unwrap();
            $pool.close().await;
        }};
    }
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        migrate!(sqlx::migrate!("../store/migrations/postgres"), pool);
    } else {
        let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
        let pool = sqlx::SqlitePool::connect_with(options.create_if_missing(true))
            .await
            .unwrap();
        migrate!(sqlx::migrate!("../store/migrations/sqlite"), pool);
    }
}

#[tokio::test]
async fn a_store_of_the_earlier_release_keeps_its_tokens_and_seals_its_webhook_credentials() {
    let dir = TempDir::new();
    let url = fresh_db_url(&dir.0).await;
    earlier_schema(&url).await;

    // Rows as the earlier release wrote them.
    let (client_id, client_secret) = ("client-1".to_string(), random_token());
    let (access, refresh) = (random_token(), random_token());
    let (secret, authorization) = ("s".repeat(32), "Bearer clear-text-credential".to_string());
    let (receiver, hook_url) = Receiver::start(Vec::new()).await;
    let now = unix_now();
    let granted = (now - 3_600).to_string();
    execute(
        &url,
        &[
            (
                "INSERT INTO accounts (id_user, username, password_hash, is_admin, created_at) VALUES ($1, $2, $3, 1, CAST($4 AS BIGINT))",
                vec!["user-1".into(), "admin@example.com".into(), hash_password("correct horse").unwrap(), now.to_string()],
            ),
            (
                "INSERT INTO api_clients (client_id, name, secret_hash, created_at) VALUES ($1, 'earlier', $2, CAST($3 AS BIGINT))",
                vec![client_id.clone(), token_hash(&client_secret), now.to_string()],
            ),
            (
                "INSERT INTO access_tokens (token_hash, refresh_hash, id_user, client_id, created_at, expires_at) \
                 VALUES ($1, $2, 'user-1', $3, CAST($4 AS BIGINT), CAST($5 AS BIGINT))",
                vec![token_hash(&access), token_hash(&refresh), client_id.clone(), granted, (now + 86_400).to_string()],
            ),
            ("INSERT INTO groups (id_group, label, created_at) VALUES ('group-1', 'Earlier', CAST($1 AS BIGINT))", vec![now.to_string()]),
            (
                "INSERT INTO webhooks (id_webhook, id_group, label, forwarding_type, formatter, url, \
                 authorization_header, secret, is_active, created_at, updated_at) \
                 VALUES ('hook-1', 'group-1', 'earlier', 'measurements', 'json', $1, $2, $3, 1, CAST($4 AS BIGINT), CAST($4 AS BIGINT))",
                vec![hook_url, authorization.clone(), secret.clone(), now.to_string()],
            ),
        ],
    )
    .await;

    let settings = Settings {
        webhook_allow_private: true,
        secret_key_file: Some(dir.0.join("secret.key")),
        ..Settings::default()
    };
    let app = TestApp::start(dir, url, settings, Some((client_id, client_secret))).await;

    // The token pair of the earlier release still works, and so does its refresh.
    let me = send(app.get("/api/v2/user/me", &access)).await.expect(200);
    assert_eq!(me.json()["username"], "admin@example.com");
    assert_eq!(me.json()["disabled"], false);
    // (The refresh grant is sent with the access token it extends.)
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh.as_str()),
        ("client_id", app.client_id.as_str()),
        ("client_secret", app.client_secret.as_str()),
    ];
    let refreshed = send(app.http.post(app.url("/oauth2/token")).bearer_auth(&access).form(&form)).await;
    assert_eq!(refreshed.status, 200, "{}", refreshed.text);

    // Its webhook credentials are sealed at start …
    let mut sealed = None;
    for _ in 0..100 {
        let stored = devicecloud_store::webhooks::stored_secrets(&app.state.db)
            .await
            .unwrap();
        let (_, stored_secret, stored_authorization) = stored.into_iter().find(|(id, _, _)| id == "hook-1").unwrap();
        if stored_secret != secret {
            sealed = Some((stored_secret, stored_authorization));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (stored_secret, stored_authorization) = sealed.expect("the clear credentials were not sealed at start");
    assert!(!stored_secret.contains(&secret));
    assert!(
        !stored_authorization
            .unwrap_or_default()
            .contains("clear-text-credential")
    );

    // … and still sign and authorise its deliveries.
    let token = refreshed.json()["access_token"].as_str().unwrap_or(&access).to_string();
    let body = json!({"id_group": "group-1", "serial_hardware": "GW-EARLIER", "kind": "CORE"});
    let gateway = send(app.request(Method::POST, "/api/v2/physical-device", &token).json(&body))
        .await
        .expect(201);
    let device_token = gateway.json()["device_token"].as_str().unwrap().to_string();
    let request = app
        .http
        .post(app.url("/gateway/v1/measurements"))
        .basic_auth("GW-EARLIER", Some(&device_token))
        .json(&json!([{"ts": 1_763_726_400, "values": {"1": 5}}]));
    send(request).await.expect(200);
    let got = receiver.until("the point", |got| !got.is_empty()).await;
    assert_signed(&got[0], &secret);
    assert_eq!(header(&got[0], "authorization"), authorization);
}

/// The last migration before retention and time partitions.
const BEFORE_RETENTION: i64 = 8;

/// Statements making group `group-1` with device `device-1` and its series 1 (`series-1`).
fn one_series() -> Vec<(&'static str, Vec<String>)> {
    vec![
        (
            "INSERT INTO groups (id_group, label, created_at) VALUES ('group-1', 'Before', 0)",
            vec![],
        ),
        (
            "INSERT INTO physical_devices (id_physical_device, serial_hardware, id_group, id_device_type, created_at) \
             VALUES ('device-1', 'BEFORE-1', 'group-1', 'CORE', 0)",
            vec![],
        ),
        (
            "INSERT INTO containers (container_key, id_container_data_latest, id_group, source_device, datatype) \
             VALUES (1, 'series-1', 'group-1', 'device-1', 12)",
            vec![],
        ),
    ]
}

#[tokio::test]
async fn a_store_made_before_retention_keeps_every_point_and_rollup() {
    let dir = TempDir::new();
    let url = fresh_db_url(&dir.0).await;
    schema_up_to(&url, BEFORE_RETENTION).await;
    let now = unix_now();
    let mut statements = one_series();
    // A point a day over 40 days, and one from 1999 (older than any partition).
    let mut times: Vec<i64> = (0..40).map(|d| now - d * 86_400).collect();
    times.push(915_148_800);
    for t in &times {
        statements.push((
            "INSERT INTO raw_points (container_key, seconds, microseconds, value) VALUES (1, CAST($1 AS BIGINT), 0, 1.5)",
            vec![t.to_string()],
        ));
        for (table, width) in [("rollup_minute", 60), ("rollup_hour", 3_600), ("rollup_day", 86_400)] {
            let sql = match table {
                "rollup_minute" => "INSERT INTO rollup_minute VALUES (1, CAST($1 AS BIGINT), 1.5, 1.5, 1.5, 1)",
                "rollup_hour" => "INSERT INTO rollup_hour VALUES (1, CAST($1 AS BIGINT), 1.5, 1.5, 1.5, 1)",
                _ => "INSERT INTO rollup_day VALUES (1, CAST($1 AS BIGINT), 1.5, 1.5, 1.5, 1)",
            };
            statements.push((sql, vec![(t.div_euclid(width) * width).to_string()]));
        }
    }
    execute(&url, &statements).await;

    // The packer would move these old points into chunks at once: this test looks at their rows.
    let app = TestApp::start(dir, url.clone(), rows_kept(), None).await;
    let (_, admin) = app.admin().await;
    let data = send(app.get("/api/v2/data?filter[id_group]=group-1&per-page=1000", &admin))
        .await
        .expect(200)
        .json();
    let mut got: Vec<i64> = data["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["timestamp_seconds"].as_i64().unwrap())
        .collect();
    got.sort_unstable();
    times.sort_unstable();
    assert_eq!(got, times);
    let days = send(app.get(
        "/api/v2/data-downsampled?filter[id_group]=group-1&filter[timestamp_seconds][gt]=0&per-page=10000",
        &admin,
    ))
    .await
    .expect(200)
    .json();
    let counted: i64 = days["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count_val"].as_i64().unwrap())
        .sum();
    assert_eq!(counted, times.len() as i64);

    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        for table in ["raw_points", "rollup_minute", "rollup_hour", "rollup_day"] {
            let parts: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pg_inherits WHERE inhparent = $1::regclass")
                .bind(table)
                .fetch_one(&pool)
                .await
                .unwrap();
            assert!(parts >= 2, "{table}: {parts} partitions");
            let stray: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}_default")))
                .fetch_one(&pool)
                .await
                .unwrap();
            assert_eq!(stray, 1, "{table}: only the point of 1999 is outside every partition");
        }
        let raw_parts: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM pg_inherits WHERE inhparent = 'raw_points'::regclass")
                .fetch_one(&pool)
                .await
                .unwrap();
        assert!(
            raw_parts > 40,
            "one partition a day with points, the default, and the days ahead: {raw_parts}"
        );
        pool.close().await;
    }
}

/// The last migration before PostgreSQL kept a raw point's time in one column (0011).
const BEFORE_POINT_TIME: i64 = 10;

/// The (seconds, microseconds) of the points `GET /api/v2/data` lists for `filter`, sorted.
async fn listed_times(app: &TestApp, admin: &str, filter: &str) -> Vec<(i64, i64)> {
    let data = send(app.get(
        &format!("/api/v2/data?filter[id_group]=group-1{filter}&per-page=1000"),
        admin,
    ))
    .await
    .expect(200)
    .json();
    let mut times: Vec<(i64, i64)> = data["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["timestamp_seconds"].as_i64().unwrap(),
                p["microseconds"].as_i64().unwrap(),
            )
        })
        .collect();
    times.sort_unstable();
    times
}

#[tokio::test]
async fn a_store_of_the_previous_schema_keeps_every_point_to_the_microsecond() {
    let dir = TempDir::new();
    let url = fresh_db_url(&dir.0).await;
    schema_up_to(&url, BEFORE_POINT_TIME).await;
    let now = unix_now();
    let recent = now - 3_600;
    let slot = recent.div_euclid(86_400) * 86_400;
    let mut times = vec![
        (recent, 0),
        (recent, 250_000),
        (recent, 999_999),
        (now - 2 * 86_400, 123_456),
        (915_148_800, 1), // 1999: older than any partition
    ];
    let partition = format!(
        "DO $$ BEGIN EXECUTE format('CREATE TABLE %I PARTITION OF raw_points FOR VALUES FROM (%s) TO (%s)', \
         'raw_points_' || to_char(to_timestamp({slot}) AT TIME ZONE 'UTC', 'YYYYMMDD'), {slot}, {end}); END $$",
        end = slot + 86_400
    );
    let mut statements = one_series();
    // The partition a running service made for the day of the recent points.
    if url.starts_with("postgres") {
        statements.push((&partition, vec![]));
    }
    // The points and their rollups (the data collection counts the day rollups).
    let mut buckets = std::collections::BTreeMap::new();
    for (seconds, micros) in &times {
        statements.push((
            "INSERT INTO raw_points (container_key, seconds, microseconds, value) \
             VALUES (1, CAST($1 AS BIGINT), CAST($2 AS BIGINT), 1.5)",
            vec![seconds.to_string(), micros.to_string()],
        ));
        for (table, width) in [("rollup_minute", 60), ("rollup_hour", 3_600), ("rollup_day", 86_400)] {
            *buckets.entry((table, seconds.div_euclid(width) * width)).or_insert(0) += 1;
        }
    }
    let rollups: Vec<String> = buckets
        .iter()
        .map(|((table, bucket), count)| {
            format!("INSERT INTO {table} VALUES (1, {bucket}, 1.5, 1.5, 1.5 * {count}, {count})")
        })
        .collect();
    statements.extend(rollups.iter().map(|sql| (sql.as_str(), vec![])));
    execute(&url, &statements).await;

    // The packer would move these old points into chunks at once: this test looks at their rows.
    let app = TestApp::start(dir, url.clone(), rows_kept(), None).await;
    let (_, admin) = app.admin().await;
    times.sort_unstable();
    assert_eq!(listed_times(&app, &admin, "").await, times);
    // A whole second and a fraction are still found by their filters.
    assert_eq!(
        listed_times(&app, &admin, &format!("&filter[timestamp_seconds]={recent}")).await,
        [(recent, 0), (recent, 250_000), (recent, 999_999)]
    );
    assert_eq!(
        listed_times(&app, &admin, "&filter[microseconds]=123456").await,
        [(now - 2 * 86_400, 123_456)]
    );

    if url.starts_with("postgres") {
        use devicecloud_store::partitions;
        use devicecloud_store::retention::Kind;
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        let raw = partitions::list(&mut pool.acquire().await.unwrap(), Kind::Raw)
            .await
            .unwrap();
        let made = raw
            .iter()
            .find(|p| p.start == slot)
            .unwrap_or_else(|| panic!("the day's partition kept its range: {raw:?}"));
        assert_eq!(made.end, slot + 86_400);
        let held: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {}", made.name)))
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(held, 3, "the recent points are in their day's partition");
        let stray: Vec<i64> = sqlx::query_scalar("SELECT time_us FROM raw_points_default")
            .fetch_all(&pool)
            .await
            .unwrap();
        assert_eq!(stray, [915_148_800_000_001]);
        // Rows updated by every ingest transaction leave room for their next version: the
        // tables the migration altered and the rollup partitions the service made at start.
        let filled_to = |table: String| {
            let pool = pool.clone();
            async move {
                let options: Option<Vec<String>> =
                    sqlx::query_scalar("SELECT reloptions::text[] FROM pg_class WHERE relname = $1")
                        .bind(&table)
                        .fetch_one(&pool)
                        .await
                        .unwrap();
                (table, options.unwrap_or_default())
            }
        };
        let minute = partitions::list(&mut pool.acquire().await.unwrap(), Kind::Minute)
            .await
            .unwrap();
        let made_at_start = minute.last().expect("minute partitions made at start").name.clone();
        for table in ["containers".to_string(), "physical_devices".to_string(), made_at_start] {
            let (table, options) = filled_to(table).await;
            assert_eq!(options, ["fillfactor=50"], "{table}");
        }
        pool.close().await;
    }
}

/// The last migration before memberships carried their group's times.
const BEFORE_MEMBERSHIP_TIMES: i64 = 12;

/// The ids of a group page, in order, and its total count.
async fn group_page(app: &TestApp, path: &str, token: &str) -> (Vec<String>, String) {
    let page = send(app.get(path, token)).await.expect(200);
    let ids = page.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id_group"].as_str().unwrap().to_string())
        .collect();
    (
        ids,
        page.header("x-pagination-total-count").unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn a_member_sees_the_same_groups_after_memberships_carry_their_group_times() {
    let dir = TempDir::new();
    let url = fresh_db_url(&dir.0).await;
    schema_up_to(&url, BEFORE_MEMBERSHIP_TIMES).await;
    let mut statements: Vec<(&str, Vec<String>)> = vec![(
        "INSERT INTO accounts (id_user, username, password_hash, is_admin, created_at) VALUES ('user-1', 'member@example.com', $1, 0, 0)",
        vec![hash_password("member-password").unwrap()],
    )];
    // Created out of key order; `g-c` deleted; the user holds no role in `g-d`.
    for (id, created) in [("g-a", 300), ("g-b", 100), ("g-c", 200), ("g-d", 50)] {
        statements.push((
            "INSERT INTO groups (id_group, label, created_at) VALUES ($1, $1, CAST($2 AS BIGINT))",
            vec![id.to_string(), created.to_string()],
        ));
    }
    statements.push(("UPDATE groups SET deleted_at = 250 WHERE id_group = 'g-c'", vec![]));
    for id in ["g-a", "g-b", "g-c"] {
        statements.push((
            "INSERT INTO memberships (id_group, id_user, role) VALUES ($1, 'user-1', 'viewer')",
            vec![id.to_string()],
        ));
    }
    execute(&url, &statements).await;

    let app = TestApp::start(dir, url, Settings::default(), None).await;
    let (_, admin) = app.admin().await;
    let member = app.token("member@example.com", "member-password").await;

    // Carried forward: oldest first, the deleted group left out, counted alike.
    let (ids, total) = group_page(&app, "/api/v2/group", &member).await;
    assert_eq!((ids, total.as_str()), (vec!["g-b".to_string(), "g-a".to_string()], "2"));
    let (ids, _) = group_page(&app, "/api/v2/group?sort=-created_at", &member).await;
    assert_eq!(ids, ["g-a", "g-b"]);
    let (ids, total) = group_page(&app, "/api/v2/group?filter[label]=g-a", &member).await;
    assert_eq!((ids, total.as_str()), (vec!["g-a".to_string()], "1"));

    // Kept up to date: a role granted now, and a group deleted now.
    app.grant(&admin, "g-d", "user-1", "viewer").await;
    let (ids, total) = group_page(&app, "/api/v2/group", &member).await;
    assert_eq!(
        (ids, total.as_str()),
        (vec!["g-d".to_string(), "g-b".to_string(), "g-a".to_string()], "3")
    );
    send(app.request(Method::DELETE, "/api/v2/group/g-b", &admin))
        .await
        .expect(204);
    let (ids, total) = group_page(&app, "/api/v2/group?per-page=1&page=2", &member).await;
    assert_eq!((ids, total.as_str()), (vec!["g-a".to_string()], "2"));
    send(app.get("/api/v2/group/g-b", &member)).await.expect(404);
    // A role removed, then given again.
    send(app.request(Method::DELETE, "/api/v2/group/g-d/member/user-1", &admin))
        .await
        .expect(204);
    let (ids, total) = group_page(&app, "/api/v2/group", &member).await;
    assert_eq!((ids, total.as_str()), (vec!["g-a".to_string()], "1"));
    app.grant(&admin, "g-d", "user-1", "operator").await;
    app.grant(&admin, "g-d", "user-1", "viewer").await;
    let (ids, total) = group_page(
        &app,
        "/api/v2/group?filter[label][in][]=g-d&filter[label][in][]=g-b",
        &member,
    )
    .await;
    assert_eq!((ids, total.as_str()), (vec!["g-d".to_string()], "1"));
    let (_, total) = group_page(&app, "/api/v2/group", &member).await;
    assert_eq!(total, "2");
}

/// Settings under which the packer does not run during a test, so that points stay rows.
fn rows_kept() -> Settings {
    Settings {
        pack_interval: Duration::from_secs(86_400 * 365),
        pack_after: Duration::from_secs(100 * 365 * 86_400),
        ..Settings::default()
    }
}

//! The SQLite and PostgreSQL migrations describe the same schema: both sets are applied through
//! [`Db::connect`] to fresh databases and the schemas read back from the databases themselves
//! (not from the SQL text) are compared. Needs `DEVICECLOUD_TEST_DATABASE_URL` (CI sets it);
//! without it the test says it skipped and passes.
//!
//! What counts as the same:
//!
//! - Tables: the same names (SQLite's own `sqlite_*` tables and sqlx's `_sqlx_migrations` aside).
//! - Columns, by name (order aside), with the same nullability and the same kind of value:
//!   - SQLite's declared type is read by its affinity (sqlite.org/datatype3.html, 3.1), since
//!     that is all SQLite keeps of it: `INTEGER` and `BIGINT` are the same column there.
//!   - SQLite INTEGER (a 64-bit integer) is PostgreSQL `bigint` only: `integer` (32 bits) would
//!     refuse values SQLite takes, and the store binds every integer as `i64`.
//!   - SQLite REAL (an 8-byte float) is `double precision` only, not the 4-byte `real`.
//!   - SQLite TEXT is `text`, BLOB is `bytea`. Anything else (NUMERIC affinity, `varchar`,
//!     `integer`, …) is reported as a difference.
//!   - Nullability is what the database enforces: a SQLite column is NOT NULL if declared so,
//!     or if it is in the primary key of a `WITHOUT ROWID` table, or is an `INTEGER PRIMARY KEY`
//!     (the rowid); other SQLite primary-key columns do take NULL, unlike PostgreSQL's.
//! - Primary keys: the same columns in the same order.
//! - Indexes: named ones (`CREATE INDEX`) by name, those of `UNIQUE` constraints (whose names
//!   each database makes up) by table and columns; each with the same table, key columns or
//!   expressions in order, uniqueness, and partial-index predicate (present on both, and the
//!   same text once case, spaces, quotes and parentheses are set aside). The indexes behind
//!   primary keys are the primary keys above.
//!
//! Not compared: defaults, foreign keys and CHECK constraints, column order, and index sort
//! order or collation (none is used).
//!
//! Deliberate differences are listed in [`EXPECTED_DIFFERENCES`], each with its reason; the
//! test fails if one disappears too, so the list stays true.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{SystemTime, UNIX_EPOCH};

use devicecloud_store::Db;
use sqlx::{PgPool, SqlitePool};

/// Differences the schemas keep on purpose, as [`compare`] words them.
///
/// PostgreSQL's `0004_device_defaults.sql` made `last_data_at` and `signal` NOT NULL (DEFAULT 0)
/// after setting the NULLs to 0; SQLite cannot alter a column, so its `0004` only sets the NULLs
/// to 0 and the store always writes a value (docs/api.md, "Physical devices": both are non-null).
///
/// PostgreSQL's `0011_ingest_layout.sql` keeps a raw point's time in one column of microseconds,
/// `time_us`, where SQLite keeps `seconds` and `microseconds`: PostgreSQL's fixed-width, aligned
/// rows are 8 bytes narrower that way, SQLite's variable-length integers are not
/// (`store/src/point_time.rs` reads both).
const EXPECTED_DIFFERENCES: [&str; 7] = [
    "physical_devices.last_data_at: nullable on SQLite, NOT NULL on PostgreSQL",
    "physical_devices.signal: nullable on SQLite, NOT NULL on PostgreSQL",
    "raw_points.microseconds: only on SQLite",
    "raw_points.seconds: only on SQLite",
    "raw_points.time_us: only on PostgreSQL",
    "raw_points: primary key (container_key, seconds, microseconds) on SQLite, (container_key, time_us) on PostgreSQL",
    "index raw_points_session: Index { table: \"raw_points\", columns: [\"session_key\", \"seconds\"], unique: false, predicate: Some(\"session_keyisnotnull\") } on SQLite, Index { table: \"raw_points\", columns: [\"session_key\", \"time_us\"], unique: false, predicate: Some(\"session_keyisnotnull\") } on PostgreSQL",
];

#[derive(Clone, Debug, PartialEq, Eq)]
struct Column {
    /// The kind of value: "integer" (64-bit), "real" (8-byte float), "text" or "blob", or the
    /// database's own words for anything without an equivalent.
    kind: String,
    not_null: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Table {
    columns: BTreeMap<String, Column>,
    primary_key: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Index {
    table: String,
    /// Key columns or expressions, normalized by [`normalize`].
    columns: Vec<String>,
    unique: bool,
    /// The partial-index predicate, normalized by [`normalize`].
    predicate: Option<String>,
}

#[derive(Debug, Default)]
struct Schema {
    tables: BTreeMap<String, Table>,
    /// By name, or for a `UNIQUE` constraint by "unique constraint on table (columns)".
    indexes: BTreeMap<String, Index>,
}

/// Lower case, without spaces, double quotes or parentheses: `"end"` and `end`,
/// `(archived_at IS NULL)` and `archived_at IS NULL` read the same.
fn normalize(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '"' | '(' | ')'))
        .flat_map(char::to_lowercase)
        .collect()
}

fn constraint_key(table: &str, columns: &[String]) -> String {
    format!("unique constraint on {table} ({})", columns.join(", "))
}

/// The kind of a SQLite column, by the affinity of its declared type.
fn sqlite_kind(declared: &str) -> String {
    let t = declared.to_ascii_uppercase();
    let kind = if t.contains("INT") {
        "integer"
    } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
        "text"
    } else if t.is_empty() || t.contains("BLOB") {
        "blob"
    } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
        "real"
    } else {
        return format!("SQLite NUMERIC affinity ({declared})");
    };
    kind.to_string()
}

/// The kind of a PostgreSQL column, by `information_schema.columns.data_type`.
fn postgres_kind(data_type: &str) -> String {
    match data_type {
        "bigint" => "integer",
        "double precision" => "real",
        "text" => "text",
        "bytea" => "blob",
        other => return format!("PostgreSQL {other}"),
    }
    .to_string()
}

/// The key terms of a `CREATE INDEX` statement, as written between the parentheses after
/// `ON table`; SQLite keeps no other record of an expression's text.
fn index_terms(sql: &str) -> Vec<String> {
    let lower = sql.to_ascii_lowercase();
    let Some(on) = lower.find(" on ") else {
        return Vec::new();
    };
    let Some(open) = sql[on..].find('(').map(|i| on + i) else {
        return Vec::new();
    };
    let (mut depth, mut terms, mut current) = (0, Vec::new(), String::new());
    for c in sql[open + 1..].chars() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => break,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    terms.push(current);
    terms
}

async fn sqlite_schema(pool: &SqlitePool) -> Schema {
    let mut schema = Schema::default();
    let tables: Vec<(String, i64)> = sqlx::query_as(
        "SELECT name, wr FROM pragma_table_list WHERE schema = 'main' AND type = 'table' \
         AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_sqlx%' ESCAPE '\\' ORDER BY name",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (name, without_rowid) in tables {
        let columns: Vec<(String, String, i64, i64)> =
            sqlx::query_as("SELECT name, type, \"notnull\", pk FROM pragma_table_info($1) ORDER BY cid")
                .bind(&name)
                .fetch_all(pool)
                .await
                .unwrap();
        let mut key: Vec<(i64, String)> = columns.iter().filter(|c| c.3 > 0).map(|c| (c.3, c.0.clone())).collect();
        key.sort();
        let is_rowid_alias = |c: &(String, String, i64, i64)| {
            without_rowid == 0 && key.len() == 1 && c.3 == 1 && c.1.eq_ignore_ascii_case("INTEGER")
        };
        let mut table = Table {
            primary_key: key.iter().map(|k| k.1.clone()).collect(),
            ..Table::default()
        };
        for c in &columns {
            let not_null = c.2 != 0 || (c.3 > 0 && without_rowid != 0) || is_rowid_alias(c);
            table.columns.insert(
                c.0.clone(),
                Column {
                    kind: sqlite_kind(&c.1),
                    not_null,
                },
            );
        }
        let indexes: Vec<(String, i64, String, i64)> =
            sqlx::query_as("SELECT name, \"unique\", origin, partial FROM pragma_index_list($1)")
                .bind(&name)
                .fetch_all(pool)
                .await
                .unwrap();
        for (index, unique, origin, partial) in indexes {
            if origin == "pk" {
                continue;
            }
            let sql: Option<String> =
                sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = $1")
                    .bind(&index)
                    .fetch_one(pool)
                    .await
                    .unwrap();
            // On one line, so that keywords are found after any kind of white space.
            let sql = sql.map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "));
            let terms = sql.as_deref().map(index_terms).unwrap_or_default();
            let key_columns: Vec<(i64, Option<String>)> =
                sqlx::query_as("SELECT cid, name FROM pragma_index_info($1) ORDER BY seqno")
                    .bind(&index)
                    .fetch_all(pool)
                    .await
                    .unwrap();
            let columns: Vec<String> = key_columns
                .iter()
                .enumerate()
                .map(|(i, (_, column))| match column {
                    Some(column) => normalize(column),
                    // An expression: its text in the statement.
                    None => normalize(terms.get(i).map_or("?", String::as_str)),
                })
                .collect();
            let predicate = (partial != 0).then(|| {
                let sql = sql.clone().unwrap_or_default();
                let at = sql
                    .to_ascii_lowercase()
                    .rfind(" where ")
                    .expect("partial index has WHERE");
                normalize(&sql[at + " where ".len()..])
            });
            let id = if origin == "u" {
                constraint_key(&name, &columns)
            } else {
                index
            };
            schema.indexes.insert(
                id,
                Index {
                    table: name.clone(),
                    columns,
                    unique: unique != 0,
                    predicate,
                },
            );
        }
        schema.tables.insert(name, table);
    }
    schema
}

/// One index as `pg_index` describes it; `columns` are the key columns or expressions.
#[derive(sqlx::FromRow)]
struct PgIndex {
    name: String,
    table: String,
    unique: bool,
    primary: bool,
    /// Whether the index is that of a `UNIQUE` constraint.
    from_constraint: bool,
    predicate: Option<String>,
    columns: Vec<String>,
}

async fn postgres_schema(pool: &PgPool) -> Schema {
    let mut schema = Schema::default();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name NOT LIKE '\\_sqlx%' \
         AND NOT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
           WHERE n.nspname = 'public' AND c.relname = table_name AND c.relispartition)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    schema.tables = tables.into_iter().map(|name| (name, Table::default())).collect();
    let columns: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text \
         FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (table, column, data_type, nullable) in columns {
        if let Some(t) = schema.tables.get_mut(&table) {
            t.columns.insert(
                column,
                Column {
                    kind: postgres_kind(&data_type),
                    not_null: nullable == "NO",
                },
            );
        }
    }
    let keys: Vec<(String, String)> = sqlx::query_as(
        "SELECT tc.table_name::text, kcu.column_name::text FROM information_schema.table_constraints tc \
         JOIN information_schema.key_column_usage kcu ON kcu.constraint_schema = tc.constraint_schema \
         AND kcu.constraint_name = tc.constraint_name AND kcu.table_name = tc.table_name \
         WHERE tc.table_schema = 'public' AND tc.constraint_type = 'PRIMARY KEY' \
         ORDER BY tc.table_name, kcu.ordinal_position",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (table, column) in keys {
        if let Some(t) = schema.tables.get_mut(&table) {
            t.primary_key.push(column);
        }
    }
    let indexes: Vec<PgIndex> = sqlx::query_as(
        "SELECT i.indexname::text AS name, i.tablename::text AS table, x.indisunique AS unique, \
         x.indisprimary AS primary, \
         EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid AND c.contype = 'u') \
           AS from_constraint, \
         pg_get_expr(x.indpred, x.indrelid) AS predicate, \
         ARRAY(SELECT pg_get_indexdef(x.indexrelid, k, true) \
               FROM generate_series(1, x.indnkeyatts::int) AS k ORDER BY k) AS columns \
         FROM pg_indexes i \
         JOIN pg_namespace n ON n.nspname = i.schemaname \
         JOIN pg_class ci ON ci.relname = i.indexname AND ci.relnamespace = n.oid \
         JOIN pg_index x ON x.indexrelid = ci.oid \
         WHERE i.schemaname = 'public' AND i.tablename NOT LIKE '\\_sqlx%'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for PgIndex {
        name: index,
        table,
        unique,
        primary,
        from_constraint,
        predicate,
        columns,
    } in indexes
    {
        // A time partition's indexes are the parent's, made for each partition.
        if primary || !schema.tables.contains_key(&table) {
            continue;
        }
        let columns: Vec<String> = columns.iter().map(|c| normalize(c)).collect();
        let id = if from_constraint {
            constraint_key(&table, &columns)
        } else {
            index
        };
        schema.indexes.insert(
            id,
            Index {
                table,
                columns,
                unique,
                predicate: predicate.as_deref().map(normalize),
            },
        );
    }
    schema
}

/// Every difference between the two schemas, one line each, in a stable order.
fn compare(sqlite: &Schema, postgres: &Schema) -> Vec<String> {
    let mut found = Vec::new();
    let names: BTreeSet<&String> = sqlite.tables.keys().chain(postgres.tables.keys()).collect();
    for name in names {
        let (s, p) = match (sqlite.tables.get(name), postgres.tables.get(name)) {
            (Some(s), Some(p)) => (s, p),
            (Some(_), None) => {
                found.push(format!("table {name}: only on SQLite"));
                continue;
            }
            (None, _) => {
                found.push(format!("table {name}: only on PostgreSQL"));
                continue;
            }
        };
        let columns: BTreeSet<&String> = s.columns.keys().chain(p.columns.keys()).collect();
        for column in columns {
            match (s.columns.get(column), p.columns.get(column)) {
                (Some(sc), Some(pc)) => {
                    if sc.kind != pc.kind {
                        found.push(format!(
                            "{name}.{column}: {} on SQLite, {} on PostgreSQL",
                            sc.kind, pc.kind
                        ));
                    }
                    if sc.not_null != pc.not_null {
                        let word = |not_null| if not_null { "NOT NULL" } else { "nullable" };
                        found.push(format!(
                            "{name}.{column}: {} on SQLite, {} on PostgreSQL",
                            word(sc.not_null),
                            word(pc.not_null)
                        ));
                    }
                }
                (Some(_), None) => found.push(format!("{name}.{column}: only on SQLite")),
                (None, _) => found.push(format!("{name}.{column}: only on PostgreSQL")),
            }
        }
        if s.primary_key != p.primary_key {
            found.push(format!(
                "{name}: primary key ({}) on SQLite, ({}) on PostgreSQL",
                s.primary_key.join(", "),
                p.primary_key.join(", ")
            ));
        }
    }
    let indexes: BTreeSet<&String> = sqlite.indexes.keys().chain(postgres.indexes.keys()).collect();
    for index in indexes {
        match (sqlite.indexes.get(index), postgres.indexes.get(index)) {
            (Some(s), Some(p)) if s != p => {
                found.push(format!("index {index}: {s:?} on SQLite, {p:?} on PostgreSQL"));
            }
            (Some(_), Some(_)) => {}
            (Some(_), None) => found.push(format!("index {index}: only on SQLite")),
            (None, _) => found.push(format!("index {index}: only on PostgreSQL")),
        }
    }
    found
}

#[tokio::test]
async fn sqlite_and_postgres_migrations_build_the_same_schema() {
    let Some(base) = std::env::var("DEVICECLOUD_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("schema_parity: SKIPPED, set DEVICECLOUD_TEST_DATABASE_URL to compare with PostgreSQL");
        return;
    };
    let unique = format!(
        "{}_{}",
        std::process::id(),
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
    );

    let dir = std::env::temp_dir().join(format!("dc-schema-{unique}"));
    std::fs::create_dir_all(&dir).unwrap();
    let db = Db::connect(&format!("sqlite://{}", dir.join("schema.db").display()))
        .await
        .unwrap();
    let Db::Sqlite(pool, ..) = &db else {
        unreachable!("a sqlite: URL opens SQLite")
    };
    let sqlite = sqlite_schema(pool).await;
    db.close().await;
    std::fs::remove_dir_all(&dir).unwrap();

    let name = format!("dc_test_schema_{unique}");
    let admin = PgPool::connect(&base)
        .await
        .expect("connect to DEVICECLOUD_TEST_DATABASE_URL");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await
        .unwrap();
    let (server, _) = base
        .rsplit_once('/')
        .expect("DEVICECLOUD_TEST_DATABASE_URL must end with /<database>");
    let db = Db::connect(&format!("{server}/{name}")).await.unwrap();
    let Db::Postgres(pool) = &db else {
        unreachable!("a postgres:// URL opens PostgreSQL")
    };
    let postgres = postgres_schema(pool).await;
    db.close().await;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {name}")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;

    // A reader that found nothing would make any two schemas equal.
    assert!(sqlite.tables.len() > 10 && sqlite.indexes.len() > 10, "{sqlite:#?}");
    assert!(
        postgres.tables.len() > 10 && postgres.indexes.len() > 10,
        "{postgres:#?}"
    );

    let found = compare(&sqlite, &postgres);
    let unexpected: Vec<&str> = found
        .iter()
        .map(String::as_str)
        .filter(|d| !EXPECTED_DIFFERENCES.contains(d))
        .collect();
    let gone: Vec<&str> = EXPECTED_DIFFERENCES
        .into_iter()
        .filter(|d| !found.iter().any(|f| f == d))
        .collect();
    assert!(
        unexpected.is_empty() && gone.is_empty(),
        "the SQLite and PostgreSQL schemas differ:\n  {}\nexpected differences no longer found (update EXPECTED_DIFFERENCES):\n  {}",
        unexpected.join("\n  "),
        gone.join("\n  "),
    );
}

#[test]
fn index_terms_split_at_top_level_commas() {
    assert_eq!(
        index_terms("CREATE UNIQUE INDEX a ON accounts (lower(username))"),
        ["lower(username)"]
    );
    assert_eq!(
        index_terms("CREATE INDEX d ON data_sessions (id_physical_device, \"end\") WHERE x IN (1, 2)"),
        ["id_physical_device", " \"end\""]
    );
    assert_eq!(normalize(" \"End\""), "end");
    assert_eq!(normalize("(archived_at IS NULL)"), "archived_atisnull");
}

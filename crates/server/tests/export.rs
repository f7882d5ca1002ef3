//! The streamed export (`GET /api/v2/data/export`) over real HTTP, with the points delivered
//! through the real MQTT endpoint, some packed into chunks and some still rows: in both formats
//! it holds exactly the points `data` lists sorted oldest first (every microsecond and every bit
//! of every value, the same order), with the same filters and rights; its errors are the
//! specification's bodies; a client that goes away stops the server's reading; pyarrow reads
//! the Parquet file back with every row.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::gateway_client::TestGateway;
use common::{TestApp, assert_error_exact, send};
use devicecloud_server::Settings;
use devicecloud_store::chunks::pack_closed;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use serde_json::{Value, json};

/// 2025-11-21 00:00:00 UTC: a UTC midnight a year back.
const T0: i64 = 1_763_683_200;
const DAY: i64 = 86_400;
const MICROS: i64 = 1_000_000;

/// The fields of a raw data record, in its order: the CSV header and the Parquet columns.
const FIELDS: [&str; 7] = [
    "id_container_data_latest",
    "id_group",
    "datatype",
    "source_device",
    "timestamp_seconds",
    "microseconds",
    "value",
];

/// A point as every answer shows it: the ids, the datatype, the time and the value's bits.
type Row = (String, String, i64, String, i64, i64, u64);

fn row_of_json(item: &Value) -> Row {
    (
        item["id_container_data_latest"].as_str().unwrap().to_string(),
        item["id_group"].as_str().unwrap().to_string(),
        item["datatype"].as_i64().unwrap(),
        item["source_device"].as_str().unwrap().to_string(),
        item["timestamp_seconds"].as_i64().unwrap(),
        item["microseconds"].as_i64().unwrap(),
        item["value"].as_f64().unwrap().to_bits(),
    )
}

fn rows_of_csv(text: &str) -> Vec<Row> {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(FIELDS.join(",").as_str()), "the header");
    lines
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            assert_eq!(cells.len(), 7, "{line}");
            (
                cells[0].to_string(),
                cells[1].to_string(),
                cells[2].parse().unwrap(),
                cells[3].to_string(),
                cells[4].parse().unwrap(),
                cells[5].parse().unwrap(),
                cells[6].parse::<f64>().unwrap().to_bits(),
            )
        })
        .collect()
}

fn rows_of_parquet(bytes: Bytes) -> Vec<Row> {
    let reader = SerializedFileReader::new(bytes).expect("a Parquet file");
    let schema = reader.metadata().file_metadata().schema_descr();
    let names: Vec<&str> = schema.columns().iter().map(|c| c.name()).collect();
    assert_eq!(names, FIELDS, "the columns");
    let text = |f: &Field| match f {
        Field::Str(s) => s.clone(),
        other => panic!("not a string: {other:?}"),
    };
    let long = |f: &Field| match f {
        Field::Long(v) => *v,
        other => panic!("not an int64: {other:?}"),
    };
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            let row = row.unwrap();
            let cells: Vec<&Field> = row.get_column_iter().map(|(_, f)| f).collect();
            let datatype = match cells[2] {
                Field::Int(v) => i64::from(*v),
                other => panic!("not an int32: {other:?}"),
            };
            let value = match cells[6] {
                Field::Double(v) => v.to_bits(),
                other => panic!("not a double: {other:?}"),
            };
            (
                text(cells[0]),
                text(cells[1]),
                datatype,
                text(cells[3]),
                long(cells[4]),
                long(cells[5]),
                value,
            )
        })
        .collect()
}

/// Every point `data` lists with `filter` (a query string part), oldest first.
async fn data_rows(app: &TestApp, token: &str, filter: &str) -> Vec<Row> {
    let mut out = Vec::new();
    for page in 1.. {
        let path = format!("/api/v2/data?{filter}&sort=timestamp_seconds&per-page=10000&page={page}");
        let body = send(app.get(&path, token)).await.expect(200).json();
        out.extend(body["items"].as_array().unwrap().iter().map(row_of_json));
        if body["_meta"]["currentPage"] == body["_meta"]["pageCount"] || body["_meta"]["pageCount"] == 0 {
            return out;
        }
    }
    out
}

async fn export_bytes(app: &TestApp, token: &str, query: &str) -> (reqwest::header::HeaderMap, Bytes) {
    let response = app
        .get(&format!("/api/v2/data/export?{query}"), token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{query}");
    let headers = response.headers().clone();
    (headers, response.bytes().await.unwrap())
}

/// A group whose gateway and asset measured three days: datatypes 1 and 2 on the gateway, 7 on
/// its asset MB-1, at times with and without a fraction and values whose last bits matter.
/// The first two days are packed into chunks; the third stays rows.
async fn measured_group(app: &TestApp, admin: &str) -> String {
    let group = app.create_group(admin, "exported").await;
    let mut gw = TestGateway::connect(app, admin, &group, "GW-EXPORT", "PLUS").await;
    gw.hello("PLUS", json!({})).await;
    let instants: Vec<i64> = (0..3 * 400)
        .map(|i| T0 * MICROS + i * 216 * MICROS + (i % 7) * 1_234)
        .collect();
    for part in instants.chunks(300) {
        let items: Vec<Value> = part
            .iter()
            .enumerate()
            .flat_map(|(i, us)| {
                let ts = *us as f64 / 1e6;
                let odd = (i as f64 + 0.1) / 3.0;
                [
                    json!({"ts": ts, "values": {"1": odd, "2": -(*us % 1000) as f64 * 1e-300}}),
                    json!({"device": "MB-1", "ts": ts, "values": {"7": (*us % 100_000) as f64 / 7.0}}),
                ]
            })
            .collect();
        gw.measurements(&Value::Array(items)).await;
    }
    let packed = pack_closed(&app.state.db, T0 + 2 * DAY, usize::MAX).await.unwrap();
    assert!(packed.points > 0, "some points are packed");
    group
}

fn app_settings() -> Settings {
    Settings {
        // Only the test packs.
        pack_interval: Duration::from_secs(DAY as u64),
        ..Settings::default()
    }
}

#[tokio::test]
async fn the_export_holds_what_data_lists_in_both_formats() {
    let app = TestApp::spawn_with(app_settings()).await;
    let (_, admin) = app.admin().await;
    let group = measured_group(&app, &admin).await;

    let filters = [
        format!("filter[id_group]={group}"),
        format!("filter[id_group]={group}&filter[datatype]=7"),
        format!(
            "filter[id_group]={group}&filter[timestamp_seconds][gte]={}&filter[timestamp_seconds][lt]={}",
            T0 + DAY + 1_000,
            T0 + 2 * DAY + 5_000
        ),
        format!("filter[id_group]={group}&filter[value][gt]=500"),
        format!("filter[id_group]={group}&filter[source_device][neq]=MB-1&filter[microseconds][gt]=0"),
    ];
    for filter in &filters {
        let expected = data_rows(&app, &admin, filter).await;
        assert!(!expected.is_empty(), "{filter} matches points");
        let (headers, csv) = export_bytes(&app, &admin, filter).await;
        assert_eq!(headers["content-type"], "text/csv; charset=UTF-8");
        assert_eq!(
            headers["content-disposition"],
            "attachment; filename=\"data-export.csv\""
        );
        let csv = rows_of_csv(std::str::from_utf8(&csv).unwrap());
        assert_eq!(csv.len(), expected.len(), "{filter}: CSV lines");
        assert!(csv == expected, "{filter}: the CSV differs from data");

        let (headers, parquet) = export_bytes(&app, &admin, &format!("{filter}&format=parquet")).await;
        assert_eq!(headers["content-type"], "application/vnd.apache.parquet");
        assert_eq!(
            headers["content-disposition"],
            "attachment; filename=\"data-export.parquet\""
        );
        let parquet = rows_of_parquet(parquet);
        assert!(parquet == expected, "{filter}: the Parquet file differs from data");
    }
    // The whole group: three series, 1,200 instants each, oldest first.
    let all = data_rows(&app, &admin, &filters[0]).await;
    assert_eq!(all.len(), 3 * 3 * 400);
    assert!(all.windows(2).all(|w| (w[0].4, w[0].5) <= (w[1].4, w[1].5)));
}

#[tokio::test]
async fn the_export_keeps_to_the_callers_groups_and_answers_errors_exactly() {
    let app = TestApp::spawn_with(app_settings()).await;
    let (_, admin) = app.admin().await;
    let group = measured_group(&app, &admin).await;
    let (id_user, user) = app.user().await;
    let own = app.create_group(&admin, "own").await;
    app.grant(&admin, &own, &id_user, "viewer").await;

    // Another group's points are not the caller's: the answer is empty, as `data` is.
    let (_, csv) = export_bytes(&app, &user, &format!("filter[id_group]={group}")).await;
    assert_eq!(std::str::from_utf8(&csv).unwrap(), format!("{}\n", FIELDS.join(",")));
    let (_, parquet) = export_bytes(&app, &user, &format!("filter[id_group]={group}&format=parquet")).await;
    assert!(rows_of_parquet(parquet).is_empty());
    // A group of their own without points: the header alone, a Parquet file without rows.
    let (_, csv) = export_bytes(&app, &user, &format!("filter[id_group]={own}")).await;
    assert_eq!(csv.len(), FIELDS.join(",").len() + 1);
    let (_, parquet) = export_bytes(&app, &user, &format!("filter[id_group]={own}&format=parquet")).await;
    assert!(rows_of_parquet(parquet).is_empty());
    // An `in` list of groups holds only the visible ones' points.
    let both = format!("filter[id_group][in][]={group}&filter[id_group][in][]={own}");
    let (_, csv) = export_bytes(&app, &user, &both).await;
    assert_eq!(rows_of_csv(std::str::from_utf8(&csv).unwrap()).len(), 0);
    let (_, csv) = export_bytes(&app, &admin, &both).await;
    assert_eq!(rows_of_csv(std::str::from_utf8(&csv).unwrap()).len(), 3 * 3 * 400);

    let missing = send(app.get("/api/v2/data/export?filter[datatype]=1", &admin)).await;
    assert_eq!(missing.status, 400);
    assert_error_exact(&missing.json(), 400, "Bad Request", "filter[id_group] is required");
    let anonymous = send(
        app.http
            .get(app.url(&format!("/api/v2/data/export?filter[id_group]={group}"))),
    )
    .await;
    assert_eq!(anonymous.status, 401);
    for (query, field) in [
        ("format=xlsx", Some("format")),
        ("format=", Some("format")),
        ("sort=-timestamp_seconds", Some("sort")),
        ("filter[nope]=1", None),
    ] {
        let path = format!("/api/v2/data/export?filter[id_group]={group}&{query}");
        let refused = send(app.get(&path, &admin)).await;
        assert_eq!(refused.status, 422, "{query}: {}", refused.text);
        if let Some(field) = field {
            assert_eq!(refused.json()[0]["field"], field, "{query}");
        }
    }
    // Sorting oldest first in so many words is what the export does anyway.
    let (_, csv) = export_bytes(
        &app,
        &admin,
        &format!("filter[id_group]={group}&filter[datatype]=1&sort=timestamp_seconds"),
    )
    .await;
    assert_eq!(rows_of_csv(std::str::from_utf8(&csv).unwrap()).len(), 3 * 400);
}

/// The value of a gauge or counter on `/metrics` (0 when absent).
async fn metric(app: &TestApp, name: &str) -> f64 {
    let text = send(app.http.get(app.url("/metrics"))).await.text;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn a_client_that_goes_away_stops_the_export() {
    let app = TestApp::spawn_with(app_settings()).await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "large").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-LARGE", "PLUS").await;
    gw.hello("PLUS", json!({})).await;
    // 480,000 points, about 70 MB of CSV: far more than the socket buffers, the pieces in flight
    // and the batches read ahead.
    for message in 0..80 {
        let items: Vec<Value> = (0..1_000)
            .map(|i| {
                let ts = T0 + message * 1_000 + i;
                json!({"ts": ts, "values": {"1": i, "2": -i, "3": i * 2, "4": 0.5, "5": 1, "6": 7}})
            })
            .collect();
        gw.measurements(&Value::Array(items)).await;
    }
    let total = 480_000.0;
    // The metrics are the process's: other tests of this file may export meanwhile (`cargo
    // test` runs them in threads of one process), so only what this export adds is counted,
    // and the other exports are short.
    let encoded_before = metric(&app, "devicecloud_export_points_total").await;
    let response = app
        .get(&format!("/api/v2/data/export?filter[id_group]={group}"), &admin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut response = response;
    let first = response.chunk().await.unwrap().expect("a first piece");
    assert!(!first.is_empty());
    // The client stops reading: the export waits for it rather than reading on.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(metric(&app, "devicecloud_exports_running").await >= 1.0);
    drop(response);
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&app, "devicecloud_exports_running").await != 0.0 {
        assert!(
            Instant::now() < deadline,
            "the export still runs after its client went away"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let encoded = metric(&app, "devicecloud_export_points_total").await - encoded_before;
    assert!(
        encoded < total,
        "the export stopped early: {encoded} of {total} points encoded"
    );
}

#[tokio::test]
async fn pyarrow_reads_every_row_of_the_parquet_file() {
    let python = std::env::var("DEVICECLOUD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_pyarrow = std::process::Command::new(&python)
        .args(["-c", "import pyarrow.parquet"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_pyarrow {
        assert!(
            std::env::var("DEVICECLOUD_REQUIRE_PYARROW").is_err(),
            "DEVICECLOUD_REQUIRE_PYARROW is set but {python} cannot import pyarrow"
        );
        eprintln!("skipped: {python} cannot import pyarrow (DEVICECLOUD_TEST_PYTHON names another Python)");
        return;
    }
    let app = TestApp::spawn_with(app_settings()).await;
    let (_, admin) = app.admin().await;
    let group = measured_group(&app, &admin).await;
    let expected = data_rows(&app, &admin, &format!("filter[id_group]={group}")).await;
    let (_, parquet) = export_bytes(&app, &admin, &format!("filter[id_group]={group}&format=parquet")).await;
    let file = app.dir().join("export.parquet");
    std::fs::write(&file, &parquet).unwrap();
    // pyarrow prints every row as JSON, the value as the hex of its bits.
    let script = r#"
import json, struct, sys
import pyarrow.parquet as pq
table = pq.read_table(sys.argv[1])
print(json.dumps([str(t) for t in table.schema.types]))
for row in table.to_pylist():
    row["value"] = struct.pack(">d", row["value"]).hex()
    print(json.dumps(row))
"#;
    let out = std::process::Command::new(&python)
        .args(["-c", script, file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let types: Vec<String> = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(
        types,
        ["string", "string", "int32", "string", "int64", "int64", "double"]
    );
    let rows: Vec<Row> = lines
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap();
            let bits = u64::from_str_radix(row["value"].as_str().unwrap(), 16).unwrap();
            let mut row = row_of_json(&json!({
                "id_container_data_latest": row["id_container_data_latest"],
                "id_group": row["id_group"],
                "datatype": row["datatype"],
                "source_device": row["source_device"],
                "timestamp_seconds": row["timestamp_seconds"],
                "microseconds": row["microseconds"],
                "value": 0.0,
            }));
            row.6 = bits;
            row
        })
        .collect();
    assert_eq!(rows.len(), expected.len());
    assert!(rows == expected, "pyarrow reads other rows than data lists");
}

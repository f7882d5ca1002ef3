//! Reading measurements and events over real HTTP, with the data delivered through the real
//! MQTT endpoint: `data` (required group filter, latest first, pages, filters), `data-downsampled`
//! (the resolution rule, values checked against the points they came from), `event` and the
//! event-type catalogue, and rights.

mod common;

use std::collections::BTreeMap;

use common::gateway_client::TestGateway;
use common::{TestApp, assert_error_exact, keys, send};
use serde_json::{Value, json};

/// 2025-11-21 00:00:00 UTC: a day boundary a year back.
const T0: i64 = 1_763_683_200;
const DAY: i64 = 86_400;

async fn get(app: &TestApp, token: &str, path: &str) -> Value {
    let reply = send(app.get(path, token)).await;
    assert_eq!(reply.status, 200, "{path}: {}", reply.text);
    reply.json()
}

fn items(body: &Value) -> &Vec<Value> {
    body["items"].as_array().unwrap()
}

/// Every page of a collection, concatenated.
async fn all_pages(app: &TestApp, token: &str, path: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut page = 1;
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let body = get(app, token, &format!("{path}{sep}page={page}")).await;
        out.extend(items(&body).iter().cloned());
        if body["_meta"]["currentPage"] == body["_meta"]["pageCount"] || body["_meta"]["pageCount"] == 0 {
            return out;
        }
        page += 1;
    }
}

#[tokio::test]
async fn raw_data_needs_the_group_and_pages_latest_first() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "plant").await;
    let other = app.create_group(&admin, "elsewhere").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-RAW", "PLUS").await;
    gw.hello("PLUS", json!({})).await;
    // 300 instants; the gateway measures datatypes 1 and 2, its asset MB-1 datatype 7.
    let batch: Vec<Value> = (0..300)
        .flat_map(|i| {
            let ts = T0 as f64 + i as f64 + if i % 3 == 0 { 0.25 } else { 0.0 };
            [
                json!({"ts": ts, "values": {"1": i, "2": i as f64 / 2.0}}),
                json!({"device": "MB-1", "ts": ts, "values": {"7": -i}}),
            ]
        })
        .collect();
    gw.measurements(&Value::Array(batch)).await;

    let missing = send(app.get("/api/v2/data", &admin)).await;
    assert_eq!(missing.status, 400);
    assert_error_exact(&missing.json(), 400, "Bad Request", "filter[id_group] is required");
    let other_filter = send(app.get("/api/v2/data?filter[datatype]=1", &admin)).await;
    assert_eq!(other_filter.status, 400);

    let path = format!("/api/v2/data?filter[id_group]={group}");
    let first = get(&app, &admin, &path).await;
    assert_eq!(
        first["_meta"],
        json!({"totalCount": 900, "pageCount": 2, "currentPage": 1, "perPage": 500})
    );
    let item = &items(&first)[0];
    assert_eq!(
        keys(item),
        [
            "id_container_data_latest",
            "id_group",
            "datatype",
            "source_device",
            "timestamp_seconds",
            "microseconds",
            "value"
        ]
    );
    assert_eq!(item["timestamp_seconds"], T0 + 299);
    assert_eq!(item["id_group"], group.as_str());
    assert!(item["id_container_data_latest"].as_str().unwrap().len() == 36);
    // /data/index is the same collection.
    let index = get(
        &app,
        &admin,
        &format!("/api/v2/data/index?filter[id_group]={group}&per-page=500"),
    )
    .await;
    assert_eq!(index["items"], first["items"]);

    // Latest first across every page, nothing twice, nothing missing.
    let all = all_pages(&app, &admin, &format!("{path}&per-page=70")).await;
    assert_eq!(all.len(), 900);
    let times: Vec<(i64, i64)> = all
        .iter()
        .map(|p| {
            (
                p["timestamp_seconds"].as_i64().unwrap(),
                p["microseconds"].as_i64().unwrap(),
            )
        })
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "not latest first");
    let distinct: std::collections::HashSet<String> = all
        .iter()
        .map(|p| {
            format!(
                "{}{}{}",
                p["id_container_data_latest"], p["timestamp_seconds"], p["microseconds"]
            )
        })
        .collect();
    assert_eq!(distinct.len(), 900);
    let quarter = all.iter().find(|p| p["timestamp_seconds"] == T0 + 3).unwrap();
    assert_eq!(quarter["microseconds"], 250_000);

    // Ascending, and the last page.
    let asc = get(&app, &admin, &format!("{path}&sort=timestamp_seconds&per-page=10")).await;
    assert_eq!(items(&asc)[0]["timestamp_seconds"], T0);
    let last = get(&app, &admin, &format!("{path}&per-page=500&page=2")).await;
    assert_eq!(items(&last).len(), 400);
    assert_eq!(items(&last).last().unwrap()["timestamp_seconds"], T0);

    // Filters on the series and on time.
    let asset = get(&app, &admin, &format!("{path}&filter[datatype]=7")).await;
    assert_eq!(asset["_meta"]["totalCount"], 300);
    let source = items(&asset)[0]["source_device"].as_str().unwrap().to_string();
    assert_ne!(source, gw.id);
    let by_source = get(&app, &admin, &format!("{path}&filter[source_device]={}", gw.id)).await;
    assert_eq!(by_source["_meta"]["totalCount"], 600);
    let container = items(&asset)[0]["id_container_data_latest"]
        .as_str()
        .unwrap()
        .to_string();
    let by_container = get(
        &app,
        &admin,
        &format!("{path}&filter[id_container_data_latest]={container}"),
    )
    .await;
    assert_eq!(by_container["_meta"]["totalCount"], 300);
    let range = format!(
        "{path}&filter[timestamp_seconds][gte]={}&filter[timestamp_seconds][lt]={}",
        T0 + 10,
        T0 + 20
    );
    let ranged = get(&app, &admin, &range).await;
    assert_eq!(ranged["_meta"]["totalCount"], 30);
    assert!(
        items(&ranged)
            .iter()
            .all(|p| (T0 + 10..T0 + 20).contains(&p["timestamp_seconds"].as_i64().unwrap()))
    );
    let valued = get(&app, &admin, &format!("{path}&filter[value][lt]=-290")).await;
    assert_eq!(valued["_meta"]["totalCount"], 9);
    let by_value = get(
        &app,
        &admin,
        &format!("{path}&filter[datatype]=1&sort=-value&per-page=1"),
    )
    .await;
    assert_eq!(items(&by_value)[0]["value"], 299.0);

    // HEAD counts without a body.
    let head = send(app.request(reqwest::Method::HEAD, &path, &admin)).await;
    assert_eq!(head.header("x-pagination-total-count"), Some("900"));
    assert!(head.text.is_empty());

    // Values come back exactly, every bit of the double (SQLite's own JSON writes 15 digits).
    let exact = [
        0.1 + 0.2,
        1.0 / 3.0,
        6.022_140_76e23,
        -1.602_176_634e-19,
        123_456.789_012_345_67,
    ];
    let batch: Vec<Value> = exact
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"ts": T0 + 1000 + i as i64, "values": {"9": v}}))
        .collect();
    gw.measurements(&Value::Array(batch)).await;
    let read = get(
        &app,
        &admin,
        &format!("{path}&filter[datatype]=9&sort=timestamp_seconds"),
    )
    .await;
    let values: Vec<f64> = items(&read).iter().map(|p| p["value"].as_f64().unwrap()).collect();
    assert_eq!(values, exact);
    let down = get(&app, &admin, &format!("/api/v2/data-downsampled?filter[id_group]={group}&filter[datatype]=9&filter[timestamp_seconds][gte]={}&filter[timestamp_seconds][lt]={}", T0 + 1000, T0 + 1010)).await;
    let mins: Vec<f64> = items(&down).iter().map(|p| p["min_val"].as_f64().unwrap()).collect();
    assert_eq!(mins, exact);

    // A viewer of another group sees none of it.
    let (viewer_id, viewer) = app.user().await;
    app.grant(&admin, &other, &viewer_id, "viewer").await;
    let hidden = get(&app, &viewer, &path).await;
    assert_eq!(hidden["_meta"]["totalCount"], 0);
    app.grant(&admin, &group, &viewer_id, "viewer").await;
    let shown = get(&app, &viewer, &path).await;
    assert_eq!(shown["_meta"]["totalCount"], 905);
}

/// min, max, sum, count of the values in each bucket of `width` seconds.
fn expected(points: &[(i64, f64)], width: i64) -> BTreeMap<i64, (f64, f64, f64, i64)> {
    let mut out: BTreeMap<i64, (f64, f64, f64, i64)> = BTreeMap::new();
    for &(ts, v) in points {
        let e = out
            .entry(ts - ts.rem_euclid(width))
            .or_insert((f64::MAX, f64::MIN, 0.0, 0));
        e.0 = e.0.min(v);
        e.1 = e.1.max(v);
        e.2 += v;
        e.3 += 1;
    }
    out
}

fn assert_buckets(body: &Value, want: &BTreeMap<i64, (f64, f64, f64, i64)>, lo: i64, hi: i64) {
    let want: Vec<_> = want.iter().filter(|(start, _)| **start > lo && **start < hi).collect();
    let got = items(body);
    assert_eq!(got.len(), want.len(), "bucket count");
    for (item, (start, (min, max, sum, count))) in got.iter().zip(want) {
        assert_eq!(item["timestamp_seconds"], *start);
        assert_eq!(item["count_val"], *count);
        assert_eq!(item["min_val"].as_f64().unwrap(), *min);
        assert_eq!(item["max_val"].as_f64().unwrap(), *max);
        assert!((item["avg_val"].as_f64().unwrap() - sum / *count as f64).abs() < 1e-9);
    }
}

#[tokio::test]
async fn downsampling_follows_the_interval_and_matches_the_raw_points() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-DOWN", "CORE").await;
    gw.hello("CORE", json!({})).await;
    // 30 days, one point every 10 minutes.
    let points: Vec<(i64, f64)> = (0..30 * 144).map(|i| (T0 + i * 600, (i % 97) as f64 + 0.5)).collect();
    for chunk in points.chunks(1000) {
        let batch: Vec<Value> = chunk
            .iter()
            .map(|(ts, v)| json!({"ts": ts, "values": {"5": v}}))
            .collect();
        gw.measurements(&Value::Array(batch.clone())).await;
    }
    // A resent batch is counted once.
    let resent: Vec<Value> = points[..50]
        .iter()
        .map(|(ts, v)| json!({"ts": ts, "values": {"5": v}}))
        .collect();
    gw.measurements(&Value::Array(resent)).await;

    let base = format!("/api/v2/data-downsampled?filter[id_group]={group}");
    // No time filter: one value per day.
    let daily = get(&app, &admin, &base).await;
    assert_eq!(
        keys(&items(&daily)[0]),
        [
            "id_container_data_latest",
            "id_group",
            "datatype",
            "source_device",
            "timestamp_seconds",
            "min_val",
            "max_val",
            "avg_val",
            "count_val"
        ]
    );
    assert_eq!(daily["_meta"]["perPage"], 500);
    assert_buckets(&daily, &expected(&points, DAY), i64::MIN, i64::MAX);
    let index = get(
        &app,
        &admin,
        &format!("/api/v2/data-downsampled/index?filter[id_group]={group}"),
    )
    .await;
    assert_eq!(index["items"], daily["items"]);
    // Latest first on request.
    let desc = get(&app, &admin, &format!("{base}&sort=-timestamp_seconds")).await;
    assert_eq!(items(&desc)[0]["timestamp_seconds"], T0 + 29 * DAY);

    let between =
        |lo: i64, hi: i64| format!("{base}&filter[timestamp_seconds][gt]={lo}&filter[timestamp_seconds][lt]={hi}");
    // Longer than three weeks: days.
    let (lo, hi) = (T0 - 1, T0 + 22 * DAY);
    assert_buckets(
        &get(&app, &admin, &between(lo, hi)).await,
        &expected(&points, DAY),
        lo,
        hi,
    );
    // Two days: hours.
    let (lo, hi) = (T0 + 2 * DAY, T0 + 4 * DAY);
    assert_buckets(
        &get(&app, &admin, &between(lo, hi)).await,
        &expected(&points, 3600),
        lo,
        hi,
    );
    // Six hours: minutes.
    let (lo, hi) = (T0 + 5 * DAY, T0 + 5 * DAY + 6 * 3600);
    assert_buckets(
        &get(&app, &admin, &between(lo, hi)).await,
        &expected(&points, 60),
        lo,
        hi,
    );
    // Half an hour: raw points.
    let (lo, hi) = (T0 + 7 * DAY - 1, T0 + 7 * DAY + 1800);
    let raw = get(&app, &admin, &between(lo, hi)).await;
    assert_buckets(&raw, &expected(&points, 1), lo, hi);
    // Only a lower bound: up to now, a year: days from that bound on.
    let lower = get(
        &app,
        &admin,
        &format!("{base}&filter[timestamp_seconds][gte]={}", T0 + 28 * DAY),
    )
    .await;
    assert_buckets(&lower, &expected(&points, DAY), T0 + 28 * DAY - 1, i64::MAX);

    // Another datatype or group: nothing.
    let none = get(&app, &admin, &format!("{base}&filter[datatype]=6")).await;
    assert_eq!(none["_meta"]["totalCount"], 0);
    let (viewer_id, viewer) = app.user().await;
    let other = app.create_group(&admin, "elsewhere").await;
    app.grant(&admin, &other, &viewer_id, "viewer").await;
    let hidden = get(&app, &viewer, "/api/v2/data-downsampled").await;
    assert_eq!(hidden["_meta"]["totalCount"], 0);
}

#[tokio::test]
async fn events_are_listed_latest_first_with_labels_and_filters() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-EVT", "PLUS").await;
    gw.hello("PLUS", json!({})).await;
    let now = devicecloud_store::unix_now();
    gw.events(&json!([
        {"ts": now - 300, "type": 310, "value": "1", "datatype": 12},
        {"ts": now - 200, "type": 310, "value": 0},
        {"device": "ZW-9", "ts": now - 100, "type": 420, "value": "0"},
    ]))
    .await;

    let all = get(&app, &admin, "/api/v2/event").await;
    let list = items(&all);
    assert_eq!(all["_meta"]["totalCount"], 4);
    assert_eq!(
        keys(&list[0]),
        [
            "id_event",
            "id_group",
            "source_device",
            "from_device",
            "event_type",
            "event_type_label",
            "event_type_description",
            "occurred_at",
            "value",
            "datatype",
            "event_value_label",
            "event_value_description"
        ]
    );
    // Latest first: the hello's 208 (now) before the device events.
    assert_eq!(list[0]["event_type"], "208");
    assert_eq!(list[0]["value"], "2");
    assert_eq!(list[0]["from_device"], 1);
    assert_eq!(list[0]["event_value_label"], "Cellular");
    assert_eq!(list[1]["event_type"], "420");
    assert_eq!(list[1]["event_type_label"], "Z-wave node exclusion");
    assert_eq!(list[1]["event_value_label"], "Excluded");
    assert_ne!(list[1]["source_device"], gw.id.as_str());
    assert_eq!(list[3]["datatype"], 12);
    assert_eq!(list[3]["event_type_label"], "Device event 310");
    assert!(list[0]["id_event"].is_i64());

    let by_type = get(&app, &admin, "/api/v2/event?filter[event_type]=310").await;
    assert_eq!(by_type["_meta"]["totalCount"], 2);
    let by_device = get(&app, &admin, &format!("/api/v2/event?filter[source_device]={}", gw.id)).await;
    assert_eq!(by_device["_meta"]["totalCount"], 3);
    let id = list[2]["id_event"].as_i64().unwrap();
    let by_id = get(&app, &admin, &format!("/api/v2/event?filter[id_event]={id}")).await;
    assert_eq!(items(&by_id)[0]["id_event"], id);
    let window = format!(
        "/api/v2/event?filter[occurred_at][gte]={}&filter[occurred_at][lte]={}",
        now - 250,
        now - 150
    );
    let ranged = get(&app, &admin, &window).await;
    assert_eq!(ranged["_meta"]["totalCount"], 1);
    assert_eq!(items(&ranged)[0]["value"], "0");
    let oldest = get(&app, &admin, "/api/v2/event?sort=occurred_at&per-page=1").await;
    assert_eq!(items(&oldest)[0]["occurred_at"], now - 300);
    let bad = send(app.get("/api/v2/event?filter[event_type]=abc", &admin)).await;
    assert_eq!(bad.status, 422);

    // Invisible to a stranger; invalid credentials are 401.
    let (_, stranger) = app.user().await;
    assert_eq!(get(&app, &stranger, "/api/v2/event").await["_meta"]["totalCount"], 0);
    assert_eq!(send(app.get("/api/v2/event", "wrong")).await.status, 401);

    // The catalogue.
    let types = get(&app, &admin, "/api/v2/event-type").await;
    let connectivity = items(&types).iter().find(|t| t["event_type"] == "208").unwrap();
    assert_eq!(
        keys(connectivity),
        ["event_type", "label", "description", "from_device", "values"]
    );
    assert_eq!(
        connectivity["values"][2],
        json!({"value": "2", "label": "Cellular", "description": "The cellular modem connection is in use."})
    );
    let zwave = get(&app, &admin, "/api/v2/event-type?filter[event_type]=420").await;
    assert_eq!(zwave["_meta"]["totalCount"], 1);
    assert_eq!(items(&zwave)[0]["values"][0]["value"], "0");
    let cloud = get(
        &app,
        &admin,
        "/api/v2/event-type?filter[from_device]=0&sort=-event_type",
    )
    .await;
    let codes: Vec<&str> = items(&cloud)
        .iter()
        .map(|t| t["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "232", "231", "230", "220", "219", "218", "217", "215", "214", "213", "212", "211", "209"
        ]
    );
}

/// Ties in any sort key are broken by the primary key (series, then bucket start), so that
/// paging through equal values visits every bucket exactly once, in both directions.
#[tokio::test]
async fn downsampled_pages_never_overlap_whatever_the_sort() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-TIES", "PLUS").await;
    gw.hello("PLUS", json!({})).await;
    // 1,000 days × 3 series (two of the gateway, one of its asset): few distinct values, and
    // every other day a second point, so each sort key has long runs of equal values.
    let entries: Vec<Value> = (0..1000i64)
        .flat_map(|d| {
            let day = T0 - d * DAY;
            let values = json!({"1": d % 4, "2": (d % 3) as f64 / 2.0});
            let mut day_entries = vec![
                json!({"ts": day + 3600, "values": values}),
                json!({"device": "MB-TIES", "ts": day + 3600, "values": {"7": 5}}),
            ];
            if d % 2 == 0 {
                day_entries.push(json!({"ts": day + 7200, "values": values}));
            }
            day_entries
        })
        .collect();
    for chunk in entries.chunks(400) {
        gw.measurements(&Value::Array(chunk.to_vec())).await;
    }
    let base = format!("/api/v2/data-downsampled?filter[id_group]={group}&per-page=7");
    for attr in [
        "id_container_data_latest",
        "id_group",
        "datatype",
        "source_device",
        "timestamp_seconds",
        "min_val",
        "max_val",
        "avg_val",
        "count_val",
    ] {
        for sort in [attr.to_string(), format!("-{attr}")] {
            let rows = all_pages(&app, &admin, &format!("{base}&sort={sort}")).await;
            let mut seen = std::collections::HashSet::new();
            for row in &rows {
                let key = (
                    row["id_container_data_latest"].as_str().unwrap().to_string(),
                    row["timestamp_seconds"].as_i64().unwrap(),
                );
                assert!(seen.insert(key.clone()), "sort={sort}: {key:?} twice");
            }
            assert_eq!(seen.len(), 3000, "sort={sort}");
            // The pages keep the requested order of the sort key itself.
            let column: Vec<&Value> = rows.iter().map(|r| &r[attr]).collect();
            let ordered = column.windows(2).all(|w| {
                let (a, b) = (w[0], w[1]);
                let le = match (a.as_f64(), b.as_f64()) {
                    (Some(x), Some(y)) => x <= y,
                    _ => a.as_str() <= b.as_str(),
                };
                let ge = match (a.as_f64(), b.as_f64()) {
                    (Some(x), Some(y)) => x >= y,
                    _ => a.as_str() >= b.as_str(),
                };
                if sort.starts_with('-') { ge } else { le }
            });
            assert!(ordered, "sort={sort}");
        }
    }
}

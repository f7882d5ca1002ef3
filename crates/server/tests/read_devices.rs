//! Reading devices and data sessions over real HTTP, with gateways connected over real MQTT:
//! the device collection with `expand`, `labels`, `deviceStatuses`, every expand option and
//! `group.latestData`; data sessions with their expands, session downsampling and the CSV.

mod common;

use common::gateway_client::TestGateway;
use common::{DEVICE_FIELDS, TestApp, keys, send};
use reqwest::Method;
use serde_json::{Value, json};

const T0: i64 = 1_763_683_200;

async fn get(app: &TestApp, token: &str, path: &str) -> Value {
    let reply = send(app.get(path, token)).await;
    assert_eq!(reply.status, 200, "{path}: {}", reply.text);
    reply.json()
}

fn items(body: &Value) -> &Vec<Value> {
    body["items"].as_array().unwrap()
}

#[tokio::test]
async fn the_device_collection_has_its_keys_filters_and_rights() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "plant").await;
    let other = app.create_group(&admin, "elsewhere").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-A1", "PLUS").await;
    gw.hello("PLUS", json!({})).await;
    gw.measurements(&json!({"device": "MB-7", "ts": T0, "values": {"1": 2}}))
        .await;
    TestGateway::connect(&app, &admin, &other, "GW-B1", "GO").await;

    let body = get(&app, &admin, "/api/v2/physical-device").await;
    assert_eq!(
        keys(&body),
        ["items", "_links", "_meta", "expand", "labels", "deviceStatuses"]
    );
    assert_eq!(body["_meta"]["totalCount"], 3);
    assert_eq!(body["_meta"]["perPage"], 20);
    assert_eq!(
        body["expand"],
        json!([
            "latestEvent",
            "group",
            "parent",
            "deviceType",
            "location",
            "iotDevice",
            "deviceInfo",
            "modbusTemplateHistory",
            "currentModbusTemplate",
            "simCard"
        ])
    );
    for label in [
        "id_physical_device",
        "label",
        "labelLink",
        "serial_hardware",
        "group.label",
        "id_group",
        "id_device_type",
        "parentDevice.displayLabel",
    ] {
        assert!(body["labels"][label].is_string(), "label of {label}");
    }
    assert_eq!(
        body["deviceStatuses"],
        json!({"expectedStatuses": ["ALWAYS_OFF", "ALWAYS_ON"],
               "availableStatuses": ["EXPECTED_OFF", "EXPECTED_ON_DEVICE_ON", "EXPECTED_ON_DEVICE_OFF"]})
    );
    let first = items(&body).iter().find(|d| d["serial_hardware"] == "GW-A1").unwrap();
    assert_eq!(keys(first), DEVICE_FIELDS);
    assert_eq!(first["is_connected"], 1);
    assert_eq!(
        first["_links"]["self"]["href"],
        format!("/api/v2/physical-device/{}", gw.id)
    );

    // Filters and sort on device fields.
    let assets = get(
        &app,
        &admin,
        &format!("/api/v2/physical-device?filter[id_parent]={}", gw.id),
    )
    .await;
    assert_eq!(items(&assets).len(), 1);
    assert_eq!(items(&assets)[0]["serial_hardware"], "MB-7");
    let like = get(
        &app,
        &admin,
        "/api/v2/physical-device?filter[serial_hardware][like]=gw-&sort=-serial_hardware",
    )
    .await;
    let serials: Vec<&str> = items(&like)
        .iter()
        .map(|d| d["serial_hardware"].as_str().unwrap())
        .collect();
    assert_eq!(serials, ["GW-B1", "GW-A1"]);
    let connected = get(
        &app,
        &admin,
        "/api/v2/physical-device?filter[is_connected]=1&fields=serial_hardware",
    )
    .await;
    // GW-B1 is connected but has not said hello yet.
    assert_eq!(items(&connected).len(), 1);
    assert_eq!(keys(&items(&connected)[0]), ["serial_hardware", "_links"]);
    let bad = send(app.get("/api/v2/physical-device?filter[is_connected]=yes", &admin)).await;
    assert_eq!(bad.status, 422);
    let head = send(app.request(reqwest::Method::HEAD, "/api/v2/physical-device", &admin)).await;
    assert_eq!(head.header("x-pagination-total-count"), Some("3"));

    // A member sees the devices of their groups only.
    let (viewer_id, viewer) = app.user().await;
    app.grant(&admin, &other, &viewer_id, "viewer").await;
    let seen = get(&app, &viewer, "/api/v2/physical-device").await;
    let serials: Vec<&str> = items(&seen)
        .iter()
        .map(|d| d["serial_hardware"].as_str().unwrap())
        .collect();
    assert_eq!(serials, ["GW-B1"]);
    assert_eq!(
        send(app.get(&format!("/api/v2/physical-device/{}", gw.id), &viewer))
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn every_expand_option_holds_its_relation() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "plant").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-X", "PLUS").await;
    let template = json!({"name": "flowmeter-v2", "registers": [{"datatype": 12, "address": 40001, "type": "u16"}]});
    gw.hello(
        "PLUS",
        json!({"sim": {"iccid": "8931", "operator": "KPN"}, "location": {"latitude": 52.37, "longitude": 4.89},
               "modbus_template": template}),
    )
    .await;
    gw.measurements(&json!([
        {"ts": T0, "values": {"12": 1.5}},
        {"ts": T0 + 60, "values": {"12": 2.5, "13": 7}},
        {"device": "MB-1", "ts": T0 + 30, "values": {"1": 9}},
    ]))
    .await;
    let all = "latestEvent,group,parent,deviceType,location,iotDevice,deviceInfo,modbusTemplateHistory,currentModbusTemplate,simCard";
    let record = get(&app, &admin, &format!("/api/v2/physical-device/{}?expand={all}", gw.id)).await;
    let mut want: Vec<&str> = DEVICE_FIELDS[..23].to_vec();
    want.extend(all.split(','));
    want.push("_links");
    assert_eq!(keys(&record), want);
    assert_eq!(record["latestEvent"]["event_type"], "208");
    assert_eq!(record["group"]["label"], "plant");
    assert_eq!(
        record["group"]["_links"]["self"]["href"],
        format!("/api/v2/group/{group}")
    );
    assert_eq!(record["parent"], Value::Null);
    assert_eq!(
        record["deviceType"],
        json!({"id_device_type": "PLUS", "label": "PLUS connectivity module"})
    );
    assert_eq!(record["location"]["latitude"], 52.37);
    assert_eq!(record["simCard"]["operator"], "KPN");
    assert_eq!(record["iotDevice"]["protocol"], "mqtt");
    assert_eq!(record["iotDevice"]["id_iot_device"], record["id_iot_device"]);
    assert!(record["iotDevice"]["last_connect_at"].is_i64());
    assert_eq!(record["deviceInfo"], Value::Null);
    assert_eq!(record["currentModbusTemplate"], template);
    assert_eq!(record["modbusTemplateHistory"].as_array().unwrap().len(), 1);
    assert_eq!(record["modbusTemplateHistory"][0]["template"], template);

    // group.latestData: the newest point of each container of the group.
    let latest = get(
        &app,
        &admin,
        &format!("/api/v2/physical-device/{}?expand=group.latestData", gw.id),
    )
    .await;
    let data = latest["group"]["latestData"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    let flow = data
        .iter()
        .find(|d| d["datatype"] == 12 && d["source_device"] == gw.id.as_str())
        .unwrap();
    assert_eq!(flow["timestamp_seconds"], T0 + 60);
    assert_eq!(flow["value"], 2.5);

    // Nested expand and dotted fields through the asset's parent.
    let assets = get(
        &app,
        &admin,
        &format!("/api/v2/physical-device?filter[id_parent]={}", gw.id),
    )
    .await;
    let asset = items(&assets)[0]["id_physical_device"].as_str().unwrap().to_string();
    let path = format!(
        "/api/v2/physical-device/{asset}?expand=parent.group,deviceType&fields=serial_hardware,parent.serial_hardware,parent.group.label"
    );
    let nested = get(&app, &admin, &path).await;
    // Nested records carry their own `_links`, as Yii's Linkable models do.
    assert_eq!(keys(&nested), ["serial_hardware", "parent", "deviceType", "_links"]);
    assert_eq!(keys(&nested["parent"]), ["serial_hardware", "group", "_links"]);
    assert_eq!(keys(&nested["parent"]["group"]), ["label", "_links"]);
    assert_eq!(nested["parent"]["serial_hardware"], "GW-X");
    assert_eq!(nested["parent"]["group"]["label"], "plant");
    assert_eq!(
        nested["parent"]["_links"]["self"]["href"],
        format!("/api/v2/physical-device/{}", gw.id)
    );
    // An asset onboarded by a measurement has the generic asset type.
    assert_eq!(
        nested["deviceType"],
        json!({"id_device_type": "asset", "label": "Asset"})
    );
    // The collection expands the same way.
    let page = get(
        &app,
        &admin,
        "/api/v2/physical-device?expand=parent&fields=serial_hardware,parent.serial_hardware",
    )
    .await;
    let asset_item = items(&page).iter().find(|d| d["serial_hardware"] == "MB-1").unwrap();
    assert_eq!(
        asset_item["parent"],
        json!({"serial_hardware": "GW-X", "_links": {"self": {"href": format!("/api/v2/physical-device/{}", gw.id)}, "index": {"href": "/api/v2/physical-device"}}})
    );

    // latestEvent on a page: each device's own newest event, none for a device without one.
    let mut other = TestGateway::connect(&app, &admin, &group, "GW-Y", "CORE").await;
    other.hello("CORE", json!({})).await;
    let never_connected = json!({"id_group": group, "serial_hardware": "GW-Z", "kind": "CORE"});
    let reply = send(
        app.request(Method::POST, "/api/v2/physical-device", &admin)
            .json(&never_connected),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    gw.events(&json!({"device": "MB-1", "ts": T0 + 5, "type": 310, "value": 1}))
        .await;
    gw.events(&json!({"device": "MB-1", "ts": T0 + 9, "type": 311, "value": 2}))
        .await;
    gw.events(&json!({"device": "MB-1", "ts": T0 + 7, "type": 312, "value": 3}))
        .await;
    let page = get(
        &app,
        &admin,
        "/api/v2/physical-device?expand=latestEvent&fields=serial_hardware,latestEvent.event_type,latestEvent.source_device&sort=serial_hardware",
    )
    .await;
    let summary: Vec<(String, Value, Value)> = items(&page)
        .iter()
        .map(|d| {
            let serial = d["serial_hardware"].as_str().unwrap().to_string();
            (
                serial,
                d["latestEvent"]["event_type"].clone(),
                d["latestEvent"]["source_device"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("GW-X".to_string(), json!("208"), json!(gw.id)),
            ("GW-Y".to_string(), json!("208"), json!(other.id)),
            ("GW-Z".to_string(), Value::Null, Value::Null),
            ("MB-1".to_string(), json!("311"), json!(asset)),
        ]
    );
}

#[tokio::test]
async fn data_sessions_list_expand_downsample_and_download() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "field").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GO-1", "GO").await;
    gw.hello("GO", json!({})).await;
    // A small session: fewer than 500 points come back raw.
    gw.measurements(&json!([
        {"ts": T0 as f64 + 0.5, "values": {"3": 1.0}},
        {"device": "TH-1", "ts": T0 + 1, "values": {"4": 20.0}},
        {"ts": T0 + 2, "values": {"3": 3.0}},
    ]))
    .await;
    gw.power_off().await;

    let body = get(&app, &admin, "/api/v2/data-session?sort=-start").await;
    assert_eq!(keys(&body), ["items", "_links", "_meta", "expand", "labels"]);
    assert_eq!(body["_meta"]["perPage"], 20);
    assert_eq!(
        body["expand"],
        json!([
            "datatypes",
            "datatypesFilter",
            "creator",
            "updater",
            "physicalDevicesFilter",
            "physicalDevices",
            "fromDevice",
            "group",
            "dataIds"
        ])
    );
    for label in [
        "group.label",
        "person.label",
        "person.objectLink",
        "sourceDevicesString",
        "datatypesString",
        "ingestionStatusString",
        "archivingStatusString",
    ] {
        assert!(body["labels"][label].is_string(), "label of {label}");
    }
    let session = &items(&body)[0];
    assert_eq!(
        keys(session),
        [
            "id_data_session",
            "id_group",
            "id_person",
            "label",
            "start",
            "end",
            "created_at",
            "created_by",
            "updated_at",
            "updated_by",
            "archived_at",
            "datapoint_count",
            "isIngestionFinished",
            "isArchived",
            "_links"
        ]
    );
    assert_eq!(session["datapoint_count"], 3);
    assert_eq!(session["isIngestionFinished"], true);
    assert_eq!(session["isArchived"], false);
    assert!(session["end"].is_i64());
    assert_eq!(session["created_by"], Value::Null);
    let id = session["id_data_session"].as_str().unwrap().to_string();

    let expanded = get(
        &app,
        &admin,
        &format!("/api/v2/data-session/{id}?expand=datatypes,dataIds,fromDevice,group,creator,physicalDevicesFilter&fields=id_data_session,fromDevice.serial_hardware,group.label"),
    )
    .await;
    assert_eq!(expanded["datatypes"], json!([3, 4]));
    assert_eq!(expanded["dataIds"].as_array().unwrap().len(), 2);
    assert_eq!(expanded["fromDevice"]["serial_hardware"], "GO-1");
    assert_eq!(expanded["group"]["label"], "field");
    assert_eq!(expanded["creator"], Value::Null);
    assert_eq!(expanded["physicalDevicesFilter"].as_array().unwrap().len(), 2);

    let raw = get(
        &app,
        &admin,
        &format!("/api/v2/data-downsampled?filter[id_data_session]={id}"),
    )
    .await;
    let times: Vec<f64> = items(&raw)
        .iter()
        .map(|b| b["timestamp_seconds"].as_f64().unwrap())
        .collect();
    assert_eq!(times, [T0 as f64 + 0.5, T0 as f64 + 1.0, T0 as f64 + 2.0]);
    assert!(items(&raw).iter().all(|b| b["count_val"] == 1));

    let csv = send(app.get(&format!("/api/v2/data-session/{id}/download-csv"), &admin)).await;
    assert_eq!(csv.status, 200);
    assert!(csv.header("content-type").unwrap().starts_with("text/csv"));
    assert!(
        csv.header("content-disposition")
            .unwrap()
            .contains(&format!("data-session-{id}.csv"))
    );
    let lines: Vec<&str> = csv.text.lines().collect();
    assert_eq!(
        lines[0],
        "timestamp,microseconds,source_device,serial_hardware,datatype,value"
    );
    assert_eq!(lines[1], format!("{T0},500000,{},GO-1,3,1", gw.id));
    assert!(lines[2].ends_with(",TH-1,4,20"));
    assert_eq!(lines.len(), 4);

    // A second session of 1,200 points within its span: 500 equal buckets, counts add up.
    gw.hello("GO", json!({})).await;
    let active = get(&app, &admin, "/api/v2/data-session?filter[end]=NULL").await;
    assert_eq!(items(&active).len(), 1);
    assert_eq!(items(&active)[0]["isIngestionFinished"], false);
    let active_id = items(&active)[0]["id_data_session"].as_str().unwrap().to_string();
    let start = items(&active)[0]["start"].as_i64().unwrap();
    let points: Vec<Value> = (0..1200)
        .map(|i| json!({"ts": start as f64 + i as f64 * 0.0008, "values": {"3": i}}))
        .collect();
    gw.measurements(&Value::Array(points)).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    gw.power_off().await;
    let buckets = get(
        &app,
        &admin,
        &format!("/api/v2/data-downsampled?filter[id_data_session]={active_id}&per-page=10000"),
    )
    .await;
    let list = items(&buckets);
    assert!(list.len() <= 500 && list.len() > 1, "{} buckets", list.len());
    let total: i64 = list.iter().map(|b| b["count_val"].as_i64().unwrap()).sum();
    assert_eq!(total, 1200);
    let min = list
        .iter()
        .map(|b| b["min_val"].as_f64().unwrap())
        .fold(f64::MAX, f64::min);
    let max = list
        .iter()
        .map(|b| b["max_val"].as_f64().unwrap())
        .fold(f64::MIN, f64::max);
    assert_eq!((min, max), (0.0, 1199.0));
    let starts: Vec<f64> = list.iter().map(|b| b["timestamp_seconds"].as_f64().unwrap()).collect();
    assert!(starts.windows(2).all(|w| w[0] < w[1]));

    // Invisible to a member of another group: 404, and nothing in the lists.
    let (viewer_id, viewer) = app.user().await;
    let other = app.create_group(&admin, "other").await;
    app.grant(&admin, &other, &viewer_id, "viewer").await;
    assert_eq!(
        send(app.get(&format!("/api/v2/data-session/{id}/download-csv"), &viewer))
            .await
            .status,
        404
    );
    assert_eq!(
        get(&app, &viewer, "/api/v2/data-session").await["_meta"]["totalCount"],
        0
    );
    let foreign = get(
        &app,
        &viewer,
        &format!("/api/v2/data-downsampled?filter[id_data_session]={id}"),
    )
    .await;
    assert_eq!(foreign["_meta"]["totalCount"], 0);
}

/// `id_iot_device`, `last_data_at` and `signal` are never null: an asset names its gateway's
/// IoT endpoint, and the two others are 0 until the first data or hello (docs/api.md,
/// "Physical devices").
#[tokio::test]
async fn device_fields_the_specification_types_as_integers_are_never_null() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "plant").await;
    let body = json!({"id_group": group, "serial_hardware": "GW-QUIET", "kind": "GO"});
    let quiet = send(app.request(Method::POST, "/api/v2/physical-device", &admin).json(&body))
        .await
        .expect(201)
        .json();
    assert_eq!((&quiet["last_data_at"], &quiet["signal"]), (&json!(0), &json!(0)));
    assert!(quiet["id_iot_device"].is_string());

    let mut gw = TestGateway::connect(&app, &admin, &group, "GW-IOT", "PLUS").await;
    gw.measurements(&json!([{"device": "MB-IOT", "ts": T0, "values": {"1": 9}}]))
        .await;
    let gateway = get(&app, &admin, &format!("/api/v2/physical-device/{}", gw.id)).await;
    let iot = gateway["id_iot_device"].as_str().unwrap().to_string();
    assert_eq!(gateway["signal"], 0, "no hello yet");
    let assets = get(
        &app,
        &admin,
        &format!("/api/v2/physical-device?filter[id_parent]={}&expand=iotDevice", gw.id),
    )
    .await;
    let asset = &assets["items"][0];
    assert_eq!(asset["serial_hardware"], "MB-IOT");
    assert_eq!(asset["id_iot_device"], iot.as_str());
    assert_eq!(asset["iotDevice"]["id_iot_device"], iot.as_str());
    assert!(asset["last_data_at"].as_i64().unwrap() > 0, "data received");
    assert_eq!(asset["signal"], 0);
    // Filters see the same values the records show.
    let by_endpoint = get(
        &app,
        &admin,
        &format!("/api/v2/physical-device?filter[id_iot_device]={iot}"),
    )
    .await;
    assert_eq!(by_endpoint["_meta"]["totalCount"], 2);
    let all = get(&app, &admin, "/api/v2/physical-device").await;
    let zero = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["last_data_at"] == 0)
        .count();
    assert!(zero >= 1, "the quiet gateway");
    let silent = get(&app, &admin, "/api/v2/physical-device?filter[last_data_at]=0").await;
    assert_eq!(silent["_meta"]["totalCount"], zero);
}

/// Filters on fields of related records, as Yii filters on a joined relation: a device's
/// `group.label` and `parent.serial_hardware`, a data session's `group.label` (docs/api.md,
/// "Filters on related records").
#[tokio::test]
async fn filters_reach_the_group_and_the_parent() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let north = app.create_group(&admin, "North plant").await;
    let south = app.create_group(&admin, "South yard").await;
    let mut gw_n = TestGateway::connect(&app, &admin, &north, "GO-N", "GO").await;
    let mut gw_s = TestGateway::connect(&app, &admin, &south, "GO-S", "GO").await;
    for gw in [&mut gw_n, &mut gw_s] {
        gw.hello("GO", json!({})).await;
    }
    gw_n.measurements(&json!([
        {"device": "TH-N1", "ts": T0, "values": {"4": 20.0}},
        {"device": "TH-N2", "ts": T0, "values": {"4": 21.0}},
    ]))
    .await;
    gw_s.measurements(&json!([{"device": "TH-S1", "ts": T0, "values": {"4": 22.0}}]))
        .await;
    gw_n.power_off().await;
    gw_s.power_off().await;

    let serials = |body: &Value| -> Vec<String> {
        let mut list: Vec<String> = items(body)
            .iter()
            .map(|d| d["serial_hardware"].as_str().unwrap().to_string())
            .collect();
        list.sort();
        list
    };
    let devices = |query: &str| format!("/api/v2/physical-device?{query}");
    let north_only = get(&app, &admin, &devices("filter[group.label]=North%20plant")).await;
    assert_eq!(serials(&north_only), ["GO-N", "TH-N1", "TH-N2"]);
    let like = get(&app, &admin, &devices("filter[group.label][like]=yard")).await;
    assert_eq!(serials(&like), ["GO-S", "TH-S1"]);
    let children = get(&app, &admin, &devices("filter[parent.serial_hardware]=GO-N")).await;
    assert_eq!(serials(&children), ["TH-N1", "TH-N2"]);
    let gateways = get(&app, &admin, &devices("filter[parent.serial_hardware]=NULL")).await;
    assert_eq!(serials(&gateways), ["GO-N", "GO-S"]);
    let combined = get(
        &app,
        &admin,
        &devices("filter[or][0][parent.serial_hardware]=GO-S&filter[or][1][group.label][in][]=North%20plant&filter[serial_hardware][neq]=GO-N"),
    )
    .await;
    assert_eq!(serials(&combined), ["TH-N1", "TH-N2", "TH-S1"]);
    // From a JSON body too, and each page's count agrees with its rows.
    let body = send(
        app.get("/api/v2/physical-device", &admin)
            .json(&json!({"filter": {"parent.serial_hardware": {"like": "go-"}}})),
    )
    .await
    .expect(200)
    .json();
    assert_eq!(body["_meta"]["totalCount"], 3);
    // Related fields filter; they do not sort (the default order applies), and other related
    // names are unknown.
    let sorted = get(&app, &admin, &devices("sort=-group.label")).await;
    let default = get(&app, &admin, &devices("")).await;
    assert_eq!(sorted["items"], default["items"]);
    let unknown = send(app.get(&devices("filter[group.type]=0"), &admin)).await;
    assert_eq!(unknown.status, 422);
    assert!(
        unknown.text.contains("Unknown filter attribute \\\"group.type\\\""),
        "{}",
        unknown.text
    );
    let typed = send(app.get(&devices("filter[group.label][gt]=x"), &admin)).await;
    assert_eq!(typed.status, 422);
    assert!(
        typed
            .text
            .contains("\\\"group.label\\\" does not support operator \\\"gt\\\"."),
        "{}",
        typed.text
    );

    let sessions = get(&app, &admin, "/api/v2/data-session?filter[group.label]=South%20yard").await;
    assert_eq!(sessions["_meta"]["totalCount"], 1);
    assert_eq!(items(&sessions)[0]["id_group"], south.as_str());
    // A member sees only their groups, whatever the related filter says.
    let (viewer_id, viewer) = app.user().await;
    app.grant(&admin, &north, &viewer_id, "viewer").await;
    let hidden = get(&app, &viewer, &devices("filter[group.label]=South%20yard")).await;
    assert_eq!(hidden["_meta"]["totalCount"], 0);
}

/// A text cell of the session CSV that a spreadsheet would run as a formula gets a leading `'`
/// (docs/api.md, "Data sessions").
#[tokio::test]
async fn csv_cells_never_start_a_formula() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let group = app.create_group(&admin, "field").await;
    let mut gw = TestGateway::connect(&app, &admin, &group, "GO-CSV", "GO").await;
    gw.hello("GO", json!({})).await;
    gw.measurements(&json!([
        {"device": "=HYPERLINK(\"http://x\")", "ts": T0, "values": {"4": -1.5}},
        {"device": "@SUM(A1)", "ts": T0 + 1, "values": {"4": 2.0}},
    ]))
    .await;
    gw.power_off().await;
    let sessions = get(&app, &admin, "/api/v2/data-session").await;
    let id = items(&sessions)[0]["id_data_session"].as_str().unwrap().to_string();
    let csv = send(app.get(&format!("/api/v2/data-session/{id}/download-csv"), &admin))
        .await
        .expect(200);
    let lines: Vec<&str> = csv.text.lines().collect();
    assert_eq!(lines.len(), 3, "{}", csv.text);
    assert!(
        lines[1].contains(",\"'=HYPERLINK(\"\"http://x\"\")\",4,-1.5"),
        "{}",
        lines[1]
    );
    assert!(lines[2].contains(",'@SUM(A1),4,2"), "{}", lines[2]);
}

/// Serials: unique among provisioned gateways, and an asset's among the children of its
/// gateway. An asset announced in one group never blocks provisioning a gateway of that serial
/// in another, and two gateways may each have an asset of one serial.
#[tokio::test]
async fn an_asset_serial_never_blocks_another_group() {
    let app = TestApp::spawn().await;
    let (_, admin) = app.admin().await;
    let a = app.create_group(&admin, "A").await;
    let b = app.create_group(&admin, "B").await;
    let mut gw_a = TestGateway::connect(&app, &admin, &a, "GW-A1", "PLUS").await;
    gw_a.measurements(&json!([
        {"device": "GW-B2", "ts": T0, "values": {"1": 1}},
        {"device": "MB-1", "ts": T0, "values": {"1": 2}},
    ]))
    .await;
    // Group B provisions GW-B2, the serial group A's gateway announced as an asset.
    let mut gw_b = TestGateway::connect(&app, &admin, &b, "GW-B2", "CORE").await;
    gw_b.measurements(&json!([
        {"ts": T0, "values": {"1": 3}},
        {"device": "MB-1", "ts": T0, "values": {"1": 4}},
    ]))
    .await;
    // A second gateway of that serial is refused, as before.
    let again = json!({"id_group": a, "serial_hardware": "GW-B2", "kind": "GO"});
    let reply = send(
        app.request(Method::POST, "/api/v2/physical-device", &admin)
            .json(&again),
    )
    .await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    let mb = get(&app, &admin, "/api/v2/physical-device?filter[serial_hardware]=MB-1").await;
    let mut parents: Vec<&str> = items(&mb).iter().map(|d| d["id_parent"].as_str().unwrap()).collect();
    parents.sort_unstable();
    let mut expected = vec![gw_a.id.as_str(), gw_b.id.as_str()];
    expected.sort_unstable();
    assert_eq!(parents, expected);
    let b2 = get(
        &app,
        &admin,
        "/api/v2/physical-device?filter[serial_hardware]=GW-B2&sort=id_group",
    )
    .await;
    assert_eq!(b2["_meta"]["totalCount"], 2);
    let groups: Vec<&str> = items(&b2).iter().map(|d| d["id_group"].as_str().unwrap()).collect();
    assert!(groups.contains(&a.as_str()) && groups.contains(&b.as_str()));
}

//! The physical-device collection (`GET /api/v2/physical-device`) and the related records its
//! expand options embed (docs/api.md, "Physical devices"), each loaded for a whole page at once.

use devicecloud_query::{AttrKind, Attribute, SortKey};

use crate::collection::{
    self, Column, GROUP, GROUP_LABEL, ListArgs, Listing, Relation, Table, attributes, names, same_name,
};
use crate::database::Result;
use crate::database::db::{Db, on_pool};
use crate::tables::devices::{DeviceRow, output};
use crate::tables::events::{self, EventRow};

const TABLE: &str = "physical_devices";

/// The filterable attributes: every field of the specification (all of them sortable), then
/// the fields of related records a filter may name (docs/api.md, "Filters on related records").
pub const COLUMNS: [Column; 25] = [
    same_name(TABLE, "id_physical_device", AttrKind::String),
    same_name(TABLE, "serial_hardware", AttrKind::String),
    same_name(TABLE, "label", AttrKind::String),
    same_name(TABLE, "id_parent", AttrKind::String),
    same_name(TABLE, "id_group", AttrKind::String),
    same_name(TABLE, "id_device_type", AttrKind::String),
    same_name(TABLE, "id_iot_device", AttrKind::String),
    same_name(TABLE, "is_connected", AttrKind::Integer),
    same_name(TABLE, "expected_offline_interval", AttrKind::Integer),
    same_name(TABLE, "expected_live_status", AttrKind::Integer),
    same_name(TABLE, "device_status", AttrKind::Integer),
    same_name(TABLE, "connection", AttrKind::String),
    same_name(TABLE, "created_at", AttrKind::Integer),
    same_name(TABLE, "last_data_at", AttrKind::Integer),
    same_name(TABLE, "signal", AttrKind::Integer),
    same_name(TABLE, "commissioned_at", AttrKind::Integer),
    same_name(TABLE, "calibrated_at", AttrKind::Integer),
    same_name(TABLE, "reconnected_at", AttrKind::Integer),
    same_name(TABLE, "platform_software_version", AttrKind::String),
    same_name(TABLE, "app_software_version", AttrKind::String),
    same_name(TABLE, "archived_serial", AttrKind::String),
    same_name(TABLE, "archived_at", AttrKind::Integer),
    same_name(TABLE, "archived_by", AttrKind::String),
    GROUP_LABEL,
    collection::column(
        "parent.serial_hardware",
        "rel_parent",
        "serial_hardware",
        AttrKind::String,
    ),
];

/// The device's group and parent, joined when a filter names their fields.
const RELATIONS: [Relation; 2] = [
    GROUP,
    Relation {
        alias: "rel_parent",
        table: TABLE,
        key: "id_physical_device",
        via: "id_parent",
    },
];

/// The filter attributes of the device collection.
pub const ATTRIBUTES: [Attribute; 25] = attributes(&COLUMNS);
/// The sortable attributes of the device collection: its own fields.
pub const SORTABLE: &[&str] = NAMES.split_at(23).0;
const NAMES: [&str; 25] = names(&COLUMNS);

/// The devices of the groups a caller may see, archived ones included, oldest first.
static DEVICES: Table<DeviceRow> = Table::new(TABLE, &COLUMNS, &RELATIONS, SortKey::asc("created_at"), &[COLUMNS[0]]);

/// A page of the devices in the groups `scope` allows (archived ones included: they carry
/// `archived_at`), filtered and sorted as asked; default order is creation time.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<DeviceRow>> {
    DEVICES.scoped(db, args).await
}

/// What a device carries besides its specification fields: the JSON documents from hello and
/// the last self-test (docs/gateway-protocol.md, "Messages"; docs/api.md, "Physical devices").
#[derive(Clone, Debug, Default, sqlx::FromRow)]
pub struct DeviceDocuments {
    pub id_physical_device: String,
    pub location_json: Option<String>,
    pub sim_json: Option<String>,
    pub modbus_template_json: Option<String>,
    pub device_info_json: Option<String>,
    pub device_info_at: Option<i64>,
}

/// The gateway's MQTT endpoint identity (`iotDevice`); serialised, the API's record of it.
#[derive(Clone, Debug, sqlx::FromRow, serde::Serialize)]
pub struct IotDeviceRow {
    pub id_iot_device: String,
    #[serde(skip_serializing)]
    pub id_physical_device: String,
    pub protocol: String,
    pub client_identifier: String,
    pub last_connect_at: Option<i64>,
    pub last_disconnect_at: Option<i64>,
}

/// One entry of a device's Modbus template history.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct TemplateRow {
    pub id_template: i64,
    pub id_physical_device: String,
    pub template_json: String,
    pub received_at: i64,
}

/// The newest raw point of one container (`group.latestData`); serialised, a raw data record.
#[derive(Clone, Debug, sqlx::FromRow, serde::Serialize)]
pub struct LatestRow {
    pub id_container_data_latest: String,
    pub id_group: String,
    pub datatype: i64,
    pub source_device: String,
    #[serde(rename = "timestamp_seconds")]
    pub latest_seconds: i64,
    #[serde(rename = "microseconds")]
    pub latest_microseconds: i64,
    #[serde(rename = "value")]
    pub latest_value: f64,
}

/// `$1, $2, …` for `n` values.
fn placeholders(n: usize) -> String {
    (1..=n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// Runs `SELECT … WHERE <column> IN (ids) <rest>` for a page of ids (at most a page: 1000).
async fn by_ids<T>(db: &Db, select: &str, column: &str, ids: &[&str], rest: &str) -> Result<Vec<T>>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
        + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
        + Send
        + Unpin,
{
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!("{select} WHERE {column} IN ({}) {rest}", placeholders(ids.len()));
    Ok(on_pool!(db, |p| {
        let mut q = sqlx::query_as::<_, T>(sqlx::AssertSqlSafe(sql));
        for id in ids {
            q = q.bind(*id);
        }
        q.fetch_all(p).await
    })?)
}

/// The JSON documents of these devices.
pub async fn documents(db: &Db, ids: &[&str]) -> Result<Vec<DeviceDocuments>> {
    let select = "SELECT id_physical_device, location_json, sim_json, modbus_template_json, device_info_json, \
                  device_info_at FROM physical_devices";
    by_ids(db, select, "id_physical_device", ids, "").await
}

/// MQTT endpoints by their ids (an asset shares its gateway's).
pub async fn iot_devices(db: &Db, ids: &[&str]) -> Result<Vec<IotDeviceRow>> {
    let select = "SELECT id_iot_device, id_physical_device, protocol, client_identifier, last_connect_at, \
                  last_disconnect_at FROM iot_devices";
    by_ids(db, select, "id_iot_device", ids, "").await
}

/// Every Modbus template these devices reported, oldest first.
pub async fn template_history(db: &Db, ids: &[&str]) -> Result<Vec<TemplateRow>> {
    let select = "SELECT id_template, id_physical_device, template_json, received_at FROM modbus_template_history";
    by_ids(
        db,
        select,
        "id_physical_device",
        ids,
        "ORDER BY received_at, id_template",
    )
    .await
}

/// Devices by id (parents of a page).
pub async fn devices(db: &Db, ids: &[&str]) -> Result<Vec<DeviceRow>> {
    let select = format!("SELECT {} FROM physical_devices", output().join(", "));
    by_ids(db, &select, "id_physical_device", ids, "").await
}

/// The newest event of each device, in one statement: for each device of the page one indexed
/// look-up (`events (source_device, occurred_at)`, newest first) inside the database rather
/// than one round trip per device.
pub async fn latest_events(db: &Db, ids: &[&str]) -> Result<Vec<EventRow>> {
    let select = format!(
        "{} WHERE id_event IN (SELECT (SELECT e.id_event FROM events e WHERE e.source_device = d.id_physical_device \
         ORDER BY e.occurred_at DESC, e.id_event DESC LIMIT 1) FROM physical_devices d",
        events::SELECT
    );
    by_ids(db, &select, "d.id_physical_device", ids, ")").await
}

/// The newest point of every container of these groups that has one.
pub async fn latest_data(db: &Db, groups: &[&str]) -> Result<Vec<LatestRow>> {
    let select = "SELECT id_container_data_latest, id_group, datatype, source_device, latest_seconds, \
                  latest_microseconds, latest_value FROM containers";
    let rest = "AND latest_seconds IS NOT NULL ORDER BY source_device, datatype";
    by_ids(db, select, "id_group", groups, rest).await
}

/// How many series with a newest point each of these groups has (`group.latestData`'s length),
/// counted before the series are loaded.
pub async fn latest_data_counts(db: &Db, groups: &[&str]) -> Result<Vec<(String, i64)>> {
    let select = "SELECT id_group, COUNT(*) FROM containers";
    by_ids(
        db,
        select,
        "id_group",
        groups,
        "AND latest_seconds IS NOT NULL GROUP BY id_group",
    )
    .await
}

/// How many templates each of these devices' Modbus template history holds.
pub async fn template_history_counts(db: &Db, ids: &[&str]) -> Result<Vec<(String, i64)>> {
    let select = "SELECT id_physical_device, COUNT(*) FROM modbus_template_history";
    by_ids(db, select, "id_physical_device", ids, "GROUP BY id_physical_device").await
}

/// The newest point of every container of these devices (the dashboard's latest values).
pub async fn latest_of_devices(db: &Db, ids: &[&str]) -> Result<Vec<LatestRow>> {
    let select = "SELECT id_container_data_latest, id_group, datatype, source_device, latest_seconds, \
                  latest_microseconds, latest_value FROM containers";
    let rest = "AND latest_seconds IS NOT NULL ORDER BY source_device, datatype";
    by_ids(db, select, "source_device", ids, rest).await
}

/// How many devices a group has, and how many are online, offline, and expected on but off.
/// A device behind a gateway has no connection of its own: it is online while its gateway is.
#[derive(Clone, Debug, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct StatusCounts {
    pub id_group: String,
    pub devices: i64,
    pub online: i64,
    pub offline: i64,
    pub expected_on_but_off: i64,
}

/// The device counts of these groups (archived devices left out); groups without devices are
/// absent.
pub async fn status_counts(db: &Db, groups: &[&str]) -> Result<Vec<StatusCounts>> {
    let select = "SELECT d.id_group AS id_group, COUNT(*) AS devices, \
                  SUM(CASE WHEN COALESCE(p.is_connected, d.is_connected) = 1 THEN 1 ELSE 0 END) AS online, \
                  SUM(CASE WHEN COALESCE(p.is_connected, d.is_connected) = 1 THEN 0 ELSE 1 END) AS offline, \
                  SUM(CASE WHEN d.device_status = 2 THEN 1 ELSE 0 END) AS expected_on_but_off \
                  FROM physical_devices d LEFT JOIN physical_devices p ON p.id_physical_device = d.id_parent";
    by_ids(
        db,
        select,
        "d.id_group",
        groups,
        "AND d.archived_at IS NULL GROUP BY d.id_group",
    )
    .await
}

//! Physical devices: gateways (provisioned through the API, with a device token) and the assets
//! behind them (created by their gateway). Device tokens are stored as SHA-256 hashes.

use crate::database::Result;
use crate::database::StoreError;
use crate::database::db::{Db, Tx, on_pool, values};
use crate::database::new_id;

/// A stored physical device with every field of the specification and the service's own; it
/// serializes as the API's record (every field but `kind`, which the API shows as
/// `id_device_type`).
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize, serde::Serialize)]
pub struct DeviceRow {
    pub id_physical_device: String,
    pub serial_hardware: String,
    pub label: String,
    pub id_parent: Option<String>,
    pub id_group: String,
    pub id_device_type: String,
    pub id_iot_device: Option<String>,
    #[serde(skip_serializing)]
    pub kind: Option<String>,
    pub is_connected: i64,
    pub expected_offline_interval: i64,
    pub expected_live_status: i64,
    pub device_status: i64,
    pub connection: String,
    pub created_at: i64,
    /// 0 until the first measurement (docs/api.md, "Physical devices").
    pub last_data_at: i64,
    /// 0 until a hello reports one.
    pub signal: i64,
    pub commissioned_at: Option<i64>,
    pub calibrated_at: Option<i64>,
    pub reconnected_at: Option<i64>,
    pub platform_software_version: String,
    pub app_software_version: String,
    pub archived_serial: Option<String>,
    pub archived_at: Option<i64>,
    pub archived_by: Option<String>,
}

/// The columns of a [`DeviceRow`], in its order: its own field names, so that the record is
/// declared once.
pub fn output() -> &'static [&'static str] {
    static FIELDS: std::sync::LazyLock<&[&str]> = std::sync::LazyLock::new(crate::collection::output_of::<DeviceRow>);
    *FIELDS
}

/// A gateway to provision.
#[derive(Clone, Debug)]
pub struct NewGateway<'a> {
    pub id_group: &'a str,
    pub serial_hardware: &'a str,
    /// `GO`, `CORE` or `PLUS`; also the gateway's `id_device_type`.
    pub kind: &'a str,
    pub label: &'a str,
    pub expected_offline_interval: i64,
}

/// Changes a manager may make; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct DeviceChanges<'a> {
    pub label: Option<&'a str>,
    pub expected_offline_interval: Option<i64>,
    pub expected_live_status: Option<i64>,
}

/// What CONNECT needs to know about a serial: the live (not archived) device with that serial,
/// else the most recently archived one, so that an archived gateway is told "not authorized"
/// rather than "bad user name or password".
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct GatewayAuth {
    pub id_physical_device: String,
    pub id_group: String,
    pub kind: Option<String>,
    pub device_token_hash: Option<String>,
    pub archived_at: Option<i64>,
    pub group_deleted_at: Option<i64>,
}

fn select_sql(where_clause: &str) -> String {
    format!(
        "SELECT {} FROM physical_devices WHERE {where_clause}",
        output().join(", ")
    )
}

/// A device with the deletion time of its group and, for a connected gateway, the node holding
/// its connection: what the ownership check of a device and a command need, read in one query
/// (a command's rights check is on the path of every ping).
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct OwnedDevice {
    #[sqlx(flatten)]
    pub device: DeviceRow,
    pub group_deleted_at: Option<i64>,
    /// The node whose connection with the gateway is live (`None` when it is not connected,
    /// and for a device behind a gateway).
    pub connected_node: Option<String>,
}

/// One device, archived or not, with its group's deletion time and, on PostgreSQL, the node of
/// its connection (SQLite serves one node: `connected_node` is `None` there, and the lookup
/// would cost every command's rights check).
pub async fn get_owned(db: &Db, id: &str) -> Result<Option<OwnedDevice>> {
    static SQL: std::sync::LazyLock<[String; 2]> = std::sync::LazyLock::new(|| {
        let columns: Vec<String> = output().iter().map(|c| format!("d.{c}")).collect();
        let columns = columns.join(", ");
        let from = "FROM physical_devices d JOIN groups g ON g.id_group = d.id_group";
        [
            format!(
                "SELECT {columns}, g.deleted_at AS group_deleted_at, CAST(NULL AS TEXT) AS connected_node \
                 {from} WHERE d.id_physical_device = $1"
            ),
            format!(
                "SELECT {columns}, g.deleted_at AS group_deleted_at, \
                 CASE WHEN d.is_connected = 1 THEN i.node_id END AS connected_node {from} \
                 LEFT JOIN iot_devices i ON i.id_physical_device = d.id_physical_device \
                 WHERE d.id_physical_device = $1"
            ),
        ]
    });
    let sql = match db.backend() {
        crate::sql::Backend::Sqlite => &SQL[0],
        crate::sql::Backend::Postgres => &SQL[1],
    };
    db.row::<OwnedDevice>(sqlx::AssertSqlSafe(sql.as_str()), values![id])
        .await
}

/// Provisions a gateway with the hash of its device token; a serial already in use by a
/// device that is not archived is a `Conflict("serial_hardware")`.
pub async fn provision(db: &Db, gateway: &NewGateway<'_>, token_hash: &str, now: i64) -> Result<DeviceRow> {
    let id = new_id();
    let id_iot_device = new_id();
    let insert = "INSERT INTO physical_devices (id_physical_device, serial_hardware, label, id_group, id_device_type, \
                  id_iot_device, kind, expected_offline_interval, created_at, device_token_hash, last_data_at, signal) \
                  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 0, 0)";
    let endpoint = "INSERT INTO iot_devices (id_iot_device, id_physical_device, protocol) VALUES ($1, $2, 'mqtt')";
    let turn = db.write_turn().await?;
    // One async block per backend so that `?` stops inside it and the unique violation can be
    // told apart below.
    on_pool!(db, |p| async {
        let mut tx = p.begin().await?;
        sqlx::query(insert)
            .bind(&id)
            .bind(gateway.serial_hardware)
            .bind(gateway.label)
            .bind(gateway.id_group)
            .bind(gateway.kind)
            .bind(&id_iot_device)
            .bind(gateway.kind)
            .bind(gateway.expected_offline_interval)
            .bind(now)
            .bind(token_hash)
            .execute(&mut *tx)
            .await?;
        sqlx::query(endpoint)
            .bind(&id_iot_device)
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }
    .await)
    .map_err(|e| StoreError::from(e).conflict_on("serial_hardware"))?;
    drop(turn);
    get(db, &id)
        .await?
        .ok_or(StoreError::Decode("provisioned device vanished".into()))
}

/// One device, archived or not.
pub async fn get(db: &Db, id: &str) -> Result<Option<DeviceRow>> {
    let sql = select_sql("id_physical_device = $1");
    db.row::<DeviceRow>(sqlx::AssertSqlSafe(sql), values![id]).await
}

/// The CONNECT view of a serial (see [`GatewayAuth`]).
pub async fn gateway_auth(db: &Db, serial: &str) -> Result<Option<GatewayAuth>> {
    let sql = "SELECT d.id_physical_device, d.id_group, d.kind, d.device_token_hash, d.archived_at, g.deleted_at AS group_deleted_at \
               FROM physical_devices d JOIN groups g ON g.id_group = d.id_group \
               WHERE d.serial_hardware = $1 AND d.id_parent IS NULL \
               ORDER BY (d.archived_at IS NULL) DESC, d.archived_at DESC LIMIT 1";
    db.row::<GatewayAuth>(sql, values![serial]).await
}

/// Replaces the device token hash of a live gateway; returns whether one was changed.
pub async fn rotate_token(db: &Db, id: &str, token_hash: &str) -> Result<bool> {
    let sql = "UPDATE physical_devices SET device_token_hash = $1 WHERE id_physical_device = $2 AND \
               archived_at IS NULL AND id_parent IS NULL";
    let n = db.execute(sql, values![token_hash, id]).await?;
    Ok(n > 0)
}

/// Applies a manager's changes and returns the device.
pub async fn update(db: &Db, id: &str, changes: &DeviceChanges<'_>) -> Result<Option<DeviceRow>> {
    db.execute(
        "UPDATE physical_devices SET label = COALESCE($1, label), \
         expected_offline_interval = COALESCE($2, expected_offline_interval), \
         expected_live_status = COALESCE($3, expected_live_status) WHERE id_physical_device = $4",
        values![
            changes.label,
            changes.expected_offline_interval,
            changes.expected_live_status,
            id
        ],
    )
    .await?;
    get(db, id).await
}

/// The gateways of a group that are connected (to any node), for closing their connections.
pub async fn connected_gateways(db: &Db, id_group: &str) -> Result<Vec<String>> {
    let sql = "SELECT id_physical_device FROM physical_devices WHERE id_group = $1 AND id_parent IS NULL \
               AND is_connected = 1 ORDER BY id_physical_device";
    let rows: Vec<(String,)> = db.rows(sql, values![id_group]).await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Archives a device: `archived_at`, `archived_by`, `archived_serial`. The serial becomes free
/// for a new device. The token's hash is kept, only so that CONNECT with the right token can be
/// told "not authorized" while a wrong one is "bad user name or password" (the device never
/// connects again). Returns whether the device was live.
pub async fn archive(db: &Db, id: &str, by: &str, now: i64) -> Result<bool> {
    let n = db
        .execute(
            "UPDATE physical_devices SET archived_at = $1, archived_by = $2, archived_serial = serial_hardware, \
         is_connected = 0 WHERE id_physical_device = $3 AND archived_at IS NULL",
            values![now, by, id],
        )
        .await?;
    Ok(n > 0)
}

/// What a hello (birth message) sets on its gateway (docs/gateway-protocol.md, "Messages").
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HelloUpdate<'a> {
    pub connection: &'a str,
    pub signal: Option<i64>,
    pub platform_software_version: Option<&'a str>,
    pub app_software_version: Option<&'a str>,
    pub wifi_enabled: Option<bool>,
    pub location_json: Option<String>,
    pub sim_json: Option<String>,
    pub modbus_template_json: Option<String>,
    pub client_identifier: &'a str,
    pub node_id: &'a str,
}

/// How many distinct Modbus templates a device's history keeps, newest first
/// (docs/gateway-protocol.md, "Limits").
pub const TEMPLATE_HISTORY: usize = 20;

/// Marks a gateway connected with what its hello said; `reconnected_at` is set when it had
/// been disconnected before. A new Modbus template is appended to the template history, which
/// keeps the last [`TEMPLATE_HISTORY`] distinct ones.
pub async fn hello(db: &Db, id: &str, hello: &HelloUpdate<'_>, now: i64) -> Result<()> {
    let update = "UPDATE physical_devices SET \
        reconnected_at = CASE WHEN last_disconnect_at IS NOT NULL AND is_connected = 0 THEN $1 ELSE reconnected_at END, \
        is_connected = 1, connection = $2, signal = COALESCE($3, signal), \
        platform_software_version = COALESCE($4, platform_software_version), \
        app_software_version = COALESCE($5, app_software_version), wifi_enabled = COALESCE($6, wifi_enabled), \
        location_json = COALESCE($7, location_json), sim_json = COALESCE($8, sim_json), \
        commissioned_at = COALESCE(commissioned_at, $1) WHERE id_physical_device = $9";
    let endpoint = "UPDATE iot_devices SET client_identifier = $1, node_id = $2, last_connect_at = $3 \
                    WHERE id_physical_device = $4";
    let previous_template = "SELECT modbus_template_json FROM physical_devices WHERE id_physical_device = $1";
    let set_template = "UPDATE physical_devices SET modbus_template_json = $1 WHERE id_physical_device = $2";
    let history =
        "INSERT INTO modbus_template_history (id_physical_device, template_json, received_at) VALUES ($1, $2, $3)";
    // The history holds distinct templates: one sent again moves to the end.
    let same_template = "DELETE FROM modbus_template_history WHERE id_physical_device = $1 AND template_json = $2";
    let oldest = format!(
        "DELETE FROM modbus_template_history WHERE id_physical_device = $1 AND id_template NOT IN \
         (SELECT id_template FROM modbus_template_history WHERE id_physical_device = $1 \
         ORDER BY received_at DESC, id_template DESC LIMIT {TEMPLATE_HISTORY})"
    );
    let _turn = db.write_turn().await?;
    on_pool!(db, |p| async {
        let mut tx = p.begin().await?;
        sqlx::query(update)
            .bind(now)
            .bind(hello.connection)
            .bind(hello.signal)
            .bind(hello.platform_software_version)
            .bind(hello.app_software_version)
            .bind(hello.wifi_enabled.map(i64::from))
            .bind(&hello.location_json)
            .bind(&hello.sim_json)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(endpoint)
            .bind(hello.client_identifier)
            .bind(hello.node_id)
            .bind(now)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if let Some(template) = &hello.modbus_template_json {
            let before: Option<String> = sqlx::query_scalar(previous_template)
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
            if before.as_ref() != Some(template) {
                sqlx::query(set_template)
                    .bind(template)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(same_template)
                    .bind(id)
                    .bind(template)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(history)
                    .bind(id)
                    .bind(template)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(sqlx::AssertSqlSafe(oldest.as_str()))
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await
    }
    .await)?;
    Ok(())
}

/// Marks gateways disconnected (connection lost, clean DISCONNECT or power off), all in one
/// transaction, as node `node_id` saw them go. `gone` is asked about each once the write turn
/// is held: a gateway that connected to this node again meanwhile answers `false` and stays
/// connected; one whose latest connection is on another node (`iot_devices.node_id`, set by
/// its hello there) is left as that node has it. Returns how many were asked to be marked.
///
/// On PostgreSQL the devices are locked first in key order, as the ingest writers lock theirs
/// (`Tx::lock_in_order`): a departure of many gateways deadlocked with ingest transactions
/// updating some of the same devices in another order.
pub async fn disconnected(
    db: &Db,
    ids: &[&str],
    node_id: &str,
    now: i64,
    gone: &(dyn Fn(&str) -> bool + Sync),
) -> Result<usize> {
    let device = "UPDATE physical_devices SET is_connected = 0, last_disconnect_at = $1 \
        WHERE id_physical_device = $2 AND NOT EXISTS (SELECT 1 FROM iot_devices i \
        WHERE i.id_physical_device = $2 AND i.node_id IS NOT NULL AND i.node_id <> $3)";
    let endpoint = "UPDATE iot_devices SET last_disconnect_at = $1 \
        WHERE id_physical_device = $2 AND (node_id IS NULL OR node_id = $3)";
    let mut tx = Tx::begin(db).await?;
    let ids: Vec<&str> = ids.iter().copied().filter(|id| gone(id)).collect();
    if ids.is_empty() {
        tx.rollback().await?;
        return Ok(0);
    }
    tx.lock_in_order("physical_devices", "id_physical_device", &ids).await?;
    for id in &ids {
        for sql in [device, endpoint] {
            tx.execute(sql.to_string(), values![now, *id, node_id]).await?;
        }
    }
    tx.commit().await?;
    Ok(ids.len())
}

/// An asset behind a gateway, found by serial.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Child {
    /// The asset's device id (created if it was unknown).
    Device(String),
    /// The asset could not be made for this gateway (the gateway is no longer in the group its
    /// connection named).
    Taken,
    /// The asset is unknown and the gateway already has its most children.
    Full,
}

/// An asset as a gateway names it.
#[derive(Clone, Copy, Debug)]
pub struct Asset<'a> {
    pub gateway: &'a str,
    pub id_group: &'a str,
    pub serial: &'a str,
    /// Kept when `None`; `asset` for a new asset.
    pub device_type: Option<&'a str>,
    /// Kept when `None`; empty for a new asset.
    pub label: Option<&'a str>,
}

/// The asset of `asset.gateway` with `asset.serial`, created on first sight (`id_parent` = the
/// gateway, same group) unless the gateway already has `max_children` live children, and
/// updated with `device_type` and `label` when given (docs/gateway-protocol.md, "Messages" and
/// "Limits").
pub async fn child(db: &Db, asset: &Asset<'_>, max_children: usize, now: i64) -> Result<Child> {
    // An asset's serial is unique among its gateway's children only: another group's asset or
    // gateway of the same serial is another device.
    let find = "SELECT id_physical_device, id_parent FROM physical_devices \
                WHERE serial_hardware = $1 AND id_parent = $2 AND archived_at IS NULL";
    let found: Option<(String, Option<String>)> = db.row(find, values![asset.serial, asset.gateway]).await?;
    if let Some((id, _)) = found {
        if asset.device_type.is_some() || asset.label.is_some() {
            let update = "UPDATE physical_devices SET id_device_type = COALESCE($1, id_device_type), \
                          label = COALESCE($2, label) WHERE id_physical_device = $3";
            db.execute(update, values![asset.device_type, asset.label, &id]).await?;
        }
        return Ok(Child::Device(id));
    }
    let id = new_id();
    let max = i64::try_from(max_children).unwrap_or(i64::MAX);
    // The asset shares its gateway's IoT endpoint (the connection it reports through). The
    // count and the insert are one statement, so two connections of one gateway cannot both
    // pass the limit on their own count.
    let insert = "INSERT INTO physical_devices (id_physical_device, serial_hardware, label, id_parent, id_group, \
                  id_device_type, created_at, expected_offline_interval, id_iot_device, last_data_at, signal) \
                  SELECT $1, $2, $3, $4, id_group, $5, $6, expected_offline_interval, id_iot_device, 0, 0 \
                  FROM physical_devices WHERE id_physical_device = $4 AND id_group = $7 \
                  AND (SELECT count(*) FROM physical_devices c WHERE c.id_parent = $4 AND c.archived_at IS NULL) < $8";
    let inserted = db
        .execute(
            insert,
            values![
                &id,
                asset.serial,
                asset.label.unwrap_or_default(),
                asset.gateway,
                asset.device_type.unwrap_or("asset"),
                now,
                asset.id_group,
                max
            ],
        )
        .await;
    match inserted {
        Ok(1) => Ok(Child::Device(id)),
        Ok(_) => {
            let count = "SELECT count(*) FROM physical_devices WHERE id_parent = $1 AND archived_at IS NULL";
            let children: i64 = on_pool!(db, |p| sqlx::query_scalar(count).bind(asset.gateway).fetch_one(p).await)?;
            Ok(if children >= max { Child::Full } else { Child::Taken })
        }
        // Another connection created it meanwhile: look again.
        Err(e) if e.is_unique_violation() => {
            let again: Option<(String, Option<String>)> = db.row(find, values![asset.serial, asset.gateway]).await?;
            Ok(match again {
                Some((id, Some(parent))) if parent == asset.gateway => Child::Device(id),
                _ => Child::Taken,
            })
        }
        Err(e) => Err(e),
    }
}

/// Brings every live device's `device_status` up to date at `now` (docs/api.md, "Management
/// endpoints"): 0 expected off; 1 expected on and on (connected, or heard from within
/// `expected_offline_interval`); 2 expected on but silent for longer. Returns how many devices
/// changed.
pub async fn refresh_status(db: &Db, now: i64) -> Result<u64> {
    let status = status_sql(db.backend());
    let sql = format!(
        "UPDATE physical_devices SET device_status = {status} WHERE archived_at IS NULL AND device_status <> {status}"
    );
    db.execute(sqlx::AssertSqlSafe(sql), values![now]).await
}

/// [`refresh_status`] for one device (after its expectation changed): one row, not the whole
/// table, under the write lock.
pub async fn refresh_status_of(db: &Db, id: &str, now: i64) -> Result<u64> {
    let status = status_sql(db.backend());
    let sql = format!(
        "UPDATE physical_devices SET device_status = {status} WHERE id_physical_device = $2 \
         AND archived_at IS NULL AND device_status <> {status}"
    );
    db.execute(sqlx::AssertSqlSafe(sql), values![now, id]).await
}

/// A device's `device_status` at `$1`, as SQL.
fn status_sql(backend: crate::sql::Backend) -> String {
    let greatest = match backend {
        crate::sql::Backend::Sqlite => "max",
        crate::sql::Backend::Postgres => "GREATEST",
    };
    format!(
        "CASE WHEN expected_live_status = 0 THEN 0 \
         WHEN is_connected = 1 THEN 1 \
         WHEN {greatest}(COALESCE(last_data_at, 0), COALESCE(last_disconnect_at, 0), created_at) >= $1 - expected_offline_interval THEN 1 \
         ELSE 2 END"
    )
}

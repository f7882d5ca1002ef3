//! The last self-test payload of a gateway (`GET …/status`), kept as its `deviceInfo` with the
//! time it was received (docs/api.md, "Physical devices": the `deviceInfo` expand).

use crate::database::Result;
use crate::database::db::{Db, values};

/// Stores `json` as the device's `deviceInfo`, received at `now`; `false` when no such device.
pub async fn set(db: &Db, id: &str, json: &str, now: i64) -> Result<bool> {
    let sql = "UPDATE physical_devices SET device_info_json = $1, device_info_at = $2 WHERE id_physical_device = $3";
    let n = db.execute(sql, values![json, now, id]).await?;
    Ok(n == 1)
}

/// The stored `deviceInfo` JSON text and its time, if a self-test answer was ever received.
pub async fn get(db: &Db, id: &str) -> Result<Option<(String, i64)>> {
    let sql = "SELECT device_info_json, device_info_at FROM physical_devices WHERE id_physical_device = $1";
    let row: Option<(Option<String>, Option<i64>)> = db.row(sql, values![id]).await?;
    Ok(match row {
        Some((Some(json), Some(at))) => Some((json, at)),
        _ => None,
    })
}

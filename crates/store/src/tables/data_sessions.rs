//! Data sessions of GO gateways: opened when the module is turned on (hello), closed when it
//! is turned off (power off).

use crate::database::Result;
use crate::database::db::{Db, on_pool, values};
use crate::database::new_id;

/// The active session of a gateway, opening one at `now` if there is none; returns its
/// integer key (raw points carry it).
pub async fn open(db: &Db, id_group: &str, id_physical_device: &str, now: i64) -> Result<i64> {
    if let Some(key) = active(db, id_physical_device).await? {
        return Ok(key);
    }
    let insert = "INSERT INTO data_sessions (id_data_session, id_group, id_physical_device, start, created_at, updated_at) \
                  VALUES ($1, $2, $3, $4, $4, $4)";
    db.execute(insert, values![new_id(), id_group, id_physical_device, now])
        .await?;
    Ok(active(db, id_physical_device).await?.unwrap_or_default())
}

/// The key of the gateway's active session, if any.
pub async fn active(db: &Db, id_physical_device: &str) -> Result<Option<i64>> {
    let sql = "SELECT session_key FROM data_sessions WHERE id_physical_device = $1 AND \"end\" IS NULL \
               ORDER BY start DESC LIMIT 1";
    Ok(on_pool!(db, |p| sqlx::query_scalar(sql)
        .bind(id_physical_device)
        .fetch_optional(p)
        .await)?)
}

/// Closes the gateway's active session at `now`; returns whether one was open.
pub async fn close(db: &Db, id_physical_device: &str, now: i64) -> Result<bool> {
    let sql =
        "UPDATE data_sessions SET \"end\" = $1, updated_at = $1 WHERE id_physical_device = $2 AND \"end\" IS NULL";
    let n = db.execute(sql, values![now, id_physical_device]).await?;
    Ok(n > 0)
}

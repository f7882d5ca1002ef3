//! The nodes serving a store and their leases (docs/operations.md, "Several nodes"). Every node
//! renews its row; a node whose lease ran out is gone, whatever the reason (killed, frozen, cut
//! off from the database), and the gateways shown connected through it are marked disconnected
//! by whichever live node gets there first. A gateway shown connected through a node without a
//! row (a store from before leases) counts as abandoned too.

use crate::database::Db;
use crate::database::db::values;
use crate::database::error::StoreError;

type Result<T> = std::result::Result<T, StoreError>;

/// Renews `node`'s lease until `until_ms`, making its row if needed; `false` when there was no
/// row to renew (the first renewal, or another node took this one for dead meanwhile).
pub async fn renew(db: &Db, node: &str, now_ms: i64, until_ms: i64) -> Result<bool> {
    let renewed = db
        .execute(
            "UPDATE nodes SET lease_until = $1 WHERE node_id = $2",
            values![until_ms, node],
        )
        .await?;
    if renewed > 0 {
        return Ok(true);
    }
    db.execute(
        "INSERT INTO nodes (node_id, started_at, lease_until) VALUES ($1, $2, $3) \
         ON CONFLICT (node_id) DO UPDATE SET lease_until = excluded.lease_until",
        values![node, now_ms, until_ms],
    )
    .await?;
    Ok(false)
}

/// Removes `node`'s row and its webhook lanes (a clean stop: its gateways were marked as they
/// left, and its lanes are free at once).
pub async fn leave(db: &Db, node: &str) -> Result<()> {
    let removals = [
        "DELETE FROM webhook_lanes WHERE node_id = $1",
        "DELETE FROM nodes WHERE node_id = $1",
    ];
    remove(db, node, removals).await
}

/// Removes every other node's row and lanes: on a store only one process may serve (SQLite),
/// the others are gone whatever their leases say.
pub async fn alone(db: &Db, node: &str) -> Result<()> {
    let removals = [
        "DELETE FROM webhook_lanes WHERE node_id <> $1",
        "DELETE FROM nodes WHERE node_id <> $1",
    ];
    remove(db, node, removals).await
}

/// Runs `removals`, each with `node` for its `$1`: lanes first, then the node rows.
async fn remove(db: &Db, node: &str, removals: [&'static str; 2]) -> Result<()> {
    for sql in removals {
        db.execute(sql, values![node]).await?;
    }
    Ok(())
}

/// Takes or renews the lane of webhook `id_webhook` for `node` until `until_ms`: `true` when
/// `node` holds it (it held it, or nobody did, or its holder's lease ran out before `now_ms`),
/// `false` when another node holds it.
pub async fn hold_lane(db: &Db, id_webhook: &str, node: &str, now_ms: i64, until_ms: i64) -> Result<bool> {
    let held = db
        .execute(
            "INSERT INTO webhook_lanes (id_webhook, node_id, lease_until) VALUES ($1, $2, $3) \
             ON CONFLICT (id_webhook) DO UPDATE SET node_id = excluded.node_id, lease_until = excluded.lease_until \
             WHERE webhook_lanes.node_id = excluded.node_id OR webhook_lanes.lease_until < $4",
            values![id_webhook, node, until_ms, now_ms],
        )
        .await?;
    Ok(held > 0)
}

/// Removes the rows of nodes whose lease ran out before `now_ms`; their ids.
pub async fn expire(db: &Db, now_ms: i64) -> Result<Vec<String>> {
    let _turn = db.write_turn().await?;
    let gone: Vec<(String,)> = db
        .rows(
            "DELETE FROM nodes WHERE lease_until < $1 RETURNING node_id",
            values![now_ms],
        )
        .await?;
    Ok(gone.into_iter().map(|(id,)| id).collect())
}

/// A gateway marked disconnected because the node it was connected through is gone.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Abandoned {
    pub id_physical_device: String,
    pub id_group: String,
    pub serial_hardware: String,
}

/// Marks disconnected the gateways shown connected through a node that holds no lease, each
/// once (a gateway another node marks meanwhile is not returned twice); what was marked.
pub async fn abandoned(db: &Db, now: i64) -> Result<Vec<Abandoned>> {
    let _turn = db.write_turn().await?;
    let marked: Vec<Abandoned> = db
        .rows(
            "UPDATE physical_devices SET is_connected = 0, last_disconnect_at = $1 \
             WHERE is_connected = 1 AND id_physical_device IN (\
               SELECT i.id_physical_device FROM iot_devices i WHERE i.node_id IS NULL \
               OR NOT EXISTS (SELECT 1 FROM nodes n WHERE n.node_id = i.node_id)) \
             RETURNING id_physical_device, id_group, serial_hardware",
            values![now],
        )
        .await?;
    Ok(marked)
}

//! Firmware images (docs/api.md, "Firmware"): their records, and their bytes in the store
//! (migration 0019), content-addressed by sha256 in pieces of [`CHUNK_BYTES`].
//!
//! An upload writes its pieces as they arrive, each in a short transaction of its own under an
//! upload key (`upload:<id>`), so a 64 MiB image neither sits in memory nor holds SQLite's write
//! lock for the length of the upload. The transaction that stores the image renames the pieces
//! to the blob (or drops them when a blob of the same bytes exists) and writes the record: an
//! image is there whole or not at all. What a crash leaves of an upload is removed later
//! ([`remove_stale_uploads`]).

use devicecloud_query::{AttrKind, Attribute, SortKey};
use sea_query::{Condition, Expr, ExprTrait};

use crate::collection::{Column, ListArgs, Listing, Table, attributes, names, same_name};
use crate::database::Result;
use crate::database::db::{Db, Tx, values};
use crate::sql::scope::{GroupScope, visible_groups};

/// Bytes of one stored piece of an image (the last one may be shorter).
pub const CHUNK_BYTES: usize = 256 * 1024;

/// A stored image.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct FirmwareRow {
    pub id_firmware: String,
    pub kind: String,
    pub component: String,
    pub version: String,
    pub id_group: Option<String>,
    pub size: i64,
    /// Lowercase hex.
    pub sha256: String,
    /// Standard base64 of the Ed25519 signature of `manifest`.
    pub signature: String,
    /// The exact signed text.
    pub manifest: String,
    pub created_at: i64,
    pub created_by: Option<String>,
}

impl FirmwareRow {
    /// Whether the image installs on a gateway of `kind` in `id_group`: its kind, and its group
    /// or every group.
    pub fn is_for(&self, kind: &str, id_group: &str) -> bool {
        self.kind == kind && self.id_group.as_deref().is_none_or(|group| group == id_group)
    }
}

const TABLE: &str = "firmware";

/// The filterable and sortable attributes of the firmware collection.
pub const COLUMNS: [Column; 9] = [
    same_name(TABLE, "id_firmware", AttrKind::String),
    same_name(TABLE, "kind", AttrKind::String),
    same_name(TABLE, "component", AttrKind::String),
    same_name(TABLE, "version", AttrKind::String),
    same_name(TABLE, "id_group", AttrKind::String),
    same_name(TABLE, "size", AttrKind::Integer),
    same_name(TABLE, "sha256", AttrKind::String),
    same_name(TABLE, "created_at", AttrKind::Integer),
    same_name(TABLE, "created_by", AttrKind::String),
];
/// The filter attributes of the firmware collection.
pub const ATTRIBUTES: [Attribute; 9] = attributes(&COLUMNS);
/// The sortable attributes of the firmware collection.
pub const SORTABLE: [&str; 9] = names(&COLUMNS);

/// The images, newest first.
static IMAGES: Table<FirmwareRow> = Table::new(TABLE, &COLUMNS, &[], SortKey::desc("created_at"), &[COLUMNS[0]]);

const SELECT: &str = "SELECT id_firmware, kind, component, version, id_group, size, sha256, signature, manifest, \
                      created_at, created_by FROM firmware";

/// The key an upload's pieces are kept under until the image is stored.
fn upload_key(id_upload: &str) -> String {
    format!("upload:{id_upload}")
}

/// Records an upload in progress (so that what a crash leaves of it can be found).
pub async fn begin_upload(db: &Db, id_upload: &str, now: i64) -> Result<()> {
    db.execute(
        "INSERT INTO firmware_uploads (id_upload, started_at) VALUES ($1, $2)",
        values![id_upload, now],
    )
    .await?;
    Ok(())
}

/// Writes piece `seq` of an upload (background work: it does not cut ingest short), and notes
/// that the upload is alive at `now`: only uploads silent for an hour are stale.
pub async fn put_chunk(db: &Db, id_upload: &str, seq: i64, data: &[u8], now: i64) -> Result<()> {
    let mut tx = Tx::begin_patient(db).await?;
    tx.execute(
        "INSERT INTO firmware_chunks (blob, seq, data) VALUES ($1, $2, $3)".to_string(),
        values![upload_key(id_upload), seq, data.to_vec()],
    )
    .await?;
    tx.execute(
        "UPDATE firmware_uploads SET started_at = $1 WHERE id_upload = $2".to_string(),
        values![now, id_upload],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Removes an upload and what was written of it.
pub async fn abandon_upload(db: &Db, id_upload: &str) -> Result<()> {
    let mut tx = Tx::begin_patient(db).await?;
    tx.execute(
        "DELETE FROM firmware_chunks WHERE blob = $1".to_string(),
        values![upload_key(id_upload)],
    )
    .await?;
    end_upload_in(&mut tx, id_upload).await?;
    tx.commit().await?;
    Ok(())
}

/// Forgets upload `id_upload` (its pieces are the image's now, or gone).
async fn end_upload_in(tx: &mut Tx, id_upload: &str) -> sqlx::Result<u64> {
    tx.execute(
        "DELETE FROM firmware_uploads WHERE id_upload = $1".to_string(),
        values![id_upload],
    )
    .await
}

/// Removes the uploads that wrote nothing since `before` (their process died, or their client
/// stalled); returns how many. Such an upload cannot be finished any more.
pub async fn remove_stale_uploads(db: &Db, before: i64) -> Result<usize> {
    let stale: Vec<(String,)> = db
        .rows(
            "SELECT id_upload FROM firmware_uploads WHERE started_at < $1",
            values![before],
        )
        .await?;
    for (id,) in &stale {
        abandon_upload(db, id).await?;
    }
    Ok(stale.len())
}

/// Stores the image whose bytes upload `id_upload` wrote (`row.sha256` and `row.size` as
/// counted while they were written): its record, and its bytes as the blob of that sha256
/// unless one is stored already. The same kind, component, version and group as another image
/// is a `Conflict("version")`, and nothing is stored (the upload stays, for the caller to
/// abandon).
pub async fn finish_upload(db: &Db, id_upload: &str, row: &FirmwareRow) -> Result<()> {
    let mut tx = Tx::begin_patient(db).await?;
    // The blob is held (PostgreSQL: `FOR SHARE`) from here to the commit: a deletion of the last
    // image with these bytes either comes first (the blob is then made anew here) or waits and
    // then sees this image.
    let found: Vec<(String,)> = tx
        .rows(
            format!(
                "SELECT sha256 FROM firmware_blobs WHERE sha256 = $1{}",
                db.row_lock(" FOR SHARE")
            ),
            values![row.sha256.as_str()],
        )
        .await?;
    let key = upload_key(id_upload);
    if found.is_empty() {
        tx.execute(
            "INSERT INTO firmware_blobs (sha256, size, created_at) VALUES ($1, $2, $3)".to_string(),
            values![row.sha256.as_str(), row.size, row.created_at],
        )
        .await?;
        tx.execute(
            "UPDATE firmware_chunks SET blob = $1 WHERE blob = $2".to_string(),
            values![row.sha256.as_str(), key.as_str()],
        )
        .await?;
    } else {
        tx.execute(
            "DELETE FROM firmware_chunks WHERE blob = $1".to_string(),
            values![key.as_str()],
        )
        .await?;
    }
    let inserted = tx
        .execute(
            "INSERT INTO firmware (id_firmware, kind, component, version, id_group, scope, size, sha256, signature, \
             manifest, created_at, created_by) VALUES ($1, $2, $3, $4, $5, COALESCE($5, ''), $6, $7, $8, $9, $10, $11)"
                .to_string(),
            values![
                row.id_firmware.as_str(),
                row.kind.as_str(),
                row.component.as_str(),
                row.version.as_str(),
                row.id_group.as_deref(),
                row.size,
                row.sha256.as_str(),
                row.signature.as_str(),
                row.manifest.as_str(),
                row.created_at,
                row.created_by.as_deref()
            ],
        )
        .await;
    if let Err(e) = inserted {
        tx.rollback().await?;
        return Err(crate::StoreError::from(e).conflict_on("version"));
    }
    // Removed as stale meanwhile (silent for an hour): its pieces may be gone.
    if end_upload_in(&mut tx, id_upload).await? != 1 {
        tx.rollback().await?;
        return Err(crate::StoreError::Timeout(
            "the upload was silent too long and was given up".into(),
        ));
    }
    tx.commit().await?;
    Ok(())
}

/// An image by id.
pub async fn get(db: &Db, id_firmware: &str) -> Result<Option<FirmwareRow>> {
    let sql = format!("{SELECT} WHERE id_firmware = $1");
    db.row(sqlx::AssertSqlSafe(sql), values![id_firmware]).await
}

/// A page of the images the caller may see: those for every group and those of the groups
/// `args` allows.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<FirmwareRow>> {
    let mut select = IMAGES.select();
    if let GroupScope::MemberOf(id_user) = args.scope {
        select.cond_where(
            Condition::any()
                .add(Expr::col((TABLE, "id_group")).is_null())
                .add(Expr::col((TABLE, "id_group")).in_subquery(visible_groups(id_user))),
        );
    }
    IMAGES.list(db, select, &args).await
}

/// Why an image was not deleted.
#[derive(Debug, PartialEq, Eq)]
pub enum Deleted {
    Done,
    /// No such image.
    NotFound,
    /// A job with executions not ended uses it.
    InUse,
}

/// Deletes an image unless a job with executions left uses it; its bytes go with it when no
/// other image has the same.
pub async fn delete(db: &Db, id_firmware: &str) -> Result<Deleted> {
    let mut tx = Tx::begin(db).await?;
    // Locked first: a job being created for it (which holds it `FOR SHARE`) is then either
    // committed and seen below, or finds the image gone.
    let found: Vec<(String,)> = tx
        .rows(
            format!(
                "SELECT sha256 FROM firmware WHERE id_firmware = $1{}",
                db.row_lock(" FOR UPDATE")
            ),
            values![id_firmware],
        )
        .await?;
    let Some((sha256,)) = found.into_iter().next() else {
        tx.rollback().await?;
        return Ok(Deleted::NotFound);
    };
    let users: Vec<(String,)> = tx
        .rows(
            "SELECT id_job FROM jobs WHERE id_firmware = $1 AND (pending > 0 OR in_progress > 0) LIMIT 1".to_string(),
            values![id_firmware],
        )
        .await?;
    if !users.is_empty() {
        tx.rollback().await?;
        return Ok(Deleted::InUse);
    }
    tx.execute(
        "DELETE FROM firmware WHERE id_firmware = $1".to_string(),
        values![id_firmware],
    )
    .await?;
    // The blob is locked before its other users are counted: an upload of the same bytes being
    // stored (which holds it `FOR SHARE`) is then committed and counted.
    tx.rows::<(String,)>(
        format!(
            "SELECT sha256 FROM firmware_blobs WHERE sha256 = $1{}",
            db.row_lock(" FOR UPDATE")
        ),
        values![sha256.as_str()],
    )
    .await?;
    let others: Vec<(String,)> = tx
        .rows(
            "SELECT id_firmware FROM firmware WHERE sha256 = $1 LIMIT 1".to_string(),
            values![sha256.as_str()],
        )
        .await?;
    if others.is_empty() {
        tx.execute(
            "DELETE FROM firmware_chunks WHERE blob = $1".to_string(),
            values![sha256.as_str()],
        )
        .await?;
        tx.execute(
            "DELETE FROM firmware_blobs WHERE sha256 = $1".to_string(),
            values![sha256.as_str()],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Deleted::Done)
}

/// Pieces `first..=last` of the blob `sha256`, in order: what a download reads at a time.
pub async fn chunks(db: &Db, sha256: &str, first: i64, last: i64) -> Result<Vec<Vec<u8>>> {
    let rows: Vec<(Vec<u8>,)> = db
        .rows(
            "SELECT data FROM firmware_chunks WHERE blob = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
            values![sha256, first, last],
        )
        .await?;
    Ok(rows.into_iter().map(|(data,)| data).collect())
}

//! Firmware images in the store (migration 0019): an upload's pieces become the image whole or
//! not at all, two images of the same bytes share them, a version stored twice is a conflict,
//! an image a job still uses stays, and what a dead upload left is removed.

mod common;

use devicecloud_query::PageRequest;
use devicecloud_store::firmware::{self, CHUNK_BYTES, Deleted, FirmwareRow};
use devicecloud_store::groups::GroupScope;
use devicecloud_store::{ListArgs, StoreError};

fn row(id: &str, version: &str, sha256: &str, size: i64, id_group: Option<&str>) -> FirmwareRow {
    FirmwareRow {
        id_firmware: id.into(),
        kind: "CORE".into(),
        component: "app".into(),
        version: version.into(),
        id_group: id_group.map(str::to_string),
        size,
        sha256: sha256.into(),
        signature: "sig".into(),
        manifest: "{}".into(),
        created_at: 1_700_000_000,
        created_by: None,
    }
}

/// Uploads `pieces` under `id_upload`, then stores them as `row`.
async fn upload(
    db: &devicecloud_store::Db,
    id_upload: &str,
    pieces: &[Vec<u8>],
    row: &FirmwareRow,
) -> Result<(), StoreError> {
    firmware::begin_upload(db, id_upload, row.created_at).await?;
    for (seq, piece) in pieces.iter().enumerate() {
        firmware::put_chunk(db, id_upload, seq as i64, piece, row.created_at).await?;
    }
    firmware::finish_upload(db, id_upload, row).await
}

async fn count(db: &devicecloud_store::Db, table: &str) -> i64 {
    common::integer(db, &format!("SELECT COUNT(*) FROM {table}"), &[])
        .await
        .unwrap()
}

#[tokio::test]
async fn images_are_stored_whole_shared_by_content_and_deleted_with_their_last_user() {
    let store = common::store("firmware").await;
    let db = &store.db;
    let pieces = vec![vec![1u8; CHUNK_BYTES], vec![2u8; 10]];
    let size = (CHUNK_BYTES + 10) as i64;
    upload(db, "u1", &pieces, &row("f1", "1.0.0", "aa", size, None))
        .await
        .unwrap();
    let stored = firmware::get(db, "f1").await.unwrap().unwrap();
    assert_eq!(stored.size, size);
    assert_eq!(firmware::chunks(db, "aa", 0, 9).await.unwrap(), pieces);
    assert_eq!(firmware::chunks(db, "aa", 1, 1).await.unwrap(), vec![vec![2u8; 10]]);

    // The same version again (every group) is refused, and leaves nothing stored.
    let again = upload(db, "u2", &pieces, &row("f2", "1.0.0", "aa", size, None)).await;
    assert!(matches!(again, Err(StoreError::Conflict("version"))), "{again:?}");
    firmware::abandon_upload(db, "u2").await.unwrap();
    assert_eq!(count(db, "firmware_chunks").await, 2);
    assert_eq!(count(db, "firmware_uploads").await, 0);

    // Another version of the same bytes (for one group) shares the blob.
    upload(db, "u3", &pieces, &row("f3", "1.0.1", "aa", size, Some("g1")))
        .await
        .unwrap();
    assert_eq!(count(db, "firmware_chunks").await, 2);
    // The same version for a group is another image than for every group.
    upload(db, "u4", &[vec![3u8; 5]], &row("f4", "1.0.0", "bb", 5, Some("g1")))
        .await
        .unwrap();

    // Newest first, ties by id; a user's view (images for every group and for their groups)
    // is proven over HTTP, where memberships exist.
    let args = ListArgs {
        scope: GroupScope::All,
        filter: None,
        sort: None,
        page: PageRequest {
            page: 1,
            per_page: 20,
            default_per_page: 20,
        },
        count_only: false,
    };
    let listing = firmware::list(db, args).await.unwrap();
    let ids: Vec<String> = listing.items.into_iter().map(|r| r.id_firmware).collect();
    assert_eq!(ids, ["f4", "f3", "f1"]);

    // An image a job with executions left uses stays.
    common::execute(
        db,
        "INSERT INTO jobs (id_job, label, kind, operation, target, status, total, pending, created_at, \
         rate_per_minute, max_failures_percent, timeout_s, expires_at, id_firmware) \
         VALUES ('j1', 'l', 'firmware', '{}', '{}', 'queued', 1, $1, 0, 60, 100, 900, 0, 'f1')",
        &[1],
    )
    .await;
    assert_eq!(firmware::delete(db, "f1").await.unwrap(), Deleted::InUse);
    common::execute(db, "UPDATE jobs SET pending = $1 WHERE id_job = 'j1'", &[0]).await;
    assert_eq!(firmware::delete(db, "f1").await.unwrap(), Deleted::Done);
    // f3 still has the bytes.
    assert_eq!(count(db, "firmware_chunks").await, 3);
    assert_eq!(firmware::delete(db, "f3").await.unwrap(), Deleted::Done);
    assert_eq!(count(db, "firmware_chunks").await, 1);
    assert_eq!(firmware::delete(db, "f3").await.unwrap(), Deleted::NotFound);
}

#[tokio::test]
async fn what_a_silent_upload_left_is_removed_and_cannot_be_finished() {
    let store = common::store("firmware_stale").await;
    let db = &store.db;
    firmware::begin_upload(db, "old", 100).await.unwrap();
    firmware::put_chunk(db, "old", 0, &[1, 2, 3], 100).await.unwrap();
    // Begun as long ago, but still writing: alive.
    firmware::begin_upload(db, "slow", 100).await.unwrap();
    firmware::put_chunk(db, "slow", 0, &[4], 5_000).await.unwrap();
    assert_eq!(firmware::remove_stale_uploads(db, 1_000).await.unwrap(), 1);
    assert_eq!(count(db, "firmware_chunks").await, 1);
    assert_eq!(count(db, "firmware_uploads").await, 1);
    // A removed upload cannot be finished, and nothing of it is stored.
    let gone = firmware::finish_upload(db, "old", &row("f9", "9.0.0", "cc", 3, None)).await;
    assert!(matches!(gone, Err(StoreError::Timeout(_))), "{gone:?}");
    assert!(firmware::get(db, "f9").await.unwrap().is_none());
    assert_eq!(count(db, "firmware_blobs").await, 0);
    firmware::finish_upload(db, "slow", &row("f8", "8.0.0", "dd", 1, None))
        .await
        .unwrap();
}

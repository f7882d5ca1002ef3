//! The pieces of images being downloaded, shared (docs/api.md, "Firmware: download"): a
//! campaign has thousands of gateways fetch the same image within minutes, so each piece is
//! read from the store once and handed to every download as the same bytes. Memory is bounded
//! by the cache's capacity whatever the number of downloads; the least used pieces make room.

use bytes::Bytes;
use devicecloud_store::firmware::{self, CHUNK_BYTES};
use devicecloud_store::{Db, StoreError};

/// Most bytes of pieces kept (a 64 MiB image whole, or a few smaller ones).
pub const CAPACITY_BYTES: u64 = 64 * 1024 * 1024;

/// A piece weighs its bytes.
#[derive(Clone, Copy, Debug)]
struct Weight;

impl quick_cache::Weighter<(String, i64), Bytes> for Weight {
    fn weight(&self, key: &(String, i64), piece: &Bytes) -> u64 {
        (key.0.len() + piece.len()) as u64
    }
}

/// The pieces cache.
pub struct Pieces {
    db: Db,
    cache: quick_cache::sync::Cache<(String, i64), Bytes, Weight>,
}

impl std::fmt::Debug for Pieces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pieces").field("bytes", &self.cache.weight()).finish()
    }
}

impl Pieces {
    /// A cache of at most `capacity_bytes` over the images of `db`.
    pub fn new(db: Db, capacity_bytes: u64) -> Pieces {
        let estimated = usize::try_from(capacity_bytes / CHUNK_BYTES as u64)
            .unwrap_or(256)
            .max(16);
        Pieces {
            db,
            cache: quick_cache::sync::Cache::with_weighter(estimated, capacity_bytes, Weight),
        }
    }

    /// Piece `seq` of the blob `sha256`: from memory, or read once from the store while every
    /// other download of it waits for that read. `None` when the blob has no such piece (the
    /// image was deleted meanwhile).
    pub async fn piece(&self, sha256: &str, seq: i64) -> Result<Option<Bytes>, StoreError> {
        let key = (sha256.to_string(), seq);
        let read = self
            .cache
            .get_or_insert_async(&key, async {
                let mut pieces = firmware::chunks(&self.db, sha256, seq, seq).await.map_err(Some)?;
                match pieces.pop() {
                    Some(piece) => Ok(Bytes::from(piece)),
                    None => Err(None),
                }
            })
            .await;
        match read {
            Ok(piece) => Ok(Some(piece)),
            Err(None) => Ok(None),
            Err(Some(e)) => Err(e),
        }
    }
}

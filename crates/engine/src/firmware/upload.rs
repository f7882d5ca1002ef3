//! Receiving an image (docs/api.md, "Firmware"): its bytes arrive in whatever pieces the
//! client's body brings, are hashed and counted as they come, and are written to the store in
//! pieces of `firmware::CHUNK_BYTES` — never held whole in memory. The image is stored (its
//! record, its signed manifest) only once the last byte is in and its description checked: an
//! upload that fails or is given up leaves nothing but what the hourly upkeep removes.

use devicecloud_protocol::firmware::Manifest;
use devicecloud_store::firmware::{self, CHUNK_BYTES, FirmwareRow};
use devicecloud_store::{Db, StoreError, new_id, unix_now};
use sha2::{Digest, Sha256};

use super::signing::Signer;

/// What an image is, as its uploader describes it (checked by the caller).
#[derive(Clone, Debug)]
pub struct Description<'a> {
    /// `GO`, `CORE` or `PLUS`.
    pub kind: &'a str,
    /// `platform` or `app`.
    pub component: &'a str,
    pub version: &'a str,
    /// `None`: an image for every group.
    pub id_group: Option<&'a str>,
    pub created_by: Option<&'a str>,
}

/// Why an upload was not stored.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// More bytes than the limit (`firmware_max_bytes`).
    #[error("the image is larger than {max} bytes")]
    TooLarge { max: u64 },
    /// No bytes at all.
    #[error("the image is empty")]
    Empty,
    /// The same kind, component, version and group as an image that exists.
    #[error("an image of this kind, component and version exists")]
    Exists,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An upload in progress.
pub struct Upload {
    db: Db,
    id: String,
    hasher: Sha256,
    size: u64,
    max: u64,
    /// The piece being filled.
    piece: Vec<u8>,
    /// The number of the next piece to write.
    seq: i64,
}

impl Upload {
    /// Begins an upload of at most `max` bytes.
    pub async fn begin(db: &Db, max: u64) -> Result<Upload, UploadError> {
        let id = new_id();
        firmware::begin_upload(db, &id, unix_now()).await?;
        Ok(Upload {
            db: db.clone(),
            id,
            hasher: Sha256::new(),
            size: 0,
            max,
            piece: Vec::with_capacity(CHUNK_BYTES),
            seq: 0,
        })
    }

    /// Takes the next bytes; a full piece is written before this returns. Past the limit the
    /// upload is refused (the caller abandons it).
    pub async fn push(&mut self, mut bytes: &[u8]) -> Result<(), UploadError> {
        self.size += bytes.len() as u64;
        if self.size > self.max {
            return Err(UploadError::TooLarge { max: self.max });
        }
        self.hasher.update(bytes);
        while !bytes.is_empty() {
            let take = (CHUNK_BYTES - self.piece.len()).min(bytes.len());
            self.piece.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.piece.len() == CHUNK_BYTES {
                self.write_piece().await?;
            }
        }
        Ok(())
    }

    async fn write_piece(&mut self) -> Result<(), UploadError> {
        firmware::put_chunk(&self.db, &self.id, self.seq, &self.piece, unix_now()).await?;
        self.seq += 1;
        self.piece.clear();
        Ok(())
    }

    /// Stores the image as `description` says, with its manifest signed by `signer`; on any
    /// error nothing of it is kept.
    pub async fn finish(mut self, description: &Description<'_>, signer: &Signer) -> Result<FirmwareRow, UploadError> {
        let result = self.store(description, signer).await;
        if result.is_err() {
            self.abandon().await;
        }
        result
    }

    async fn store(&mut self, description: &Description<'_>, signer: &Signer) -> Result<FirmwareRow, UploadError> {
        if self.size == 0 {
            return Err(UploadError::Empty);
        }
        if !self.piece.is_empty() {
            self.write_piece().await?;
        }
        let sha256 = hex::encode(std::mem::take(&mut self.hasher).finalize());
        let id_firmware = new_id();
        let manifest = Manifest {
            id_firmware: &id_firmware,
            kind: description.kind,
            component: description.component,
            version: description.version,
            size: self.size,
            sha256: &sha256,
        }
        .text();
        let row = FirmwareRow {
            id_firmware: id_firmware.clone(),
            kind: description.kind.to_string(),
            component: description.component.to_string(),
            version: description.version.to_string(),
            id_group: description.id_group.map(str::to_string),
            size: i64::try_from(self.size).unwrap_or(i64::MAX),
            sha256,
            signature: signer.sign(&manifest),
            manifest,
            created_at: unix_now(),
            created_by: description.created_by.map(str::to_string),
        };
        match firmware::finish_upload(&self.db, &self.id, &row).await {
            Ok(()) => Ok(row),
            Err(StoreError::Conflict(_)) => Err(UploadError::Exists),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes what was written of the upload (a failure is logged; the upkeep removes it later).
    pub async fn abandon(self) {
        if let Err(e) = firmware::abandon_upload(&self.db, &self.id).await {
            tracing::warn!(upload = %self.id, error = %e, "cannot remove an unfinished firmware upload now; the upkeep will");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devicecloud_protocol::firmware::signature_holds;

    async fn store() -> (Db, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("dc-upload-{}", new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::connect(&format!("sqlite://{}", dir.join("store.db").display()))
            .await
            .unwrap();
        (db, dir)
    }

    fn description(version: &str) -> Description<'_> {
        Description {
            kind: "CORE",
            component: "app",
            version,
            id_group: None,
            created_by: None,
        }
    }

    #[tokio::test]
    async fn an_image_in_odd_pieces_is_stored_whole_signed_and_hashed() {
        let (db, dir) = store().await;
        let signer = Signer::load(None).unwrap();
        let image: Vec<u8> = (0..CHUNK_BYTES * 2 + 1000).map(|i| (i % 251) as u8).collect();
        let mut upload = Upload::begin(&db, 10 << 20).await.unwrap();
        for piece in image.chunks(70_001) {
            upload.push(piece).await.unwrap();
        }
        let row = upload.finish(&description("1.2.3"), &signer).await.unwrap();
        assert_eq!(row.size, image.len() as i64);
        assert_eq!(row.sha256, hex::encode(Sha256::digest(&image)));
        assert!(signature_holds(&signer.public_key(), &row.manifest, &row.signature));
        let manifest: serde_json::Value = serde_json::from_str(&row.manifest).unwrap();
        assert_eq!(manifest["id_firmware"], row.id_firmware.as_str());
        assert_eq!(manifest["size"], image.len());
        let stored: Vec<u8> = firmware::chunks(&db, &row.sha256, 0, 10).await.unwrap().concat();
        assert_eq!(stored, image);

        // The same version again, an empty image, one past the limit: refused, nothing kept.
        let mut again = Upload::begin(&db, 10 << 20).await.unwrap();
        again.push(b"other bytes").await.unwrap();
        assert!(matches!(
            again.finish(&description("1.2.3"), &signer).await,
            Err(UploadError::Exists)
        ));
        let empty = Upload::begin(&db, 10 << 20).await.unwrap();
        assert!(matches!(
            empty.finish(&description("9"), &signer).await,
            Err(UploadError::Empty)
        ));
        let mut large = Upload::begin(&db, 100).await.unwrap();
        assert!(matches!(
            large.push(&[0; 101]).await,
            Err(UploadError::TooLarge { max: 100 })
        ));
        large.abandon().await;
        assert!(firmware::get(&db, &row.id_firmware).await.unwrap().is_some());
        assert_eq!(firmware::remove_stale_uploads(&db, i64::MAX).await.unwrap(), 0);
        let pieces: Vec<Vec<u8>> = firmware::chunks(&db, &row.sha256, 0, 10).await.unwrap();
        assert_eq!(pieces.len(), 3);
        db.close().await;
        std::fs::remove_dir_all(dir).unwrap();
    }
}

//! Firmware updates as a gateway performs them (docs/gateway-protocol.md, "Firmware update"):
//! the manifest's signature checked with the service's public key, the image downloaded from
//! the HTTP gateway endpoint with the gateway's Basic credentials (resuming with `Range` after a
//! break), and its size and sha256 checked against the manifest. The image is hashed as it
//! arrives and not kept: the simulated flash is the version the gateway reports afterwards.

use std::time::Duration;

use devicecloud_protocol::firmware::{UpdateParams, signature_holds};
use sha2::{Digest, Sha256};

/// Where a fleet's gateways fetch images, the key they check them with, and how often an
/// install is made to fail (a rehearsal of failures and rollbacks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirmwareSource {
    /// `http://host:port` of the service's HTTP endpoint.
    pub http_base: String,
    /// The Ed25519 public key, standard base64 (`GET /api/v2/firmware/public-key`).
    pub public_key: String,
    /// Percent of updates (0–100) that fail after the download: half by event 221, half by
    /// coming back on the old version (a rollback).
    pub fail_percent: u8,
}

/// Downloads that may break before the gateway gives up.
const ATTEMPTS: u32 = 5;
/// Longest a download may take.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(300);

/// The HTTP client every simulated gateway downloads with (one connection pool for the fleet).
pub fn http() -> &'static reqwest::Client {
    static HTTP: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    HTTP.get_or_init(reqwest::Client::new)
}

/// Why an update was not installed: the cause the gateway reports (event 221).
pub type Cause = String;

/// Checks the manifest's signature and that it describes the image the command names, for a
/// gateway of `kind`.
pub fn check_manifest(params: &UpdateParams, kind: &str, public_key: &str) -> Result<(), Cause> {
    if !signature_holds(public_key, &params.manifest, &params.signature) {
        return Err("manifest signature does not hold".into());
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&params.manifest).map_err(|_| Cause::from("manifest is not JSON"))?;
    let same = manifest["id_firmware"] == params.id_firmware.as_str()
        && manifest["component"] == params.component.as_str()
        && manifest["version"] == params.version.as_str()
        && manifest["size"] == params.size
        && manifest["sha256"] == params.sha256.as_str();
    if !same {
        return Err("the command does not match its signed manifest".into());
    }
    if manifest["kind"] != kind {
        return Err(format!("image for {} modules, this is {kind}", manifest["kind"]));
    }
    Ok(())
}

/// Downloads the image `params` names as gateway `serial` with `token`, resuming after breaks,
/// and checks its size and sha256.
pub async fn download(
    http: &reqwest::Client,
    source: &FirmwareSource,
    serial: &str,
    token: &str,
    params: &UpdateParams,
) -> Result<(), Cause> {
    let url = format!("{}{}", source.http_base.trim_end_matches('/'), params.url);
    let mut hasher = Sha256::new();
    let mut have: u64 = 0;
    let mut breaks = 0;
    let fetch = async {
        while have < params.size {
            match fetch_from(http, &url, serial, token, have, &mut hasher, &mut have).await {
                Ok(()) => {}
                Err(e) if breaks + 1 < ATTEMPTS => {
                    breaks += 1;
                    tracing::debug!(serial, error = %e, have, "firmware download broke; resuming");
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(breaks))).await;
                }
                Err(e) => return Err(format!("download failed: {e}")),
            }
        }
        Ok(())
    };
    tokio::time::timeout(DOWNLOAD_TIMEOUT, fetch)
        .await
        .map_err(|_| Cause::from("download took too long"))??;
    if have != params.size {
        return Err(format!("size {have}, manifest says {}", params.size));
    }
    if hex::encode(hasher.finalize()) != params.sha256 {
        return Err("sha256 does not match the manifest".into());
    }
    Ok(())
}

/// One request from byte `from`: the bytes received are hashed and counted in `have`.
async fn fetch_from(
    http: &reqwest::Client,
    url: &str,
    serial: &str,
    token: &str,
    from: u64,
    hasher: &mut Sha256,
    have: &mut u64,
) -> Result<(), String> {
    let mut request = http.get(url).basic_auth(serial, Some(token));
    if from > 0 {
        request = request.header(reqwest::header::RANGE, format!("bytes={from}-"));
    }
    let mut response = request.send().await.map_err(|e| e.to_string())?;
    let expected = if from > 0 {
        reqwest::StatusCode::PARTIAL_CONTENT
    } else {
        reqwest::StatusCode::OK
    };
    if response.status() != expected {
        return Err(format!("HTTP {}", response.status()));
    }
    while let Some(bytes) = response.chunk().await.map_err(|e| e.to_string())? {
        hasher.update(&bytes);
        *have += bytes.len() as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use devicecloud_protocol::firmware::Manifest;
    use ed25519_dalek::{Signer, SigningKey};

    #[test]
    fn a_manifest_is_checked_against_its_signature_the_command_and_the_kind() {
        let key = SigningKey::from_bytes(&[3; 32]);
        let public = STANDARD.encode(key.verifying_key().to_bytes());
        let manifest = Manifest {
            id_firmware: "f1",
            kind: "CORE",
            component: "app",
            version: "2.5.0",
            size: 10,
            sha256: "ab",
        }
        .text();
        let params = UpdateParams {
            id_firmware: "f1".into(),
            component: "app".into(),
            version: "2.5.0".into(),
            size: 10,
            sha256: "ab".into(),
            signature: STANDARD.encode(key.sign(manifest.as_bytes()).to_bytes()),
            manifest,
            url: "/gateway/v1/firmware/f1".into(),
        };
        assert_eq!(check_manifest(&params, "CORE", &public), Ok(()));
        assert!(check_manifest(&params, "GO", &public).is_err());
        let other = STANDARD.encode(SigningKey::from_bytes(&[4; 32]).verifying_key().to_bytes());
        assert!(check_manifest(&params, "CORE", &other).is_err());
        let mut changed = params.clone();
        changed.version = "9.9.9".into();
        assert!(check_manifest(&changed, "CORE", &public).is_err());
    }
}

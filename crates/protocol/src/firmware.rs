//! Firmware images as a gateway checks them (docs/gateway-protocol.md, "Firmware update"): the
//! manifest the cloud signs — the exact text, JSON `{"id_firmware", "kind", "component",
//! "version", "size", "sha256"}` in that order — and the check of its Ed25519 signature with the
//! service's public key (`GET /api/v2/firmware/public-key`).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Verifier, VerifyingKey};

use crate::rejection::Rejection;

/// The components an image may be of.
pub const COMPONENTS: [&str; 2] = ["platform", "app"];

/// The path of an image's download on the HTTP gateway endpoint.
pub fn download_path(id_firmware: &str) -> String {
    format!("/gateway/v1/firmware/{id_firmware}")
}

/// Of a device's `platform` and `app` versions, the one `component` names (`platform` or
/// `app`).
pub fn version_of<T>(component: &str, platform: T, app: T) -> T {
    if component == "platform" { platform } else { app }
}

/// What a manifest says of its image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest<'a> {
    pub id_firmware: &'a str,
    pub kind: &'a str,
    pub component: &'a str,
    pub version: &'a str,
    pub size: u64,
    /// Lowercase hex.
    pub sha256: &'a str,
}

impl Manifest<'_> {
    /// The exact text that is signed.
    pub fn text(&self) -> String {
        serde_json::json!({
            "id_firmware": self.id_firmware,
            "kind": self.kind,
            "component": self.component,
            "version": self.version,
            "size": self.size,
            "sha256": self.sha256,
        })
        .to_string()
    }
}

/// The parameters of the command `update` (docs/gateway-protocol.md, "Firmware update"): the
/// image's description, its signed manifest and the path to download it from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UpdateParams {
    pub id_firmware: String,
    /// `platform` or `app`.
    pub component: String,
    pub version: String,
    pub size: u64,
    /// Lowercase hex.
    pub sha256: String,
    /// Standard base64 of the Ed25519 signature of `manifest`.
    pub signature: String,
    /// The exact signed text.
    pub manifest: String,
    /// The path of the download endpoint (`/gateway/v1/firmware/<id_firmware>`).
    pub url: String,
}

impl UpdateParams {
    /// Reads the parameters of an `update` request (the gateway's side).
    pub fn read(params: &serde_json::Value) -> Result<UpdateParams, Rejection> {
        let update: UpdateParams = serde_json::from_value(params.clone())
            .map_err(|e| crate::json::bad_field(format!("params of update: {e}")))?;
        if !COMPONENTS.contains(&update.component.as_str()) {
            return Err(crate::json::bad_field("params.component must be platform or app"));
        }
        Ok(update)
    }
}

/// Whether `signature` (standard base64) is the Ed25519 signature of `manifest` under
/// `public_key` (standard base64 of the raw 32 bytes).
pub fn signature_holds(public_key: &str, manifest: &str, signature: &str) -> bool {
    let Some(key) = STANDARD
        .decode(public_key)
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes.as_slice()).ok())
        .and_then(|bytes| VerifyingKey::from_bytes(&bytes).ok())
    else {
        return false;
    };
    let Some(signature) = STANDARD
        .decode(signature)
        .ok()
        .and_then(|bytes| Signature::from_slice(&bytes).ok())
    else {
        return false;
    };
    key.verify(manifest.as_bytes(), &signature).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_keeps_its_order() {
        let manifest = Manifest {
            id_firmware: "f1",
            kind: "CORE",
            component: "app",
            version: "2.1.0",
            size: 1024,
            sha256: "ab",
        };
        assert_eq!(
            manifest.text(),
            r#"{"id_firmware":"f1","kind":"CORE","component":"app","version":"2.1.0","size":1024,"sha256":"ab"}"#
        );
    }

    #[test]
    fn a_signature_holds_only_for_its_manifest_and_key() {
        use ed25519_dalek::{Signer, SigningKey};
        let key = SigningKey::from_bytes(&[7; 32]);
        let public = STANDARD.encode(key.verifying_key().to_bytes());
        let signature = STANDARD.encode(key.sign(b"manifest").to_bytes());
        assert!(signature_holds(&public, "manifest", &signature));
        assert!(!signature_holds(&public, "manifest!", &signature));
        let other = STANDARD.encode(SigningKey::from_bytes(&[8; 32]).verifying_key().to_bytes());
        assert!(!signature_holds(&other, "manifest", &signature));
        assert!(!signature_holds(&public, "manifest", "not base64"));
        assert!(!signature_holds("short", "manifest", &signature));
    }

    #[test]
    fn an_update_request_reads_back_and_bad_params_are_refused() {
        let params = UpdateParams {
            id_firmware: "f1".into(),
            component: "app".into(),
            version: "2.1.0".into(),
            size: 10,
            sha256: "ab".into(),
            signature: "c2ln".into(),
            manifest: "{}".into(),
            url: "/gateway/v1/firmware/f1".into(),
        };
        let request = crate::CommandRequest::update(&params);
        let parsed = crate::CommandRequest::parse(&request.to_payload()).unwrap();
        assert_eq!(parsed.method, crate::CommandMethod::Update);
        assert_eq!(UpdateParams::read(&parsed.params).unwrap(), params);
        assert!(!crate::CommandMethod::ALL.contains(&crate::CommandMethod::Update));
        for bad in [
            r#"{"method":"update"}"#,
            r#"{"method":"update","params":{"id_firmware":"f1"}}"#,
        ] {
            assert!(crate::CommandRequest::parse(bad.as_bytes()).is_err(), "{bad}");
        }
        let mut other = serde_json::to_value(&params).unwrap();
        other["component"] = "kernel".into();
        assert!(UpdateParams::read(&other).is_err());
    }
}

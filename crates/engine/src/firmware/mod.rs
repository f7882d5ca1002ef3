//! Firmware images (docs/api.md, "Firmware"): stored in the store in pieces
//! (`devicecloud_store::firmware`), described by a manifest the service signs with its Ed25519
//! key ([`signing`]), installed by firmware jobs.

pub mod pieces;
pub mod signing;
pub mod upload;

//! The store's clock and its identifiers: the one place the store reads the time, and the one
//! that makes the `id_*` values.

/// Current Unix time in whole seconds; the store never reads the clock itself except here.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A fresh random identifier in the UUID text form every `id_*` field uses.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

//! Who is looking at a page: the signed-in account (see `session` for how a request becomes
//! one) and the CSRF token its forms carry.

use devicecloud_web::caller::Caller;

/// The hidden field of every form.
pub const CSRF_FIELD: &str = "_csrf";

/// The signed-in account behind a page request, with the same rights as its API tokens.
pub struct Viewer {
    pub caller: Caller,
    pub username: String,
    pub csrf: String,
    pub(super) session_hash: String,
}

impl Viewer {
    /// Whether `sent` is this session's CSRF token (compared in constant time).
    pub fn csrf_holds(&self, sent: &str) -> bool {
        devicecloud_engine::auth::secrets::same_hash(sent, &self.csrf)
    }
}

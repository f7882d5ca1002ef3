//! Who is calling: secrets (tokens, passwords), the bearer check with its cache, and rights.

pub mod cache;
pub mod caller;
pub mod login;
pub mod login_limit;
pub mod rights;
pub mod secrets;

pub use caller::Caller;
pub use rights::Role;

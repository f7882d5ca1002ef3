//! Who is calling: secrets (tokens, passwords), the bearer check with its cache, rights, and the
//! limits on failed sign-ins and on requests per account.

pub mod cache;
pub mod hashing;
pub mod login_limit;
pub mod rate_limit;
pub mod rights;
pub mod secrets;

pub use rights::Role;

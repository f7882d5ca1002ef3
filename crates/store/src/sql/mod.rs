//! SQL helpers below any connection: the dialect (`Backend`), comparisons and time conditions as
//! sea-query expressions, the group scope of a caller, what expires when, and statements over
//! many rows at once.

pub mod backend;
pub mod comparison;
pub mod expiry;
pub(crate) mod lists;
pub mod point_time;
pub mod scope;

pub use backend::Backend;
pub use point_time::TimePart;

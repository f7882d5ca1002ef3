//! SQL helpers below any connection: the dialect (`Backend`), comparisons and time conditions as
//! sea-query expressions, the group scope of a caller, and what expires when.

pub mod backend;
pub mod comparison;
pub mod expiry;
pub mod point_time;
pub mod scope;

pub use backend::Backend;
pub use point_time::TimePart;

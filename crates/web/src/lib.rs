//! The web front ends of devicecloud: the REST API with OAuth 2.0 (`http`), the dashboard
//! (`dashboard`), and the service layer both call with the same rules (`service`), over one
//! [`AppState`]. They call the engines of `devicecloud-engine`; no engine calls them
//! (docs/ARCHITECTURE.md).

pub mod browser;
pub mod caller;
pub mod http;
pub mod origin;
pub mod render;
pub mod service;
pub mod state;

pub use state::AppState;

//! The running devicecloud service put together: the composition root that builds the engines
//! (`devicecloud-engine`) with their contexts, the MQTT transport (`devicecloud-mqtt`) and the
//! web front ends (`devicecloud-web`), starts them, and stops them with one cancellation token.

pub mod running;
pub mod wiring;

pub use devicecloud_engine::settings::{FrontEnd, Settings};
pub use devicecloud_web::AppState;
pub use running::{Addresses, Listeners, Running, StartError, serve_http};

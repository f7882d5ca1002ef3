//! The engines of devicecloud: what happens to a gateway's messages (`gateway`, `ingest`), the
//! commands that travel to a gateway and back (`commands`), the live stream (`stream`), device
//! twins (`twins`) and jobs over many devices (`jobs`), the webhooks (`webhooks`), what the nodes
//! sharing a database tell each other (`peers`, `nodes`), expiry and upkeep (`retention`,
//! `upkeep`), with the caches and limits they share (`auth`, `page_cache`, `admission`) and the
//! settings they all read (`settings`).
//!
//! No engine knows a transport or a front end: each is handed a context holding what it uses by
//! the composition root (the `devicecloud-server` crate), and the MQTT transport and the web
//! front ends call it (docs/ARCHITECTURE.md).

pub mod address_slots;
pub mod admission;
pub mod alarms;
pub mod auth;
pub mod commands;
pub mod event_catalogue;
pub mod event_types;
pub mod firmware;
pub mod gateway;
pub mod ingest;
pub mod jobs;
pub mod key_file;
pub mod key_hash;
pub mod metrics;
pub mod nodes;
pub mod packing;
pub mod page_cache;
pub mod peers;
pub mod periodic;
pub mod retention;
pub mod settings;
pub mod stream;
pub mod twins;
pub mod upkeep;
pub mod webhooks;

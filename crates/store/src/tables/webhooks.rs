//! Webhooks (docs/api.md, "Webhooks"): the webhook records, the durable outbox the ingest transaction
//! writes, the deliveries (batches) cut from it, and the log of delivery attempts.
//!
//! The outbox holds compact rows (the points one ingest transaction queues for a webhook,
//! packed, or a reference to an event), written in the transaction that stores the record: a
//! record committed is a record queued. The worker reads
//! them in order, renders one body per batch, and stores that body as a delivery in the same
//! transaction that removes the rows, so a retry (or a restart) sends the very same bytes.
//!
//! One submodule per concern, so each can be read alone: the records (what clients manage),
//! the attempt log, the delivery state machine, what the service does to a failing webhook
//! (lifecycle), and the in-memory route table. Everything is
//! re-exported here: callers name `webhooks::X` and never the submodule.

mod attempts;
mod deliveries;
mod lifecycle;
pub(crate) mod packed;
mod queue;
mod records;
mod routes;

pub use attempts::{ATTEMPT_ATTRIBUTES, ATTEMPT_COLUMNS, ATTEMPT_SORTABLE, AttemptRow, attempts};
pub use deliveries::{
    Attempt, DeliveryRow, Outcome, backlog, cut_delivery, outbox_len, pending_delivery, prune, record_attempt,
};
pub use lifecycle::{Deactivated, Deactivation, backlog_items, deactivate};
pub use packed::PackedPoint;
pub use queue::{QueuedEvent, Split, Taken, queued_events, queued_points};
pub use records::{
    ATTRIBUTES, COLUMNS, FORWARDING_TYPES, NewWebhook, SORTABLE, WebhookChanges, WebhookRow, active, active_of_group,
    create, delete, get, list, replace_secrets, stored_secrets, update,
};
pub use routes::{RouteTable, Routes};

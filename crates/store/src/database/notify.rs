//! What nodes sharing one PostgreSQL database tell each other, through PostgreSQL's own
//! LISTEN/NOTIFY: no broker beside the database. A notification is delivered to every session
//! listening on its channel when the sending transaction commits, once, in commit order; one
//! sent while a listener's connection was down is lost to it, which [`Subscription::next`]
//! reports as [`Heard::Lost`] so that the listener can say so.
//!
//! SQLite serves one process: there is nobody to tell, so sending does nothing and there is no
//! subscription.

use sqlx::postgres::{PgListener, PgPoolOptions};

use crate::database::Db;
use crate::database::error::StoreError;

/// The largest payload sent: PostgreSQL refuses 8,000 bytes and more.
pub const MAX_PAYLOAD: usize = 7_900;

/// Sends `payloads` on `channel`, in order, in one statement (one transaction).
pub async fn send(db: &Db, channel: &str, payloads: &[String]) -> Result<(), StoreError> {
    let channels = vec![channel; payloads.len()];
    notify(db, channels, payloads.iter().map(String::as_str).collect()).await
}

/// Sends each `(channel, payload)` of `notes`, in order, in one statement (one transaction).
pub async fn send_each(db: &Db, notes: &[(String, String)]) -> Result<(), StoreError> {
    let (channels, payloads) = notes.iter().map(|(c, p)| (c.as_str(), p.as_str())).unzip();
    notify(db, channels, payloads).await
}

/// `payloads[i]` on `channels[i]`; `WITH ORDINALITY` and the ORDER BY keep their order (the
/// order they were queued).
async fn notify(db: &Db, channels: Vec<&str>, payloads: Vec<&str>) -> Result<(), StoreError> {
    let Db::Postgres(pool) = db else {
        return Ok(());
    };
    if payloads.is_empty() {
        return Ok(());
    }
    sqlx::query("SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(c, p, n) ORDER BY n")
        .bind(channels)
        .bind(payloads)
        .execute(pool)
        .await?;
    Ok(())
}

/// What a subscription heard.
#[derive(Debug, PartialEq, Eq)]
pub enum Heard {
    /// A notification on one of the channels.
    Notice { channel: String, payload: String },
    /// The connection was lost (and is being made again): notifications sent meanwhile are lost.
    Lost,
}

/// A connection listening on some channels.
pub struct Subscription(PgListener);

impl Subscription {
    /// Listens on `channels`, on a connection of its own (not one of `db`'s pool, which it
    /// would hold for good); `None` on SQLite.
    pub async fn open(db: &Db, channels: &[String]) -> Result<Option<Subscription>, StoreError> {
        let Db::Postgres(pool) = db else {
            return Ok(None);
        };
        let own = PgPoolOptions::new()
            .max_connections(1)
            .max_lifetime(None)
            .idle_timeout(None)
            .connect_lazy_with((*pool.connect_options()).clone());
        let mut listener = PgListener::connect_with(&own).await?;
        listener.listen_all(channels.iter().map(String::as_str)).await?;
        Ok(Some(Subscription(listener)))
    }

    /// The next thing heard; an error when the connection cannot be made again (the pool is
    /// closed, or the database refuses it: the caller waits and asks again).
    pub async fn next(&mut self) -> Result<Heard, StoreError> {
        Ok(match self.0.try_recv().await? {
            Some(n) => Heard::Notice {
                channel: n.channel().to_string(),
                payload: n.payload().to_string(),
            },
            None => Heard::Lost,
        })
    }
}

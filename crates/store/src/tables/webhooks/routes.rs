//! Which webhooks take the records of which group: the one routing mechanism of both kinds of
//! record. The ingest writer asks for every batch and the gateway for every event it records,
//! so the table is held in memory: a query per batch (let alone per point or event) would cost
//! the hot path, and most groups have no webhook at all, which the table answers without a
//! statement. The records are queued in the transaction that stores them, from the table.
//!
//! The table is reloaded when a webhook changes on this node ([`Routes::invalidate`]) and at
//! the latest after `ttl`, which bounds how long a change made through another node sharing the
//! database goes unseen. The group of a series never changes, so series → group is only ever
//! added to. Callers without the cache (tools, the command log) read a table of their own in
//! their transaction ([`RouteTable::SELECT`]), and route with it the same way.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::database::Result;
use crate::database::db::{Db, values};

/// Active webhooks by group and forwarding type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteTable {
    /// Group → webhooks forwarding its measurements.
    measurements: HashMap<String, Vec<String>>,
    /// Group → webhooks forwarding its events.
    events: HashMap<String, Vec<String>>,
}

impl RouteTable {
    /// The active webhooks, in the order they are queued for (by id): the rows of a table.
    pub(crate) const SELECT: &str =
        "SELECT id_webhook, id_group, forwarding_type FROM webhooks WHERE is_active = 1 ORDER BY id_webhook";

    /// The table of the active webhooks, from the rows of [`RouteTable::SELECT`] (run on a pool,
    /// or in a transaction so that the routes are those the transaction sees).
    pub(crate) fn from_rows(rows: Vec<(String, String, String)>) -> RouteTable {
        let mut table = RouteTable::default();
        for (id_webhook, id_group, kind) in rows {
            let by_group = if kind == "events" {
                &mut table.events
            } else {
                &mut table.measurements
            };
            by_group.entry(id_group).or_default().push(id_webhook);
        }
        table
    }

    /// Whether any webhook forwards measurements.
    pub fn forwards_measurements(&self) -> bool {
        !self.measurements.is_empty()
    }

    /// The webhooks forwarding a group's measurements, by id.
    pub fn measurements_of(&self, id_group: &str) -> &[String] {
        self.measurements.get(id_group).map_or(&[], Vec::as_slice)
    }

    /// The webhooks forwarding a group's events, by id.
    pub fn events_of(&self, id_group: &str) -> &[String] {
        self.events.get(id_group).map_or(&[], Vec::as_slice)
    }
}

/// The cached route table and series → group map.
#[derive(Debug)]
pub struct Routes {
    table: RwLock<(Arc<RouteTable>, Option<Instant>)>,
    stale: AtomicBool,
    ttl: Duration,
    groups: Mutex<HashMap<i64, Arc<str>>>,
}

impl Routes {
    /// An empty cache, loaded on first use and trusted for `ttl`.
    pub fn new(ttl: Duration) -> Routes {
        Routes {
            table: RwLock::new((Arc::default(), None)),
            stale: AtomicBool::new(true),
            ttl,
            groups: Mutex::default(),
        }
    }

    /// Forgets the table: the next batch reloads it (after a webhook was created, changed or
    /// deleted on this node).
    pub fn invalidate(&self) {
        self.stale.store(true, Ordering::SeqCst);
    }

    /// The route table in force.
    pub async fn table(&self, db: &Db) -> Result<Arc<RouteTable>> {
        {
            let guard = self.table.read().unwrap_or_else(|e| e.into_inner());
            let fresh = guard.1.is_some_and(|at| at.elapsed() < self.ttl);
            if fresh && !self.stale.load(Ordering::SeqCst) {
                return Ok(guard.0.clone());
            }
        }
        // Cleared before reading, so that a change made during the load marks it stale again.
        self.stale.store(false, Ordering::SeqCst);
        let rows = db.rows(RouteTable::SELECT, values![]).await?;
        let table = Arc::new(RouteTable::from_rows(rows));
        *self.table.write().unwrap_or_else(|e| e.into_inner()) = (table.clone(), Some(Instant::now()));
        Ok(table)
    }

    /// The group of each series key; unknown keys are read in one query per 500.
    pub async fn groups_of(&self, db: &Db, keys: &HashSet<i64>) -> Result<HashMap<i64, Arc<str>>> {
        let missing: Vec<i64> = {
            let known = self.groups.lock().unwrap_or_else(|e| e.into_inner());
            keys.iter().copied().filter(|k| !known.contains_key(k)).collect()
        };
        for chunk in missing.chunks(500) {
            // The keys are integers of ours, written as literals.
            let list = chunk.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
            let sql = format!("SELECT container_key, id_group FROM containers WHERE container_key IN ({list})");
            let rows: Vec<(i64, String)> = db.rows(sqlx::AssertSqlSafe(sql), values![]).await?;
            let mut known = self.groups.lock().unwrap_or_else(|e| e.into_inner());
            for (key, group) in rows {
                known.insert(key, Arc::from(group));
            }
        }
        let known = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        Ok(keys
            .iter()
            .filter_map(|k| known.get(k).map(|g| (*k, g.clone())))
            .collect())
    }
}

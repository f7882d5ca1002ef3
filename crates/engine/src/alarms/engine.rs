//! The evaluator: committed points in, alarm changes out (to `writer`), in commit order.
//!
//! What a rule needs of a series (the previous point, whether its alarm is open, since when its
//! condition holds) is kept in memory and read from the store when a series is first met — after
//! a start, after the rules changed, or when its gateway connected here (another node may have
//! committed its points meanwhile): the point before the first new one, the open alarms of its
//! device, the holds of its rules. So a restart or a gateway moving between nodes goes on where
//! the store says, never from an empty state.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use devicecloud_store::alarms::{self, AlarmRow, Change};
use devicecloud_store::ingest::Point;
use devicecloud_store::{StoreError, alarm_rules, chunks, unix_now};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::Context;
use super::evaluate::{Facts, RuleState, SeriesState, raise};
use super::rules::RuleSet;
use super::silences::{Silences, WatchKey};
use crate::key_hash::KeyMap;

/// How often the rules' change counter is read (a change made through another node), and
/// matches waiting are written.
const TICK: Duration = Duration::from_secs(1);
/// How long to wait before reading the store again after it failed.
const RETRY: Duration = Duration::from_secs(1);
/// After a stop, how long without a commit before the evaluator ends.
const DRAIN_IDLE: Duration = Duration::from_secs(2);
/// Tries to read what the store holds of a commit's series before its points are given up.
const PREPARE_TRIES: u32 = 3;
/// Most series kept; past it they are forgotten and read again as met.
const MAX_SERIES: usize = 2_000_000;

/// What reaches the evaluator, in one queue so that it comes in the order it happened.
#[derive(Debug)]
pub(super) enum Input {
    /// The new points of one commit.
    Points(Vec<Point>),
    /// A gateway connected to this node: its series are read again at their next point.
    Connected(String),
}

pub(super) struct Inputs {
    pub ctx: Arc<Context>,
    pub inputs: mpsc::Receiver<Input>,
    pub watching: Arc<AtomicBool>,
    pub changed: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    pub writes: mpsc::UnboundedSender<Vec<Change>>,
    pub shutdown: CancellationToken,
}

struct Engine {
    ctx: Arc<Context>,
    rules: RuleSet,
    /// Counts rule sets; a series whose rule states were made for another is read again.
    generation: u64,
    /// The store's change counter the rules were read at.
    version: i64,
    series: KeyMap<SeriesState>,
    by_gateway: HashMap<Arc<str>, Vec<i64>>,
    silences: Silences,
    /// Rule states with matches waiting to be written.
    dirty: Vec<(i64, usize)>,
    writes: mpsc::UnboundedSender<Vec<Change>>,
    watching: Arc<AtomicBool>,
}

pub(super) async fn run(inputs: Inputs) {
    let Inputs {
        ctx,
        mut inputs,
        watching,
        mut changed,
        writes,
        shutdown,
    } = inputs;
    let mut engine = Engine {
        ctx,
        rules: RuleSet::default(),
        generation: 0,
        version: -1,
        series: KeyMap::default(),
        by_gateway: HashMap::new(),
        silences: Silences::default(),
        dirty: Vec::new(),
        writes,
        watching,
    };
    while let Err(e) = engine.reload().await {
        tracing::warn!(error = %e, "alarm rules cannot be read; trying again");
        tokio::select! {
            _ = tokio::time::sleep(RETRY) => {}
            _ = shutdown.cancelled() => return,
        }
    }
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let due = engine.silences.next_deadline().map(deadline_instant);
        // Points come last: under steady ingest the tick, a rule change and a deadline still get
        // their turn.
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            Some(done) = changed.recv() => {
                engine.reload_logged().await;
                let _ = done.send(());
            }
            _ = tick.tick() => {
                engine.flush();
                metrics::gauge!("devicecloud_alarm_watches").set(engine.silences.len() as f64);
                match alarm_rules::version(&engine.ctx.db).await {
                    Ok(v) if v != engine.version => engine.reload_logged().await,
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e, "alarm rules' version not read"),
                }
            }
            _ = sleep_until(due) => engine.expire().await,
            input = inputs.recv() => match input {
                Some(input) => engine.input(input).await,
                None => break,
            },
        }
    }
    // The ingest writers drain their queues after the stop: the points of those commits (which
    // were acknowledged) are still evaluated, until none came for a while.
    while let Ok(Some(input)) = tokio::time::timeout(DRAIN_IDLE, inputs.recv()).await {
        engine.input(input).await;
    }
    engine.flush();
    tracing::debug!("alarm engine stopped");
}

/// The instant of a deadline in Unix seconds.
fn deadline_instant(at: i64) -> tokio::time::Instant {
    let wait = at.saturating_sub(unix_now()).clamp(0, 86_400);
    tokio::time::Instant::now() + Duration::from_secs(wait as u64)
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A point's time in microseconds.
fn time_us(p: &Point) -> i64 {
    p.seconds.saturating_mul(1_000_000).saturating_add(p.microseconds)
}

impl Engine {
    async fn reload_logged(&mut self) {
        if let Err(e) = self.reload().await {
            tracing::warn!(error = %e, "alarm rules cannot be read; the ones read before stay");
        }
    }

    /// Reads the active rules and watches the devices the inactivity rules look at.
    async fn reload(&mut self) -> Result<(), StoreError> {
        let ctx = Arc::clone(&self.ctx);
        let db = &ctx.db;
        // The counter first: a change committed after it is read again at the next tick.
        let version = alarm_rules::version(db).await?;
        let rows = alarm_rules::active(db).await?;
        let rules = RuleSet::after(&rows, &self.rules);
        // Matches waiting belong to the rule states about to be made again.
        self.flush();
        let silent: Vec<&str> = rules.silences().map(|(_, r, _)| &*r.id).collect();
        let open = alarms::open_of_rules(db, &silent).await?;
        let mut seeds = Vec::new();
        for (_, rule, seconds) in rules.silences() {
            let last = alarms::last_points(db, &rule.id_group, rule.datatype, rule.source_device.as_deref()).await?;
            seeds.push((Arc::clone(&rule.id), rule.datatype, seconds, last));
        }
        let now = unix_now();
        self.silences
            .retain(|key| rules.silences().any(|(_, r, _)| r.id == key.rule));
        for (rule, datatype, seconds, last) in seeds {
            for (device, at) in last {
                let key = WatchKey {
                    rule: Arc::clone(&rule),
                    device: Arc::from(device.as_str()),
                    datatype,
                };
                let is_open = open
                    .iter()
                    .any(|a| *a.id_alarm_rule == *rule && a.source_device == device && a.datatype == datatype);
                // A series' newest point has the device's own time: watching starts now. A
                // device's last data is the service's time of arrival.
                let seen = if datatype.is_some() { now } else { at.min(now) };
                self.silences.watch(key, seconds, seen, at, is_open);
            }
        }
        self.watching.store(!rules.is_empty(), Ordering::Relaxed);
        if rules.is_empty() {
            self.series.clear();
            self.by_gateway.clear();
        }
        self.rules = rules;
        self.generation += 1;
        self.version = version;
        metrics::gauge!("devicecloud_alarm_watches").set(self.silences.len() as f64);
        tracing::debug!(
            rules = self.rules.rules.len(),
            watched = self.silences.len(),
            "alarm rules read"
        );
        Ok(())
    }

    /// Forgets the series of `gateway` (read again at their next point).
    fn forget(&mut self, gateway: &str) {
        if let Some(keys) = self.by_gateway.remove(gateway) {
            self.flush();
            for key in keys {
                self.series.remove(&key);
            }
        }
    }

    /// Writes the matches waiting.
    fn flush(&mut self) {
        if self.dirty.is_empty() {
            return;
        }
        let now = unix_now();
        let mut out = Vec::new();
        for (key, i) in std::mem::take(&mut self.dirty) {
            if let Some(series) = self.series.get_mut(&key) {
                series.flush(&self.rules, i, now, &mut out);
            }
        }
        self.send(out);
    }

    fn send(&self, changes: Vec<Change>) {
        if !changes.is_empty() {
            let _ = self.writes.send(changes);
        }
    }

    async fn input(&mut self, input: Input) {
        match input {
            Input::Points(batch) => self.points(batch).await,
            Input::Connected(gateway) => self.forget(&gateway),
        }
    }

    /// Evaluates the new points of one commit.
    async fn points(&mut self, batch: Vec<Point>) {
        if self.rules.is_empty() {
            return;
        }
        let mut tries = 0;
        while let Err(e) = self.prepare(&batch).await {
            tries += 1;
            if tries >= PREPARE_TRIES {
                // Without what the store holds of them, these points cannot be evaluated rightly.
                metrics::counter!("devicecloud_alarm_points_skipped_total").increment(batch.len() as u64);
                tracing::error!(error = %e, points = batch.len(), "alarm state not read; a commit's points are not evaluated");
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let now = unix_now();
        let mut out = Vec::new();
        for p in &batch {
            let Some(series) = self.series.get_mut(&p.container_key) else {
                continue;
            };
            let evaluated = series.evaluate(&self.rules, time_us(p), p.value, now, &mut out, &mut self.dirty);
            if !evaluated || series.silences.is_empty() {
                continue;
            }
            for &i in &series.silences {
                let rule = &self.rules.rules[i];
                let super::rules::Test::Inactivity { seconds } = rule.test else {
                    continue;
                };
                let key = WatchKey {
                    rule: Arc::clone(&rule.id),
                    device: Arc::clone(&series.facts.device),
                    datatype: rule.datatype,
                };
                // What the store keeps to compare with (`alarms::last_points`): a series' newest
                // point time for one datatype, the device's last arrival for any.
                let mark = if rule.datatype.is_some() { p.seconds } else { now };
                if self.silences.touch(&key, seconds, now, mark) {
                    out.push(Change::Clear {
                        id_alarm_rule: rule.id.to_string(),
                        source_device: series.facts.device.to_string(),
                        datatype: rule.datatype,
                        at: now,
                    });
                }
            }
        }
        metrics::counter!("devicecloud_alarm_points_total").increment(batch.len() as u64);
        self.send(out);
    }

    /// Reads what the store holds of the series of `batch` not met yet, or met under other rules.
    async fn prepare(&mut self, batch: &[Point]) -> Result<(), StoreError> {
        // The times (µs) of the commit's points of each series to read, sorted.
        let mut first: KeyMap<Vec<i64>> = KeyMap::default();
        for p in batch {
            let stale = self
                .series
                .get(&p.container_key)
                .is_none_or(|s| s.generation != self.generation);
            if stale {
                first.entry(p.container_key).or_default().push(time_us(p));
            }
        }
        if first.is_empty() {
            return Ok(());
        }
        for times in first.values_mut() {
            times.sort_unstable();
        }
        if self.series.len() + first.len() > MAX_SERIES {
            self.flush();
            self.series.clear();
            self.by_gateway.clear();
        }
        let db = self.ctx.db.clone();
        let unknown: Vec<i64> = first.keys().copied().filter(|k| !self.series.contains_key(k)).collect();
        for facts in alarms::series_facts(&db, &unknown).await? {
            let key = facts.container_key;
            let facts = Facts {
                group: Arc::from(facts.id_group.as_str()),
                device: Arc::from(facts.source_device.as_str()),
                serial: Arc::from(facts.serial.as_str()),
                datatype: facts.datatype,
                gateway: Arc::from(facts.gateway.as_str()),
            };
            self.by_gateway.entry(Arc::clone(&facts.gateway)).or_default().push(key);
            self.series.insert(
                key,
                SeriesState {
                    key,
                    facts,
                    newest_us: None,
                    previous: None,
                    generation: 0,
                    thresholds: Vec::new(),
                    silences: Vec::new(),
                },
            );
        }
        // The rule states of every series met anew, from the store.
        let keys: Vec<i64> = first.keys().copied().filter(|k| self.series.contains_key(k)).collect();
        let mut devices: Vec<&str> = keys.iter().map(|k| &*self.series[k].facts.device).collect();
        devices.sort_unstable();
        devices.dedup();
        let open = alarms::open_of(&db, &devices).await?;
        let holds = alarms::holds_of(&db, &keys).await?;
        for key in keys {
            let generation = self.generation;
            let (thresholds, silences) = {
                let f = &self.series[&key].facts;
                self.rules.of_series(&f.group, &f.device, f.datatype)
            };
            let needs_previous = !thresholds.is_empty() && self.series[&key].newest_us.is_none();
            let previous = match first.get(&key).filter(|_| needs_previous) {
                Some(times) => chunks::scan::newest_besides(&db, key, times[0], times).await?,
                None => None,
            };
            let Some(series) = self.series.get_mut(&key) else {
                continue;
            };
            if needs_previous {
                series.previous = previous;
                series.newest_us = previous.map(|(t, _)| t);
            }
            let (device, datatype) = (Arc::clone(&series.facts.device), series.facts.datatype);
            let is_open = |a: &AlarmRow, rule: &str, datatype: Option<i64>| {
                *a.id_alarm_rule == *rule && *a.source_device == *device && a.datatype == datatype
            };
            // A rule unchanged since the series' states were made keeps its state: what the store
            // holds may not have the writes still queued of it.
            let before = std::mem::take(&mut series.thresholds);
            series.thresholds = thresholds
                .into_iter()
                .map(|i| {
                    let rule = &self.rules.rules[i];
                    if let Some(kept) = before.iter().find(|s| s.id == rule.id && s.version == rule.version) {
                        return RuleState {
                            rule: i,
                            ..kept.clone()
                        };
                    }
                    RuleState {
                        rule: i,
                        id: Arc::clone(&rule.id),
                        version: rule.version,
                        open: open.iter().any(|a| is_open(a, &rule.id, Some(datatype))),
                        since_us: holds
                            .iter()
                            .find(|(r, k, _)| *k == key && **r == *rule.id)
                            .map(|(_, _, since)| *since),
                        pending: 0,
                        pending_value: 0.0,
                    }
                })
                .collect();
            for &i in &silences {
                let rule = &self.rules.rules[i];
                if open.iter().any(|a| is_open(a, &rule.id, rule.datatype)) {
                    let key = WatchKey {
                        rule: Arc::clone(&rule.id),
                        device: Arc::clone(&device),
                        datatype: rule.datatype,
                    };
                    if let super::rules::Test::Inactivity { seconds } = rule.test {
                        let now = unix_now();
                        self.silences.watch(key.clone(), seconds, now, 0, true);
                        self.silences.opened(&key);
                    }
                }
            }
            series.silences = silences;
            series.generation = generation;
        }
        Ok(())
    }

    /// Raises the alarms of the devices silent past their rule's seconds, unless the store shows
    /// a point committed by another node.
    async fn expire(&mut self) {
        let now = unix_now();
        let due = self.silences.due(now);
        let mut out = Vec::new();
        for due in due {
            let Some(rule) = self.rules.rules.iter().find(|r| r.id == due.key.rule) else {
                continue;
            };
            let stored = alarms::last_points(&self.ctx.db, &rule.id_group, rule.datatype, Some(&due.key.device)).await;
            match stored {
                Ok(rows) => {
                    let newest = rows.iter().map(|(_, at)| *at).max();
                    match newest {
                        Some(at) if at > due.last_point => {
                            self.silences.moved(&due.key, at, now);
                            continue;
                        }
                        // Archived meanwhile: no longer watched.
                        None => continue,
                        Some(_) => {}
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a silent device's last point not read; looked at again later");
                    self.silences.moved(&due.key, due.last_point, now);
                    continue;
                }
            }
            let facts = Facts {
                group: Arc::clone(&rule.id_group),
                device: Arc::clone(&due.key.device),
                serial: Arc::from(""),
                datatype: due.key.datatype.unwrap_or_default(),
                gateway: Arc::from(""),
            };
            let mut alarm = raise(&facts, rule, None, 1, now, false);
            alarm.datatype = due.key.datatype;
            out.push(Change::Raise(alarm));
            self.silences.opened(&due.key);
        }
        self.send(out);
    }
}

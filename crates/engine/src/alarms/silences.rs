//! Inactivity rules: for each device a rule watches, when it last sent a point, and a heap of
//! deadlines ordered by time (docs/api.md, "Alarms": `inactivity_s`).
//!
//! A point only moves its watch's time: no heap operation, so the cost of a point does not
//! depend on how many devices are watched. Each watch has at most one entry in the heap; when an
//! entry comes due the watch's real deadline (its last point + the rule's seconds) is looked at,
//! and the entry pushed again if the watch moved meanwhile. So a tick costs nothing while nothing
//! is due, and a silent device costs one heap operation per `inactivity_s`, not per tick.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

/// What a watch is of: a rule, a device, and the datatype the rule names (`None`: any).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WatchKey {
    pub rule: Arc<str>,
    pub device: Arc<str>,
    pub datatype: Option<i64>,
}

#[derive(Clone, Debug)]
struct Watch {
    seconds: i64,
    /// When (Unix seconds, this node's clock) the device last sent a point the rule looks at.
    last_seen: i64,
    /// That point's own time (Unix seconds): another node's newer point shows in the store.
    last_point: i64,
    /// Whether its alarm is not cleared.
    open: bool,
    /// Whether it has an entry in the heap.
    queued: bool,
}

/// The watches and their deadlines.
#[derive(Debug, Default)]
pub struct Silences {
    watches: HashMap<WatchKey, Watch>,
    heap: BinaryHeap<Reverse<(i64, WatchKey)>>,
}

/// A watch come due: the device has sent nothing since `last_point` (its time) for the rule's
/// seconds, unless the store knows better.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due {
    pub key: WatchKey,
    pub last_point: i64,
}

impl Silences {
    pub fn len(&self) -> usize {
        self.watches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.watches.is_empty()
    }

    /// Starts (or restarts) watching `key` for `seconds` from `last_seen`.
    pub fn watch(&mut self, key: WatchKey, seconds: i64, last_seen: i64, last_point: i64, open: bool) {
        let watch = self.watches.entry(key.clone()).or_insert(Watch {
            seconds,
            last_seen,
            last_point,
            open,
            queued: false,
        });
        // Shorter than before: an entry at the earlier deadline too (the later one finds the
        // watch moved and goes back, or not due).
        let sooner = seconds < watch.seconds && watch.queued;
        watch.seconds = seconds;
        watch.last_seen = watch.last_seen.max(last_seen);
        watch.last_point = watch.last_point.max(last_point);
        watch.open = open;
        if !watch.open && (!watch.queued || sooner) {
            watch.queued = true;
            self.heap.push(Reverse((watch.last_seen.saturating_add(seconds), key)));
        }
    }

    /// A point of the device arrived at `now` with its own time `point`: returns true when the
    /// watch's alarm was open (it clears).
    pub fn touch(&mut self, key: &WatchKey, seconds: i64, now: i64, point: i64) -> bool {
        match self.watches.get_mut(key) {
            Some(watch) => {
                watch.last_seen = watch.last_seen.max(now);
                watch.last_point = watch.last_point.max(point);
                let was_open = std::mem::replace(&mut watch.open, false);
                if !watch.queued {
                    watch.queued = true;
                    self.heap
                        .push(Reverse((watch.last_seen.saturating_add(watch.seconds), key.clone())));
                }
                was_open
            }
            None => {
                self.watch(key.clone(), seconds, now, point, false);
                false
            }
        }
    }

    /// Marks the alarm of `key` open (raised here or found open in the store).
    pub fn opened(&mut self, key: &WatchKey) {
        if let Some(watch) = self.watches.get_mut(key) {
            watch.open = true;
        }
    }

    /// The earliest deadline in the heap (Unix seconds), if any.
    pub fn next_deadline(&self) -> Option<i64> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// The watches due at `now`: those whose device sent nothing for their seconds and whose
    /// alarm is not open. Entries of watches that moved are pushed again at their new deadline.
    pub fn due(&mut self, now: i64) -> Vec<Due> {
        let mut due = Vec::new();
        while let Some(Reverse((at, _))) = self.heap.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((_, key))) = self.heap.pop() else {
                break;
            };
            let Some(watch) = self.watches.get_mut(&key) else {
                continue;
            };
            watch.queued = false;
            if watch.open {
                continue;
            }
            let deadline = watch.last_seen.saturating_add(watch.seconds);
            if deadline > now {
                watch.queued = true;
                self.heap.push(Reverse((deadline, key)));
            } else {
                due.push(Due {
                    key,
                    last_point: watch.last_point,
                });
            }
        }
        due
    }

    /// The store shows a point newer than the watch's (another node committed it): the watch
    /// starts over from `now`.
    pub fn moved(&mut self, key: &WatchKey, point: i64, now: i64) {
        if let Some(watch) = self.watches.get_mut(key) {
            watch.last_point = watch.last_point.max(point);
            watch.last_seen = watch.last_seen.max(now);
            if !watch.queued && !watch.open {
                watch.queued = true;
                self.heap
                    .push(Reverse((watch.last_seen.saturating_add(watch.seconds), key.clone())));
            }
        }
    }

    /// Keeps only the watches of rules `keep` says to; their entries go as they come due.
    pub fn retain(&mut self, keep: impl Fn(&WatchKey) -> bool) {
        self.watches.retain(|key, _| keep(key));
        if self.watches.is_empty() {
            self.heap.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(device: &str) -> WatchKey {
        WatchKey {
            rule: "r".into(),
            device: device.into(),
            datatype: None,
        }
    }

    #[test]
    fn a_silent_device_comes_due_once() {
        let mut s = Silences::default();
        s.touch(&key("a"), 60, 1_000, 1_000);
        assert!(s.due(1_059).is_empty());
        let due = s.due(1_060);
        assert_eq!(due.len(), 1);
        s.opened(&due[0].key);
        assert!(s.due(5_000).is_empty());
        // A point clears it and watching starts over.
        assert!(s.touch(&key("a"), 60, 5_001, 5_001));
        assert_eq!(s.due(5_061).len(), 1);
    }

    #[test]
    fn points_move_the_deadline_without_new_entries() {
        let mut s = Silences::default();
        for t in 0..1_000 {
            s.touch(&key("a"), 60, t, t);
        }
        assert_eq!(s.heap.len(), 1);
        // The first entry comes due at 60, finds the watch moved and goes back at 1,059.
        assert!(s.due(100).is_empty());
        assert_eq!(s.next_deadline(), Some(1_059));
        assert_eq!(s.due(1_059).len(), 1);
    }

    #[test]
    fn nothing_due_costs_one_look() {
        let mut s = Silences::default();
        for d in 0..100_000 {
            s.touch(&key(&format!("d{d}")), 600, 0, 0);
        }
        assert!(s.due(599).is_empty());
        assert_eq!(s.heap.len(), 100_000);
    }

    #[test]
    fn a_point_seen_by_another_node_restarts_the_watch() {
        let mut s = Silences::default();
        s.touch(&key("a"), 60, 0, 0);
        let due = s.due(60);
        s.moved(&due[0].key, 50, 60);
        assert!(s.due(119).is_empty());
        assert_eq!(s.due(120).len(), 1);
    }
}

//! The replay buffer of the live stream: every record of this node in commit order, numbered
//! by one increasing sequence, kept for resuming clients and read by live ones alike (a client
//! is a cursor into it, not a queue of its own, so a slow client costs no memory).
//!
//! The buffer is bounded in bytes. It also knows its floor: the sequence number below which
//! records may be missing (evicted, or never recorded). A cursor below the floor cannot go on
//! without a gap, and is answered "overflow" ([`Ring::after`] gives `None`) instead: a gap is
//! never silent.

use std::collections::VecDeque;
use std::sync::Arc;

/// What a record is, and the SSE event name it is sent under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A `data` record.
    Measurement,
    /// An `event` record.
    Event,
    /// A command outcome.
    Command,
    /// A twin record, after a change of its desired or reported document.
    Twin,
    /// An alarm record, after it was raised, counted, acknowledged or cleared.
    Alarm,
}

impl Kind {
    /// The SSE event name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Measurement => "measurement",
            Kind::Event => "event",
            Kind::Command => "command",
            Kind::Twin => "twin",
            Kind::Alarm => "alarm",
        }
    }

    /// The name in the `types` parameter.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Measurement => "measurements",
            Kind::Event => "events",
            Kind::Command => "commands",
            Kind::Twin => "twins",
            Kind::Alarm => "alarms",
        }
    }

    pub const ALL: [Kind; 5] = [Kind::Measurement, Kind::Event, Kind::Command, Kind::Twin, Kind::Alarm];
}

/// One committed record, rendered once for every client.
#[derive(Debug, PartialEq)]
pub struct Record {
    pub seq: u64,
    pub kind: Kind,
    pub id_group: Arc<str>,
    /// The device it is about (`source_device`, or the device a command went to), for the
    /// dashboard's device page.
    pub device: Arc<str>,
    /// The record as JSON text.
    pub data: Box<str>,
}

/// Bytes a record is counted for beyond its JSON: its struct, its `Arc`, its group and device.
const OVERHEAD: usize = 112;

impl Record {
    fn size(&self) -> usize {
        self.data.len() + OVERHEAD
    }
}

/// The buffer itself; the caller holds it under a lock.
#[derive(Debug)]
pub struct Ring {
    records: VecDeque<Arc<Record>>,
    /// The sequence number the next record gets (the first is 1).
    next: u64,
    /// Every record numbered above this is held or still to come.
    floor: u64,
    bytes: usize,
    max_bytes: usize,
    /// The last number given out marks a gap: another gap right after it adds nothing.
    gapped: bool,
}

impl Ring {
    pub fn new(max_bytes: usize) -> Ring {
        Ring {
            records: VecDeque::new(),
            next: 1,
            floor: 0,
            bytes: 0,
            max_bytes,
            gapped: false,
        }
    }

    /// The number of the newest record (0 before the first).
    pub fn head(&self) -> u64 {
        self.next - 1
    }

    /// Appends a record, evicting the oldest ones past the byte bound; returns its number.
    pub fn push(&mut self, kind: Kind, id_group: Arc<str>, device: Arc<str>, data: Box<str>) -> u64 {
        let seq = self.next;
        self.next += 1;
        self.gapped = false;
        let record = Arc::new(Record {
            seq,
            kind,
            id_group,
            device,
            data,
        });
        self.bytes += record.size();
        self.records.push_back(record);
        while self.bytes > self.max_bytes {
            let Some(old) = self.records.pop_front() else { break };
            self.bytes -= old.size();
            self.floor = old.seq;
        }
        seq
    }

    /// Records were lost here (not recorded while nobody listened, or dropped under load):
    /// everything held is dropped and a number is spent on the gap, so that every cursor up to
    /// now overflows and no cursor can run past the loss.
    pub fn gap(&mut self) {
        if self.gapped {
            return;
        }
        self.records.clear();
        self.bytes = 0;
        self.floor = self.next;
        self.next += 1;
        self.gapped = true;
    }

    /// Up to `max` records after `cursor` (possibly none yet), read in place; `None` when
    /// records after the cursor are no longer (or were never) held: the client overflowed.
    pub fn after(&self, cursor: u64, max: usize) -> Option<impl Iterator<Item = &Arc<Record>>> {
        if cursor < self.floor || cursor > self.head() {
            return None;
        }
        let first = self.records.front().map_or(self.next, |r| r.seq);
        let skip = usize::try_from((cursor + 1).saturating_sub(first)).unwrap_or(usize::MAX);
        Some(self.records.iter().skip(skip).take(max))
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(ring: &mut Ring, text: &str) -> u64 {
        ring.push(Kind::Event, Arc::from("g"), Arc::from("d"), text.into())
    }

    fn seqs(ring: &Ring, cursor: u64, max: usize) -> Vec<u64> {
        ring.after(cursor, max).expect("no overflow").map(|r| r.seq).collect()
    }

    fn overflows(ring: &Ring, cursor: u64) -> bool {
        ring.after(cursor, 10).is_none()
    }

    #[test]
    fn cursors_read_what_follows_them_in_order() {
        let mut ring = Ring::new(1 << 20);
        assert_eq!(seqs(&ring, 0, 10), Vec::<u64>::new());
        for i in 0..5 {
            assert_eq!(push(&mut ring, "x"), i + 1);
        }
        assert_eq!(seqs(&ring, 0, 10), vec![1, 2, 3, 4, 5]);
        assert_eq!(seqs(&ring, 3, 10), vec![4, 5]);
        assert_eq!(seqs(&ring, 1, 2), vec![2, 3]);
        assert_eq!(seqs(&ring, 5, 10), Vec::<u64>::new());
        // A cursor from the future (another process's numbers) cannot resume.
        assert!(overflows(&ring, 6));
    }

    #[test]
    fn evicted_records_overflow_the_cursors_before_them() {
        let mut ring = Ring::new(3 * (OVERHEAD + 1));
        for _ in 0..5 {
            push(&mut ring, "x");
        }
        assert!(ring.bytes() <= 3 * (OVERHEAD + 1));
        assert!(overflows(&ring, 1));
        assert_eq!(seqs(&ring, 2, 10), vec![3, 4, 5]);
    }

    #[test]
    fn a_gap_overflows_every_cursor_before_it_once() {
        let mut ring = Ring::new(1 << 20);
        push(&mut ring, "a");
        push(&mut ring, "b");
        ring.gap();
        ring.gap();
        assert_eq!(ring.head(), 3);
        assert!(overflows(&ring, 2));
        assert_eq!(seqs(&ring, 3, 10), Vec::<u64>::new());
        assert_eq!(push(&mut ring, "c"), 4);
        assert_eq!(seqs(&ring, 3, 10), vec![4]);
    }
}

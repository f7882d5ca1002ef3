//! One chunk of a series' points packed column-wise (docs/benchmarks.md, "Compressed chunks"):
//! the times as microseconds since the Unix epoch and the values as IEEE doubles, each column a
//! pcodec sequence, which finds the delta order, the integer or float multiplier and the bit
//! widths that suit the column (a regular 1 Hz series costs a few bits a point; a quantised
//! sensor reading about as many bits as its distinct steps need), and the data sessions as runs.
//!
//! Lossless to the bit: a value comes back with the very bits it was stored with (`-0.0`,
//! subnormals), a time to the microsecond, in the order packed.
//!
//! Layout, version 1: the version byte, the point count (LEB128), the length of the times
//! column (LEB128) and the column, the length of the values column and the column, then the
//! session runs to the end: each a run length and a session (0 for none, else the key plus one),
//! both LEB128.

use pco::ChunkConfig;
use pco::standalone::{simple_compress, simple_decompress};

use crate::database::StoreError;

/// The layout written by [`pack`].
const VERSION: u8 = 1;

/// A series' points as columns, in time order; all three the same length.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Columns {
    /// Microseconds since the Unix epoch.
    pub times_us: Vec<i64>,
    pub values: Vec<f64>,
    /// The data session of each point (GO gateways), if any.
    pub sessions: Vec<Option<i64>>,
}

impl Columns {
    /// How many points.
    pub fn len(&self) -> usize {
        self.times_us.len()
    }

    pub fn is_empty(&self) -> bool {
        self.times_us.is_empty()
    }

    /// Appends point `i` of `other`.
    pub fn push_from(&mut self, other: &Columns, i: usize) {
        self.times_us.push(other.times_us[i]);
        self.values.push(other.values[i]);
        self.sessions.push(other.sessions[i]);
    }

    /// The points `range`, as columns of their own.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Columns {
        Columns {
            times_us: self.times_us[range.clone()].to_vec(),
            values: self.values[range.clone()].to_vec(),
            sessions: self.sessions[range].to_vec(),
        }
    }

    /// Equal to the bit: `f64`'s `==` would take `-0.0` for `0.0` and refuse a NaN.
    pub fn bit_eq(&self, other: &Columns) -> bool {
        let bits = |c: &Columns| c.values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        self.times_us == other.times_us && self.sessions == other.sessions && bits(self) == bits(other)
    }
}

/// Packs `columns` into one chunk's bytes.
pub fn pack(columns: &Columns) -> Result<Vec<u8>, StoreError> {
    let n = columns.len();
    if columns.values.len() != n || columns.sessions.len() != n {
        return Err(StoreError::Decode(format!(
            "a chunk's columns differ in length: {n} times, {} values, {} sessions",
            columns.values.len(),
            columns.sessions.len()
        )));
    }
    let config = ChunkConfig::default();
    let compress = |e: pco::errors::PcoError| StoreError::Decode(format!("a chunk cannot be packed: {e}"));
    let times = simple_compress(&columns.times_us, &config).map_err(compress)?;
    // pcodec works on a float's bits, so `-0.0`, subnormals and NaN payloads come back as they
    // went in (the tests check it).
    let values = simple_compress(&columns.values, &config).map_err(compress)?;
    let mut out = Vec::with_capacity(times.len() + values.len() + 16);
    out.push(VERSION);
    put_varint(&mut out, n as u64);
    put_varint(&mut out, times.len() as u64);
    out.extend_from_slice(&times);
    put_varint(&mut out, values.len() as u64);
    out.extend_from_slice(&values);
    for (session, run) in runs(&columns.sessions) {
        put_varint(&mut out, run as u64);
        put_varint(&mut out, session.map_or(0, |key| (key as u64).wrapping_add(1)));
    }
    Ok(out)
}

/// The columns of a chunk packed by [`pack`]; a damaged or foreign chunk is an error, never a
/// panic.
pub fn unpack(bytes: &[u8]) -> Result<Columns, StoreError> {
    let bad = |why: &str| StoreError::Decode(format!("a stored chunk does not read: {why}"));
    let mut reader = Reader { bytes, at: 0 };
    if reader.byte().ok_or_else(|| bad("empty"))? != VERSION {
        return Err(bad("unknown layout"));
    }
    let n = reader.varint().ok_or_else(|| bad("no count"))?;
    let n = usize::try_from(n).map_err(|_| bad("count too large"))?;
    let times_len = reader.length().ok_or_else(|| bad("no times column"))?;
    let times = reader.take(times_len).ok_or_else(|| bad("short times column"))?;
    let values_len = reader.length().ok_or_else(|| bad("no values column"))?;
    let values = reader.take(values_len).ok_or_else(|| bad("short values column"))?;
    let decompress = |e: pco::errors::PcoError| bad(&e.to_string());
    let times_us: Vec<i64> = simple_decompress(times).map_err(decompress)?;
    let values: Vec<f64> = simple_decompress(values).map_err(decompress)?;
    if times_us.len() != n || values.len() != n {
        return Err(bad("columns of another length than the count"));
    }
    let mut sessions = Vec::with_capacity(n);
    while sessions.len() < n {
        let run = reader.length().ok_or_else(|| bad("short session runs"))?;
        let tag = reader.varint().ok_or_else(|| bad("short session runs"))?;
        if run == 0 || run > n - sessions.len() {
            return Err(bad("session runs of another length than the count"));
        }
        let session = tag.checked_sub(1).map(|key| key as i64);
        sessions.extend(std::iter::repeat_n(session, run));
    }
    if reader.at != bytes.len() {
        return Err(bad("bytes after the session runs"));
    }
    Ok(Columns {
        times_us,
        values,
        sessions,
    })
}

/// The runs of equal sessions, in order.
fn runs(sessions: &[Option<i64>]) -> Vec<(Option<i64>, usize)> {
    let mut runs: Vec<(Option<i64>, usize)> = Vec::new();
    for &session in sessions {
        match runs.last_mut() {
            Some((last, run)) if *last == session => *run += 1,
            _ => runs.push((session, 1)),
        }
    }
    runs
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A cursor over a chunk's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Option<u8> {
        let byte = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            n |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    fn length(&mut self) -> Option<usize> {
        usize::try_from(self.varint()?).ok()
    }

    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(len)?;
        let slice = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }
}

#[cfg(test)]
mod tests;

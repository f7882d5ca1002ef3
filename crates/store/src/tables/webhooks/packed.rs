//! The points of an outbox row, packed: what one ingest transaction queues for one webhook goes
//! in one row instead of one row a point, so that queueing costs the ingest writer one insert a
//! webhook, and cutting a batch reads a few rows (docs/benchmarks.md, "Webhooks").
//!
//! Layout: per point, in the order the gateways sent them, the series key, the time in
//! microseconds and the value's bits, each 8 bytes little-endian. A row is transient (removed
//! once its points are in a delivery), so plain fixed-width beats a compressed layout here.

use crate::database::StoreError;

/// Bytes a point takes.
const POINT_BYTES: usize = 24;

/// A queued point: its series, its time in microseconds, its value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PackedPoint {
    pub container_key: i64,
    pub time_us: i64,
    pub value: f64,
}

/// The bytes of `points`, in their order.
pub fn pack(points: impl ExactSizeIterator<Item = PackedPoint>) -> Vec<u8> {
    let mut out = Vec::with_capacity(points.len() * POINT_BYTES);
    for p in points {
        out.extend_from_slice(&p.container_key.to_le_bytes());
        out.extend_from_slice(&p.time_us.to_le_bytes());
        out.extend_from_slice(&p.value.to_bits().to_le_bytes());
    }
    out
}

/// The points of bytes made by [`pack`]; a damaged row is an error, never a panic.
pub fn unpack(bytes: &[u8]) -> Result<Vec<PackedPoint>, StoreError> {
    if !bytes.len().is_multiple_of(POINT_BYTES) {
        return Err(StoreError::Decode(format!(
            "a packed outbox row of {} bytes is not whole points",
            bytes.len()
        )));
    }
    let word = |b: &[u8]| i64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
    Ok(bytes
        .chunks_exact(POINT_BYTES)
        .map(|p| PackedPoint {
            container_key: word(&p[0..8]),
            time_us: word(&p[8..16]),
            value: f64::from_bits(word(&p[16..24]) as u64),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_come_back_to_the_bit_in_order() {
        let points = [
            PackedPoint {
                container_key: 7,
                time_us: 1_800_000_000_123_456,
                value: -0.0,
            },
            PackedPoint {
                container_key: i64::MAX,
                time_us: -1,
                value: 5e-324,
            },
            PackedPoint {
                container_key: 1,
                time_us: 0,
                value: 0.1 + 0.2,
            },
        ];
        let back = unpack(&pack(points.iter().copied())).unwrap();
        assert_eq!(back.len(), 3);
        for (a, b) in points.iter().zip(&back) {
            assert_eq!(
                (a.container_key, a.time_us, a.value.to_bits()),
                (b.container_key, b.time_us, b.value.to_bits())
            );
        }
        assert!(unpack(&[0; 23]).is_err());
        assert!(unpack(&[]).unwrap().is_empty());
    }
}

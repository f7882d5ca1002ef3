//! Where a series' points are cut into chunks, and how two runs of points are merged.

use std::ops::Range;

use super::codec::Columns;
use super::{DAY_US, MAX_POINTS};

/// The chunks `points` (in time order) are cut into: a new chunk at every UTC day, at every
/// change of data session (so that a chunk belongs to one session, found by its index) and
/// after [`MAX_POINTS`] points.
pub(super) fn cut(points: &Columns) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..points.len() {
        let same_day = points.times_us[i].div_euclid(DAY_US) == points.times_us[start].div_euclid(DAY_US);
        let same_session = points.sessions[i] == points.sessions[start];
        if !same_day || !same_session || i - start >= MAX_POINTS {
            out.push(start..i);
            start = i;
        }
    }
    if !points.is_empty() {
        out.push(start..points.len());
    }
    out
}

/// `older` and `newer` (each in time order) as one run in time order; a time in both is kept
/// once, from `older` (a chunk's point, stored first, wins over a row).
pub(super) fn merge(older: &Columns, newer: &Columns) -> Columns {
    let mut out = Columns::default();
    let (mut i, mut j) = (0, 0);
    while i < older.len() || j < newer.len() {
        let take_older = j >= newer.len() || (i < older.len() && older.times_us[i] <= newer.times_us[j]);
        if take_older {
            if j < newer.len() && newer.times_us[j] == older.times_us[i] {
                j += 1;
            }
            out.push_from(older, i);
            i += 1;
        } else {
            out.push_from(newer, j);
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(times: &[i64], sessions: &[Option<i64>]) -> Columns {
        Columns {
            times_us: times.to_vec(),
            values: times.iter().map(|&t| t as f64).collect(),
            sessions: sessions.to_vec(),
        }
    }

    #[test]
    fn chunks_end_at_a_day_a_session_and_the_size_cap() {
        let day = DAY_US;
        let p = points(
            &[day - 2, day - 1, day, day + 1, day + 2],
            &[None, None, None, Some(4), Some(4)],
        );
        assert_eq!(cut(&p), vec![0..2, 2..3, 3..5]);
        let many: Vec<i64> = (0..(MAX_POINTS as i64 * 2 + 1)).collect();
        let p = points(&many, &vec![None; many.len()]);
        assert_eq!(
            cut(&p),
            vec![0..MAX_POINTS, MAX_POINTS..2 * MAX_POINTS, 2 * MAX_POINTS..many.len()]
        );
        assert!(cut(&Columns::default()).is_empty());
    }

    #[test]
    fn a_merge_keeps_time_order_and_one_point_a_time() {
        let older = points(&[1, 3, 5], &[None; 3]);
        let mut newer = points(&[2, 3, 6], &[None; 3]);
        newer.values[1] = -1.0;
        let merged = merge(&older, &newer);
        assert_eq!(merged.times_us, vec![1, 2, 3, 5, 6]);
        // The time in both keeps the older run's value.
        assert_eq!(merged.values[2], 3.0);
    }
}

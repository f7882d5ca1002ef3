//! `chunks::Ordered` on a real store: the points of many series come back oldest first (ties by
//! series), each exactly once, whether packed or still rows, in batches that stay near the size
//! asked for also when one second holds far more points than a batch (the window narrows below
//! a second before anything is decoded) and across long gaps.

use std::collections::BTreeSet;

use devicecloud_store::chunks::{Ordered, Point as Streamed, Range, pack_closed};
use devicecloud_store::ingest::{self, Point};
mod common;
use common::{series, store};

const T0: i64 = 1_800_000_000;
const MICROS: i64 = 1_000_000;

fn point(container_key: i64, us: i64, value: f64) -> Point {
    Point {
        container_key,
        seconds: us.div_euclid(MICROS),
        microseconds: us.rem_euclid(MICROS),
        value,
        session_key: None,
    }
}

/// Panics, briefly, unless `got` is `expected`.
fn same(got: &[(i64, i64, u64)], expected: &[(i64, i64, u64)], what: &str) {
    let first = got.iter().zip(expected).position(|(g, e)| g != e);
    assert!(
        got.len() == expected.len() && first.is_none(),
        "{what}: {} points read, {} expected; first difference at {first:?}",
        got.len(),
        expected.len()
    );
}

/// Every batch of `ordered`, checking each against `batch`'s bound.
async fn drain(mut ordered: Ordered, batch: usize) -> Vec<Streamed> {
    let mut out = Vec::new();
    while let Some(points) = ordered.next_batch().await.unwrap() {
        assert!(!points.is_empty());
        assert!(
            points.len() <= 2 * batch + 2,
            "a batch of {} points for batches of {batch}",
            points.len()
        );
        out.extend(points);
    }
    out
}

#[tokio::test]
async fn many_points_in_one_second_come_in_bounded_batches_oldest_first() {
    let db = store("ordered").await;
    let (_, _, a) = series(&db, "ORDERED-1", "CORE", 1).await;
    let (_, _, b) = series(&db, "ORDERED-2", "CORE", 2).await;
    // 40,000 points of two series inside one second (a microsecond apart, the two series
    // interleaved, some at the very same microsecond), then one point an hour later, then one
    // a year later.
    let mut points = Vec::new();
    for i in 0..20_000 {
        points.push(point(a, T0 * MICROS + 2 * i, i as f64));
        points.push(point(b, T0 * MICROS + 2 * i + (i % 2), -(i as f64) - 1.0));
    }
    points.push(point(a, (T0 + 3_600) * MICROS, 0.5));
    points.push(point(b, (T0 + 366 * 86_400) * MICROS + 7, 0.25));
    for part in points.chunks(5_000) {
        ingest::write(&db, part, &[]).await.unwrap();
    }
    let mut expected: Vec<(i64, i64, u64)> = points
        .iter()
        .map(|p| (p.seconds * MICROS + p.microseconds, p.container_key, p.value.to_bits()))
        .collect();
    expected.sort_unstable();
    let range = Range {
        from_us: T0 * MICROS,
        to_us: (T0 + 367 * 86_400) * MICROS,
    };
    let read = |batch| Ordered::new(db.db.clone(), &[a, b], range, None, batch);
    let got = |points: Vec<Streamed>| -> Vec<(i64, i64, u64)> {
        points.iter().map(|p| (p.time_us, p.key, p.value.to_bits())).collect()
    };

    // As rows.
    same(&got(drain(read(1_000), 1_000).await), &expected, "read(1_000)");
    // Half packed (the second's points are; the later two are rows), then all packed.
    pack_closed(&db, T0 + 1, usize::MAX).await.unwrap();
    same(&got(drain(read(1_000), 1_000).await), &expected, "read(1_000)");
    pack_closed(&db, T0 + 400 * 86_400, usize::MAX).await.unwrap();
    same(&got(drain(read(777), 777).await), &expected, "read(777)");
    // One large batch holds everything of the second.
    same(&got(drain(read(100_000), 100_000).await), &expected, "read(100_000)");
    // A range that cuts the second: only what it holds.
    let cut = Range {
        from_us: T0 * MICROS + 10_001,
        to_us: T0 * MICROS + 20_000,
    };
    let inside: Vec<_> = expected.iter().copied().filter(|p| cut.contains(p.0)).collect();
    let ordered = Ordered::new(db.db.clone(), &[a, b], cut, None, 500);
    same(&got(drain(ordered, 500).await), &inside, "a cut second");
    // Series not asked for are not read.
    let only_b: Vec<_> = expected.iter().copied().filter(|p| p.1 == b).collect();
    let ordered = Ordered::new(db.db.clone(), &[b], range, None, 1_000);
    same(&got(drain(ordered, 1_000).await), &only_b, "one series");
    let keys: BTreeSet<i64> = got(drain(read(1_000), 1_000).await).iter().map(|p| p.1).collect();
    assert_eq!(keys, BTreeSet::from([a, b]));
    db.close().await;
}

use proptest::prelude::*;

use super::*;

fn columns(points: &[(i64, u64, Option<i64>)]) -> Columns {
    Columns {
        times_us: points.iter().map(|p| p.0).collect(),
        values: points.iter().map(|p| f64::from_bits(p.1)).collect(),
        sessions: points.iter().map(|p| p.2).collect(),
    }
}

#[test]
fn an_empty_chunk_reads_back_empty() {
    let packed = pack(&Columns::default()).unwrap();
    assert!(unpack(&packed).unwrap().is_empty());
}

#[test]
fn awkward_values_keep_their_bits() {
    let awkward = [
        0.0,
        -0.0,
        f64::MIN_POSITIVE / 2.0,
        -f64::MAX,
        1e-300,
        0.1 + 0.2,
        f64::NAN,
    ];
    let points: Vec<(i64, u64, Option<i64>)> = awkward
        .iter()
        .enumerate()
        .map(|(i, v)| (1_700_000_000_000_000 + i as i64, v.to_bits(), None))
        .collect();
    let c = columns(&points);
    assert!(unpack(&pack(&c).unwrap()).unwrap().bit_eq(&c));
}

#[test]
fn a_regular_series_takes_well_under_a_byte_a_point() {
    // An hour at 1 Hz, a value rising steadily: what the ingest benchmark sends.
    let c = Columns {
        times_us: (0..3600).map(|i| (1_700_000_000 + i) * 1_000_000).collect(),
        values: (0..3600).map(|i| (1_700_000_000 + i) as f64 * 0.5 + 3.0).collect(),
        sessions: vec![Some(42); 3600],
    };
    let packed = pack(&c).unwrap();
    assert!(packed.len() < 3600 / 4, "{} bytes", packed.len());
    assert!(unpack(&packed).unwrap().bit_eq(&c));
}

#[test]
fn columns_of_other_lengths_are_refused() {
    let mut c = columns(&[(1, 0, None), (2, 0, None)]);
    c.values.pop();
    assert!(pack(&c).is_err());
}

proptest! {
    #[test]
    fn any_points_come_back_to_the_bit(points in prop::collection::vec(
        (any::<i64>(), any::<u64>(), prop_oneof![Just(None), (0i64..4).prop_map(Some), any::<i64>().prop_map(Some)]),
        0..300,
    )) {
        let c = columns(&points);
        let back = unpack(&pack(&c).unwrap()).unwrap();
        prop_assert!(back.bit_eq(&c));
    }

    #[test]
    fn a_damaged_chunk_is_an_error_never_a_panic(
        points in prop::collection::vec((0i64..1_000_000, any::<u64>(), prop_oneof![Just(None), Just(Some(7i64))]), 1..50),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let packed = pack(&columns(&points)).unwrap();
        let _ = unpack(&packed[..cut.index(packed.len())]);
        let mut flipped = packed.clone();
        let at = flip.index(flipped.len());
        flipped[at] ^= 1 << bit;
        let _ = unpack(&flipped);
    }
}

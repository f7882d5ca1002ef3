//! A group commit in slices (`ingest::write_slices`): one transaction while no other writer
//! waits, cut after a slice when one does; a resend inside any slice stores every point once.

mod common;

use std::time::{Duration, Instant};

use devicecloud_store::devices;
use devicecloud_store::groups::{self, NewGroup};
use devicecloud_store::ingest::{self, Batch, Point};
use devicecloud_store::webhooks::Routes;

fn point(key: i64, s: i64) -> Point {
    Point {
        container_key: key,
        seconds: 1_700_000_000 + s,
        microseconds: 0,
        value: s as f64,
        session_key: None,
    }
}

#[tokio::test]
async fn slices_with_a_resend_store_every_point_once_with_rollups_that_agree() {
    let store = common::store("slices_resend").await;
    let (_, _, key) = common::series(&store, "SLICES", "CORE", 1).await;
    // An earlier message stored 100..110; the second slice sends them again.
    let earlier: Vec<Point> = (100..110).map(|s| point(key, s)).collect();
    ingest::write(&store, &earlier, &[]).await.unwrap();
    let slices = [0..100, 100..200, 200..300]
        .into_iter()
        .map(|range| Batch::new(range.map(|s| point(key, s)).collect(), vec![], store.backend()))
        .collect();
    let routed = ingest::write_slices(&store, slices, &Routes::new(Duration::from_secs(5)))
        .await
        .unwrap();

    assert_eq!(routed.written.inserted, 290);
    assert_eq!(routed.written.duplicates, 10);
    let fresh: Vec<i64> = routed.fresh.iter().map(|p| p.seconds - 1_700_000_000).collect();
    let expected: Vec<i64> = (0..100).chain(110..300).collect();
    assert_eq!(fresh, expected, "the new points, in the order the slices sent them");
    assert_eq!(ingest::series_points(&store, key).await.unwrap().len(), 300);
    assert_eq!(ingest::rollup_counts(&store, key).await.unwrap(), (300, 300, 300));
}

#[tokio::test]
async fn a_writer_that_comes_during_a_sliced_commit_is_served_before_it_ends() {
    let store = common::store("slices_turns").await;
    let (_, _, key) = common::series(&store, "TURNS", "CORE", 1).await;
    let slices: Vec<Batch> = (0..40)
        .map(|n| {
            let points = (n * 5_000..(n + 1) * 5_000).map(|s| point(key, s)).collect();
            Batch::new(points, vec![], store.backend())
        })
        .collect();
    let db = store.db.clone();
    let sliced = tokio::spawn(async move {
        ingest::write_slices(&db, slices, &Routes::new(Duration::from_secs(5)))
            .await
            .unwrap();
        Instant::now()
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let group = NewGroup {
        label: "meanwhile",
        r#type: "1",
        subtype: "",
        id_country: None,
    };
    groups::create(&store, &group, 0).await.unwrap();
    let small = Instant::now();
    let sliced = sliced.await.unwrap();
    assert!(small < sliced, "the small write waited for the whole commit");
    assert_eq!(
        ingest::rollup_counts(&store, key).await.unwrap(),
        (200_000, 200_000, 200_000)
    );
}

/// Two group commits writing the same two series in opposite orders at once (one gateway's
/// messages committed by two nodes around a take-over) both succeed: on PostgreSQL each
/// transaction locks its series in key order before writing, so neither can hold one series'
/// rows while waiting for the other's (a deadlock, which failed one of them). On SQLite they
/// take turns.
#[tokio::test]
async fn group_commits_writing_series_in_opposite_orders_both_succeed() {
    let store = common::store("slices_opposite").await;
    let (_, device_a, a) = common::series(&store, "OPPOSITE-A", "CORE", 1).await;
    let (_, device_b, b) = common::series(&store, "OPPOSITE-B", "CORE", 1).await;
    let slice = |key: i64, device: &str, seconds: std::ops::Range<i64>| {
        let points = seconds.clone().map(|s| point(key, s)).collect();
        Batch::new(
            points,
            vec![(device.to_string(), 1_700_000_000 + seconds.end)],
            store.backend(),
        )
    };
    let routes = Routes::new(Duration::from_secs(5));
    let rounds = 20;
    for round in 0..rounds {
        // The same minute for both commits, so both update the same rollup rows of each series.
        let (first, second) = (round * 60..round * 60 + 10, round * 60 + 30..round * 60 + 40);
        let forward = vec![slice(a, &device_a, first.clone()), slice(b, &device_b, first)];
        let backward = vec![slice(b, &device_b, second.clone()), slice(a, &device_a, second)];
        let (one, two) = tokio::join!(
            ingest::write_slices(&store, forward, &routes),
            ingest::write_slices(&store, backward, &routes)
        );
        one.unwrap();
        two.unwrap();
    }
    for key in [a, b] {
        let stored = (rounds * 20) as usize;
        assert_eq!(ingest::series_points(&store, key).await.unwrap().len(), stored);
        assert_eq!(ingest::rollup_counts(&store, key).await.unwrap().0, stored as i64);
    }
}

/// A group commit touching two gateways' devices in one order and a departure of both at once
/// both succeed: on PostgreSQL both lock the devices in key order first (a departure of many
/// gateways deadlocked with the ingest writers before).
#[tokio::test]
async fn a_group_commit_and_a_departure_of_the_same_devices_both_succeed() {
    let store = common::store("slices_departure").await;
    let (_, device_a, a) = common::series(&store, "DEPART-A", "CORE", 1).await;
    let (_, device_b, b) = common::series(&store, "DEPART-B", "CORE", 1).await;
    let routes = Routes::new(Duration::from_secs(5));
    let rounds = 50;
    for round in 0..rounds {
        let seconds = round * 60..round * 60 + 10;
        // The device last in key order first: the departure locks the other way round.
        let mut pairs = [(a, &device_a), (b, &device_b)];
        pairs.sort_by(|x, y| y.1.cmp(x.1));
        let slices = pairs
            .into_iter()
            .map(|(key, device)| {
                let points = seconds.clone().map(|s| point(key, s)).collect();
                Batch::new(
                    points,
                    vec![(device.clone(), 1_700_000_000 + seconds.end)],
                    store.backend(),
                )
            })
            .collect();
        let ids = [device_a.as_str(), device_b.as_str()];
        let (written, departed) = tokio::join!(
            ingest::write_slices(&store, slices, &routes),
            devices::disconnected(&store, &ids, "node", round, &|_| true)
        );
        written.unwrap();
        assert_eq!(departed.unwrap(), 2);
    }
    for key in [a, b] {
        assert_eq!(
            ingest::series_points(&store, key).await.unwrap().len(),
            (rounds * 10) as usize
        );
    }
}

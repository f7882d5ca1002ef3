//! A group commit in slices (`ingest::write_slices`): one transaction while no other writer
//! waits, cut after a slice when one does; a resend inside any slice stores every point once.

mod common;

use std::time::{Duration, Instant};

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

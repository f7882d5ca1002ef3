//! `chart_series::device_points` on a real SQLite store (and PostgreSQL with
//! `DEVICECLOUD_TEST_DATABASE_URL`): points merged per pixel column keep every extreme and
//! average the values, at the resolution the rule gives the interval.

use devicecloud_store::chart_series::{self, Columns};
use devicecloud_store::downsampled::Resolution;
use devicecloud_store::ingest::{self, Point};
mod common;
use common::{series, store};

#[tokio::test]
async fn points_merge_per_pixel_column_keeping_the_extremes() {
    let db = store("chart").await;
    let (id_group, device, key) = series(&db, "CHART-1", "CORE", 7).await;
    // One point a second for 1,000 s after `from`, cycling 0..9: 100 columns of 10 seconds.
    let from = 1_800_000_000;
    let points: Vec<Point> = (1..=1000)
        .map(|i| Point {
            container_key: key,
            seconds: from + i,
            microseconds: 0,
            value: f64::from((i % 10) as i32),
            session_key: None,
        })
        .collect();
    ingest::write(&db, &points, &[]).await.unwrap();
    let columns = Columns {
        from,
        to: from + 1000,
        count: 100,
    };
    let raw = chart_series::device_points(&db, &id_group, &device, columns, Resolution::Raw)
        .await
        .unwrap();
    assert_eq!(raw.len(), 100);
    assert!(
        raw.iter().all(|p| p.datatype == 7 && p.min == 0.0 && p.max == 9.0),
        "{:?}",
        raw[0]
    );
    assert!(raw.iter().all(|p| (p.avg - 4.5).abs() < 1e-9), "{:?}", raw[0]);
    // Column middles, ascending; the point at `to` itself is in the last column.
    assert_eq!(raw[0].t, (from as f64) + 5.0);
    assert_eq!(raw[99].t, (from as f64) + 995.0);
    // The same interval from minute rollups: the average is weighted by the points counted.
    let minutes = chart_series::device_points(&db, &id_group, &device, columns, Resolution::Minute)
        .await
        .unwrap();
    let total: f64 = minutes.iter().map(|p| p.avg).sum();
    assert!(!minutes.is_empty() && minutes.iter().all(|p| p.min == 0.0 && p.max == 9.0) && total > 0.0);
    // Another device of the group draws nothing of this one.
    let none = chart_series::device_points(&db, &id_group, "someone-else", columns, Resolution::Raw)
        .await
        .unwrap();
    assert!(none.is_empty());
    db.close().await;
}

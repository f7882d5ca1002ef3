//! The one task that turns hand-overs into records: in the order they were handed over (the
//! commit order), each record rendered once and numbered as it enters the replay buffer. What
//! this node commits is also forwarded to the other nodes while one of them records
//! (`cluster`); what they forward enters the buffer here in the order it arrives.
//!
//! A point carries only its series key; the series' fields (group, device, datatype) are read
//! once per series and kept, as the group of a series never changes.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use devicecloud_store::Db;
use devicecloud_store::ingest::Point;
use devicecloud_store::series::{self, Series};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::cluster::Forward;
use super::ring::Kind;
use super::{Item, LiveFeed, Rendered};
use crate::event_catalogue::event_fields;

/// How often the task looks whether recording lapsed, to free the buffer.
const LAPSE_CHECK: Duration = Duration::from_secs(5);

/// Most series kept; past it the map starts over (a series is then read once more).
const MAX_SERIES: usize = 1_000_000;

/// A known series with its group and device, shared by every record of it.
struct Known {
    series: Series,
    group: Arc<str>,
    device: Arc<str>,
}

/// Series by key.
type KnownSeries = crate::key_hash::KeyMap<Known>;

pub(super) async fn run(
    feed: Arc<LiveFeed>,
    db: Db,
    mut items: mpsc::UnboundedReceiver<Item>,
    mut forward: Option<Forward>,
    shutdown: CancellationToken,
) {
    let mut known = KnownSeries::default();
    let mut lapse = tokio::time::interval(LAPSE_CHECK);
    loop {
        let item = tokio::select! {
            item = items.recv() => match item {
                Some(item) => item,
                None => return,
            },
            _ = lapse.tick() => {
                feed.settle_lapse(&mut feed.ring());
                continue;
            }
            _ = shutdown.cancelled() => return,
        };
        feed.queued.fetch_sub(1, Ordering::SeqCst);
        // What this node committed goes to the other nodes first, whether it records or not
        // (what they forwarded is theirs to send).
        let local = matches!(
            item,
            Item::Points(_) | Item::Events(_) | Item::Commands(_) | Item::Records(_) | Item::Gap
        );
        let mut forward = forward.as_mut().filter(|_| local && feed.forwarding());
        let rendered = match item {
            Item::Points(points) | Item::RemotePoints(points) => {
                if let Some(forward) = forward.as_mut() {
                    forward.points(&points);
                }
                if !feed.recording() {
                    continue;
                }
                match points_of(&db, &mut known, &points).await {
                    Some(rendered) => rendered,
                    None => {
                        feed.ring().gap();
                        continue;
                    }
                }
            }
            Item::Events(rows) => {
                let rendered: Vec<Rendered> = rows
                    .iter()
                    .map(|row| {
                        let text = serde_json::Value::Object(event_fields(row)).to_string();
                        let (group, device) = (Arc::from(row.id_group.as_str()), Arc::from(row.source_device.as_str()));
                        (Kind::Event, group, device, text.into_boxed_str())
                    })
                    .collect();
                if let Some(forward) = forward.as_mut() {
                    forward.records(&rendered);
                }
                rendered
            }
            Item::Commands(outcomes) => {
                let rendered: Vec<Rendered> = outcomes
                    .iter()
                    .map(|c| {
                        let (group, device) =
                            (Arc::from(c.id_group.as_str()), Arc::from(c.id_physical_device.as_str()));
                        (Kind::Command, group, device, json(c))
                    })
                    .collect();
                if let Some(forward) = forward.as_mut() {
                    forward.records(&rendered);
                }
                rendered
            }
            Item::Records(rendered) => {
                if let Some(forward) = forward.as_mut() {
                    forward.records(&rendered);
                }
                rendered
            }
            Item::RemoteRecords(rendered) => rendered,
            Item::Gap | Item::RemoteGap => {
                if let Some(forward) = forward.as_mut() {
                    forward.gap();
                }
                feed.ring().gap();
                continue;
            }
        };
        if !feed.recording() {
            continue;
        }
        let head = {
            let mut ring = feed.ring();
            for (kind, group, device, data) in rendered {
                ring.push(kind, group, device, data);
            }
            ring.head()
        };
        feed.head.send_replace(head);
    }
}

fn json<T: serde::Serialize>(value: &T) -> Box<str> {
    serde_json::to_string(value).unwrap_or_default().into_boxed_str()
}

/// The `data` records of points, with their series read where not known yet; `None` when the
/// series cannot be read (the points are then lost to the stream, as a gap).
async fn points_of(db: &Db, known: &mut KnownSeries, points: &[Point]) -> Option<Vec<Rendered>> {
    let mut missing: Vec<i64> = points
        .iter()
        .map(|p| p.container_key)
        .filter(|k| !known.contains_key(k))
        .collect();
    if !missing.is_empty() {
        if known.len() + missing.len() > MAX_SERIES {
            known.clear();
            missing = points.iter().map(|p| p.container_key).collect();
        }
        missing.sort_unstable();
        missing.dedup();
        match series::of_keys(db, &missing).await {
            Ok(found) => {
                for series in found {
                    let group = Arc::from(series.id_group.as_str());
                    let device = Arc::from(series.source_device.as_str());
                    let key = series.container_key;
                    known.insert(key, Known { series, group, device });
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "live stream: cannot read the series of committed points");
                return None;
            }
        }
    }
    let mut rendered = Vec::with_capacity(points.len());
    for p in points {
        // A series that does not exist was deleted after the commit: nothing to show.
        if let Some(k) = known.get(&p.container_key) {
            // The record's own serialisation, which the `data` endpoint renders too.
            let data = json(&k.series.point(p));
            rendered.push((Kind::Measurement, Arc::clone(&k.group), Arc::clone(&k.device), data));
        }
    }
    Some(rendered)
}

//! Alarms in the store (migration 0020): one open alarm per (rule, device, datatype) whoever
//! raises it, matches added to it, clears with their events, acknowledgement once, a rule's
//! deletion clearing its alarms, and the point before a point for the engine's first look.

mod common;

use devicecloud_query::PageRequest;
use devicecloud_store::alarm_rules::{self, RuleRow};
use devicecloud_store::alarms::{self, Change, Raise};
use devicecloud_store::groups::GroupScope;
use devicecloud_store::ingest::{self, Point};
use devicecloud_store::webhooks::Routes;
use devicecloud_store::{ListArgs, chunks};

fn rule(id: &str, group: &str) -> RuleRow {
    RuleRow {
        id_alarm_rule: id.into(),
        id_group: group.into(),
        label: "Hot".into(),
        severity: "major".into(),
        condition: Some("value > 30.0".into()),
        clear_condition: None,
        inactivity_s: None,
        datatype: Some(12),
        source_device: None,
        for_s: 0,
        is_active: 1,
        created_at: 1,
        updated_at: 1,
        created_by: None,
    }
}

fn raise(group: &str, device: &str, value: f64, count: i64, add_to_open: bool) -> Raise {
    Raise {
        id_alarm_rule: "r1".into(),
        label: "Hot".into(),
        id_group: group.into(),
        source_device: device.into(),
        datatype: Some(12),
        severity: "major".into(),
        value: Some(value),
        count,
        at: 100,
        add_to_open,
    }
}

fn all() -> ListArgs<'static> {
    ListArgs {
        scope: GroupScope::All,
        filter: None,
        sort: None,
        page: PageRequest {
            page: 1,
            per_page: 20,
            default_per_page: 20,
        },
        count_only: false,
    }
}

#[tokio::test]
async fn one_alarm_is_open_per_rule_device_and_datatype() {
    let store = common::store("alarms").await;
    let db = &store.db;
    let (group, device, _) = common::series(db, "AL-S1", "PLUS", 12).await;
    let routes = Routes::new(std::time::Duration::from_secs(1));
    alarm_rules::create(db, &rule("r1", &group), 10).await.unwrap().unwrap();

    // Two raises (two nodes at once): one alarm, the second's match added.
    let first = alarms::apply(
        db,
        &routes,
        &[Change::Raise(raise(&group, &device, 31.0, 1, true))],
        100,
    )
    .await
    .unwrap();
    assert_eq!(first.events.len(), 1);
    assert_eq!(first.events[0].event_type, alarms::RAISED);
    let second = alarms::apply(
        db,
        &routes,
        &[Change::Raise(raise(&group, &device, 32.0, 1, true))],
        101,
    )
    .await
    .unwrap();
    assert!(second.events.is_empty());
    assert_eq!((second.alarms[0].count, second.alarms[0].value), (2, Some(32.0)));
    // An inactivity-style raise leaves an open alarm be.
    let left = alarms::apply(
        db,
        &routes,
        &[Change::Raise(raise(&group, &device, 0.0, 1, false))],
        102,
    )
    .await
    .unwrap();
    assert!(left.alarms.is_empty() && left.events.is_empty());

    let listing = alarms::list(db, all()).await.unwrap();
    assert_eq!(listing.items.len(), 1);
    let id = listing.items[0].id_alarm.clone();

    let (acked, event) = alarms::acknowledge(db, &routes, &id, "u1", 103).await.unwrap().unwrap();
    assert_eq!(
        (acked.status.as_str(), acked.acknowledged_by.as_deref()),
        ("acknowledged", Some("u1"))
    );
    assert_eq!(event.unwrap().event_type, alarms::ACKNOWLEDGED);
    let (again, none) = alarms::acknowledge(db, &routes, &id, "u2", 104).await.unwrap().unwrap();
    assert_eq!((again.acknowledged_by.as_deref(), none), (Some("u1"), None));

    let clear = Change::Clear {
        id_alarm_rule: "r1".into(),
        source_device: device.clone(),
        datatype: Some(12),
        at: 105,
    };
    let cleared = alarms::apply(db, &routes, std::slice::from_ref(&clear), 105)
        .await
        .unwrap();
    assert_eq!(cleared.alarms[0].status, "cleared");
    assert_eq!(cleared.events[0].event_type, alarms::CLEARED);
    // Cleared twice: nothing more.
    assert!(
        alarms::apply(db, &routes, &[clear], 106)
            .await
            .unwrap()
            .alarms
            .is_empty()
    );

    // A new raise makes a new alarm; deleting the rule clears it and keeps both.
    alarms::apply(
        db,
        &routes,
        &[Change::Raise(raise(&group, &device, 40.0, 1, true))],
        107,
    )
    .await
    .unwrap();
    assert_eq!(alarms::open_of(db, &[device.as_str()]).await.unwrap().len(), 1);
    let gone = alarm_rules::delete(db, &routes, "r1", 108).await.unwrap().unwrap();
    assert_eq!((gone.alarms.len(), gone.events.len()), (1, 1));
    assert!(alarms::open_of(db, &[device.as_str()]).await.unwrap().is_empty());
    assert_eq!(alarms::list(db, all()).await.unwrap().items.len(), 2);
    assert!(alarm_rules::version(db).await.unwrap() >= 2);
}

#[tokio::test]
async fn the_point_before_a_point_is_found() {
    let store = common::store("alarms_before").await;
    let db = &store.db;
    let (_, device, key) = common::series(db, "AL-S2", "PLUS", 12).await;
    let points: Vec<Point> = [(100, 0, 1.0), (100, 500, 2.0), (200, 0, 3.0)]
        .into_iter()
        .map(|(seconds, microseconds, value)| Point {
            container_key: key,
            seconds,
            microseconds,
            value,
            session_key: None,
        })
        .collect();
    ingest::write(db, &points, &[(device, 200)]).await.unwrap();
    let before = |t| chunks::scan::point_before(db, key, t);
    assert_eq!(before(100_000_000).await.unwrap(), None);
    assert_eq!(before(100_000_501).await.unwrap(), Some((100_000_500, 2.0)));
    assert_eq!(before(300_000_000).await.unwrap(), Some((200_000_000, 3.0)));
    // A commit of the points at 100.0005 and 300 (backfill of the first): the newest stored
    // besides them is the one at 200.
    let newest = chunks::scan::newest_besides(db, key, 100_000_500, &[100_000_500, 300_000_000])
        .await
        .unwrap();
    assert_eq!(newest, Some((200_000_000, 3.0)));
    let newest = chunks::scan::newest_besides(db, key, 200_000_000, &[200_000_000])
        .await
        .unwrap();
    assert_eq!(newest, Some((100_000_500, 2.0)));
    let facts = alarms::series_facts(db, &[key]).await.unwrap();
    assert_eq!((facts[0].serial.as_str(), facts[0].datatype), ("AL-S2", 12));
}

#[tokio::test]
async fn the_last_points_of_watched_devices_are_found() {
    let store = common::store("alarms_last").await;
    let db = &store.db;
    let (group, device, key) = common::series(db, "AL-S3", "PLUS", 12).await;
    assert!(alarms::last_points(db, &group, None, None).await.unwrap().is_empty());
    let point = Point {
        container_key: key,
        seconds: 500,
        microseconds: 0,
        value: 1.0,
        session_key: None,
    };
    ingest::write(db, &[point], &[(device.clone(), 600)]).await.unwrap();
    assert_eq!(
        alarms::last_points(db, &group, None, None).await.unwrap(),
        [(device.clone(), 600)]
    );
    assert_eq!(
        alarms::last_points(db, &group, Some(12), None).await.unwrap(),
        [(device.clone(), 500)]
    );
    assert_eq!(
        alarms::last_points(db, &group, Some(12), Some(&device))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        alarms::last_points(db, &group, Some(13), None)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(alarms::open_of_rules(db, &["nope"]).await.unwrap().is_empty());
}

//! Series made in one go (`ingest::container_keys`): the new ones in one transaction, the
//! existing ones found, and a device's series limit kept.

mod common;

use devicecloud_store::ingest::{self, SeriesId};

#[tokio::test]
async fn a_message_makes_its_new_series_at_once_within_the_device_limit() {
    let store = common::store("series_at_once").await;
    let (group, device, first) = common::series(&store, "SERIES", "CORE", 1).await;
    let id = |datatype| SeriesId {
        id_group: group.clone(),
        source_device: device.clone(),
        datatype,
    };
    // Datatype 1 exists; 2 and 3 are new; the limit is 3 series, so 4 is refused.
    let wanted = [id(3), id(1), id(2), id(4)];
    let keys = ingest::container_keys(&store, &wanted, 3).await.unwrap();
    assert_eq!(keys[1], Some(first));
    let (three, two) = (keys[0].unwrap(), keys[2].unwrap());
    assert!(three != two && three != first && two != first, "{keys:?}");
    assert_eq!(keys[3], None, "over the device's limit");
    // Asked again, the same keys, one at a time or together, and nothing new is made.
    assert_eq!(ingest::container_key(&store, &id(2), 3).await.unwrap(), Some(two));
    assert_eq!(
        ingest::container_keys(&store, &wanted, 3).await.unwrap(),
        [Some(three), Some(first), Some(two), None]
    );
}

//! The event collection (`GET /api/v2/event`): events of the groups a caller may see, latest
//! first (docs/api.md, "Events").

use devicecloud_query::{AttrKind, Attribute, SortKey};

use crate::collection::{Column, ListArgs, Listing, Table, attributes, names, same_name};
use crate::database::Result;
use crate::database::db::Db;
use crate::tables::events::EventRow;

const TABLE: &str = "events";

/// The filterable and sortable attributes. `event_type` is text on the record but an integer
/// code underneath: `filter[event_type]=208` and `filter[event_type][in][]=…` compare codes.
pub const COLUMNS: [Column; 8] = [
    same_name(TABLE, "id_event", AttrKind::Integer),
    same_name(TABLE, "id_group", AttrKind::String),
    same_name(TABLE, "source_device", AttrKind::String),
    same_name(TABLE, "from_device", AttrKind::Integer),
    same_name(TABLE, "event_type", AttrKind::Integer),
    same_name(TABLE, "occurred_at", AttrKind::Integer),
    same_name(TABLE, "value", AttrKind::String),
    same_name(TABLE, "datatype", AttrKind::Integer),
];

/// The filter attributes of the event collection.
pub const ATTRIBUTES: [Attribute; 8] = attributes(&COLUMNS);
/// The sortable attributes of the event collection.
pub const SORTABLE: [&str; 8] = names(&COLUMNS);

/// The events of the groups a caller may see, latest first.
static EVENTS: Table<EventRow> = Table::new(TABLE, &COLUMNS, &[], SortKey::desc("occurred_at"), &[COLUMNS[0]]);

/// A page of the events of the groups `scope` allows; default order latest first.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<EventRow>> {
    EVENTS.scoped(db, args).await
}

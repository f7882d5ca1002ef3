//! The event collection (`GET /api/v2/event`): events of the groups a caller may see, latest
//! first (docs/api.md, "Events").

use devicecloud_query::{AttrKind, Attribute, SortKey};

use crate::Result;
use crate::collection::{Column, ListArgs, Listing, Table, attributes, names, same_name};
use crate::db::Db;

const TABLE: &str = "events";

/// A stored event.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct EventRow {
    pub id_event: i64,
    pub id_group: String,
    pub source_device: String,
    pub from_device: Option<i64>,
    pub event_type: i64,
    pub occurred_at: i64,
    pub value: String,
    pub datatype: Option<i64>,
    pub value_description: Option<String>,
}

/// `SELECT <every column of EventRow> FROM events`.
pub const SELECT: &str = "SELECT id_event, id_group, source_device, from_device, event_type, occurred_at, value, \
                          datatype, value_description FROM events";

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

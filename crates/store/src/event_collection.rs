//! The event collection (`GET /api/v2/event`): events of the groups a caller may see, latest
//! first (docs/api.md, "Events").

use devicecloud_query::{AttrKind, Attribute, SortKey};

use crate::Result;
use crate::collection::{self, Column, ListArgs, Listing, attributes, names};
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

/// The columns of a [`EventRow`], in its order: its own field names, so that the record is
/// declared once.
fn output() -> &'static [&'static str] {
    static FIELDS: std::sync::LazyLock<&[&str]> = std::sync::LazyLock::new(crate::collection::output_of::<EventRow>);
    *FIELDS
}

/// `SELECT <every column of EventRow> FROM events`.
pub const SELECT: &str = "SELECT id_event, id_group, source_device, from_device, event_type, occurred_at, value, \
                          datatype, value_description FROM events";

const fn col(attr: &'static str, kind: AttrKind) -> Column {
    Column {
        attr,
        table: TABLE,
        column: attr,
        kind,
    }
}

/// The filterable and sortable attributes. `event_type` is text on the record but an integer
/// code underneath: `filter[event_type]=208` and `filter[event_type][in][]=…` compare codes.
pub const COLUMNS: [Column; 8] = [
    col("id_event", AttrKind::Integer),
    col("id_group", AttrKind::String),
    col("source_device", AttrKind::String),
    col("from_device", AttrKind::Integer),
    col("event_type", AttrKind::Integer),
    col("occurred_at", AttrKind::Integer),
    col("value", AttrKind::String),
    col("datatype", AttrKind::Integer),
];

/// The filter attributes of the event collection.
pub const ATTRIBUTES: [Attribute; 8] = attributes(&COLUMNS);
/// The sortable attributes of the event collection.
pub const SORTABLE: [&str; 8] = names(&COLUMNS);

/// A page of the events of the groups `scope` allows; default order latest first.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<EventRow>> {
    let latest_first = SortKey {
        attr: "occurred_at",
        descending: true,
    };
    const KEY: [Column; 1] = [col("id_event", AttrKind::Integer)];
    collection::scoped_list(db, TABLE, output(), &COLUMNS, &[], args, latest_first, &KEY).await
}

//! Groups: the data containers every gateway and every record belongs to.

use devicecloud_query::SortKey;
use sea_query::{Condition, Expr, ExprTrait, Func, Query};

use devicecloud_query::{AttrKind, Attribute};

use crate::collection::{self, Column, ListArgs, Listing, Table, attributes, names};
use crate::database::Result;
use crate::database::db::{Db, values};
use crate::database::new_id;
use crate::sql::lists::in_list;

/// A stored group.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize, serde::Serialize)]
pub struct GroupRow {
    pub id_group: String,
    pub label: String,
    pub r#type: String,
    pub subtype: String,
    pub id_country: Option<String>,
    pub created_at: i64,
    pub deleted_at: Option<i64>,
}

pub use crate::sql::scope::{GroupScope, visible_groups};

/// Fields of a new group.
#[derive(Clone, Debug)]
pub struct NewGroup<'a> {
    pub label: &'a str,
    pub r#type: &'a str,
    pub subtype: &'a str,
    pub id_country: Option<&'a str>,
}

/// Changes to a group; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct GroupChanges<'a> {
    pub label: Option<&'a str>,
    pub r#type: Option<&'a str>,
    pub subtype: Option<&'a str>,
    pub id_country: Option<Option<&'a str>>,
}

const TABLE: &str = "groups";
const SELECT: &str = "SELECT id_group, label, type, subtype, id_country, created_at, deleted_at FROM groups";

/// The filterable and sortable attributes of the group collection.
pub const COLUMNS: [Column; 8] = [
    col("id", "id_group", AttrKind::String),
    col("id_group", "id_group", AttrKind::String),
    col("label", "label", AttrKind::String),
    col("type", "type", AttrKind::String),
    col("subtype", "subtype", AttrKind::String),
    col("id_country", "id_country", AttrKind::String),
    col("created_at", "created_at", AttrKind::Integer),
    col("deleted_at", "deleted_at", AttrKind::Integer),
];

/// The filter attributes of the group collection.
pub const ATTRIBUTES: [Attribute; 8] = attributes(&COLUMNS);
/// The sortable attributes of the group collection.
pub const SORTABLE: [&str; 8] = names(&COLUMNS);

const fn col(attr: &'static str, column: &'static str, kind: AttrKind) -> Column {
    collection::column(attr, TABLE, column, kind)
}

/// Creates a group and returns it.
pub async fn create(db: &Db, group: &NewGroup<'_>, now: i64) -> Result<GroupRow> {
    let id = new_id();
    db.execute(
        "INSERT INTO groups (id_group, label, type, subtype, id_country, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        values![&id, group.label, group.r#type, group.subtype, group.id_country, now],
    )
    .await?;
    Ok(GroupRow {
        id_group: id,
        label: group.label.to_string(),
        r#type: group.r#type.to_string(),
        subtype: group.subtype.to_string(),
        id_country: group.id_country.map(str::to_string),
        created_at: now,
        deleted_at: None,
    })
}

/// One group, deleted or not; visibility is the caller's business.
pub async fn get(db: &Db, id_group: &str) -> Result<Option<GroupRow>> {
    let sql = format!("{SELECT} WHERE id_group = $1");
    let row = db.row::<GroupRow>(sqlx::AssertSqlSafe(sql), values![id_group]).await?;
    Ok(row)
}

/// The groups among `ids` that exist, deleted or not, in one query (the live stream checks its
/// groups with it every second).
pub async fn get_many(db: &Db, ids: &[String]) -> Result<Vec<GroupRow>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let (marks, values) = in_list(ids);
    let sql = format!("{SELECT} WHERE id_group IN ({marks})");
    db.rows(sqlx::AssertSqlSafe(sql), values).await
}

/// The groups, oldest first.
static GROUPS: Table<GroupRow> = Table::new(TABLE, &COLUMNS, &[], SortKey::asc("created_at"), &[COLUMNS[0]]);

/// The same attributes for a normal user, read from the user's memberships where a membership
/// holds them (its group's key, creation and deletion, kept by triggers, migration 0013): the
/// count and the first page in the default order are then one range of the index
/// `memberships_visible`.
const MEMBER_COLUMNS: [Column; 8] = [
    collection::column("id", "memberships", "id_group", AttrKind::String),
    collection::column("id_group", "memberships", "id_group", AttrKind::String),
    COLUMNS[2],
    COLUMNS[3],
    COLUMNS[4],
    COLUMNS[5],
    collection::column("created_at", "memberships", "group_created_at", AttrKind::Integer),
    collection::column("deleted_at", "memberships", "group_deleted_at", AttrKind::Integer),
];

/// The groups of one normal user, oldest first.
static MEMBER_GROUPS: Table<GroupRow> = Table::new(
    TABLE,
    &MEMBER_COLUMNS,
    &[],
    SortKey::asc("created_at"),
    &[MEMBER_COLUMNS[0]],
);

/// A page of the groups `scope` allows, filtered and sorted as asked.
///
/// A normal user's groups are read from their memberships, the group joined for its other
/// fields. Without a filter their number is the user's row of `member_group_counts` (kept by
/// triggers, migration 0014); with one, the page's select is counted.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<GroupRow>> {
    let GroupScope::MemberOf(id_user) = args.scope else {
        return GROUPS.list(db, GROUPS.select(), &args).await;
    };
    let mut select = Query::select();
    select
        .columns(GROUPS.output().iter().map(|c| (TABLE, *c)))
        .from("memberships")
        .inner_join(
            TABLE,
            Expr::col((TABLE, "id_group")).equals(("memberships", "id_group")),
        )
        // `cond_where` throughout: sea-query refuses to mix it with `and_where`.
        .cond_where(
            Condition::all()
                .add(Expr::col(("memberships", "id_user")).eq(id_user))
                .add(Expr::col(("memberships", "group_deleted_at")).is_null()),
        );
    if args.filter.is_some() {
        return MEMBER_GROUPS.list(db, select, &args).await;
    }
    let count = Query::select()
        .expr(Func::coalesce([
            Expr::expr(Func::max(Expr::col("visible"))),
            Expr::val(0),
        ]))
        .from("member_group_counts")
        .and_where(Expr::col("id_user").eq(id_user))
        .to_owned();
    MEMBER_GROUPS.list_counting(db, select, count, &args).await
}

/// Applies `changes` and returns the updated group (`None` if it does not exist).
pub async fn update(db: &Db, id_group: &str, changes: &GroupChanges<'_>) -> Result<Option<GroupRow>> {
    let mut update = Query::update();
    update.table(TABLE).and_where(Expr::col("id_group").eq(id_group));
    let mut any = false;
    for (column, value) in [
        ("label", changes.label),
        ("type", changes.r#type),
        ("subtype", changes.subtype),
    ] {
        if let Some(value) = value {
            update.value(column, value);
            any = true;
        }
    }
    if let Some(country) = changes.id_country {
        update.value("id_country", country.map(str::to_string));
        any = true;
    }
    if any {
        let (sql, values) = db.build(&update);
        db.execute(sqlx::AssertSqlSafe(sql), values).await?;
    }
    get(db, id_group).await
}

/// Marks a group deleted (`deleted_at`); its records stay for administrators.
pub async fn soft_delete(db: &Db, id_group: &str, now: i64) -> Result<bool> {
    let done = db
        .execute(
            "UPDATE groups SET deleted_at = $1 WHERE id_group = $2 AND deleted_at IS NULL",
            values![now, id_group],
        )
        .await?;
    Ok(done > 0)
}

//! Alarm rules (docs/api.md, "Alarms"): a group's conditions over its points, stored as written
//! (the CEL text, compiled by whoever reads it), and the counter every node watches to read them
//! again after a change made through any node (migration 0020).
//!
//! Disabling or deleting a rule clears its open alarms in the same transaction, with their events
//! 232: no alarm is left open that nothing could clear.

use devicecloud_query::{AttrKind, Attribute, SortKey};

use crate::collection::{Column, ListArgs, Listing, Table, attributes, names, same_name};
use crate::database::Result;
use crate::database::db::{Db, Tx, values};
use crate::tables::alarms::{self, AlarmRow};
use crate::tables::events::EventRow;
use crate::tables::webhooks::Routes;

/// A stored rule.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub struct RuleRow {
    pub id_alarm_rule: String,
    pub id_group: String,
    pub label: String,
    pub severity: String,
    /// The CEL condition; `None` for an inactivity rule.
    pub condition: Option<String>,
    /// `None`: the negation of `condition`.
    pub clear_condition: Option<String>,
    pub inactivity_s: Option<i64>,
    pub datatype: Option<i64>,
    pub source_device: Option<String>,
    pub for_s: i64,
    pub is_active: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub created_by: Option<String>,
}

const TABLE: &str = "alarm_rules";

/// The filterable and sortable attributes of the rule collection.
pub const COLUMNS: [Column; 13] = [
    same_name(TABLE, "id_alarm_rule", AttrKind::String),
    same_name(TABLE, "id_group", AttrKind::String),
    same_name(TABLE, "label", AttrKind::String),
    same_name(TABLE, "severity", AttrKind::String),
    same_name(TABLE, "condition", AttrKind::String),
    same_name(TABLE, "clear_condition", AttrKind::String),
    same_name(TABLE, "inactivity_s", AttrKind::Integer),
    same_name(TABLE, "datatype", AttrKind::Integer),
    same_name(TABLE, "source_device", AttrKind::String),
    same_name(TABLE, "for_s", AttrKind::Integer),
    same_name(TABLE, "is_active", AttrKind::Integer),
    same_name(TABLE, "created_at", AttrKind::Integer),
    same_name(TABLE, "updated_at", AttrKind::Integer),
];
/// The filter attributes of the rule collection.
pub const ATTRIBUTES: [Attribute; 13] = attributes(&COLUMNS);
/// The sortable attributes of the rule collection.
pub const SORTABLE: [&str; 13] = names(&COLUMNS);

/// The rules, oldest first.
static RULES: Table<RuleRow> = Table::new(TABLE, &COLUMNS, &[], SortKey::asc("created_at"), &[COLUMNS[0]]);

const SELECT: &str = "SELECT id_alarm_rule, id_group, label, severity, condition, clear_condition, inactivity_s, \
                      datatype, source_device, for_s, is_active, created_at, updated_at, created_by FROM alarm_rules";

/// A rule by id.
pub async fn get(db: &Db, id: &str) -> Result<Option<RuleRow>> {
    let sql = format!("{SELECT} WHERE id_alarm_rule = $1");
    db.row(sqlx::AssertSqlSafe(sql), values![id]).await
}

/// A page of the rules of the groups `args` allows.
pub async fn list(db: &Db, args: ListArgs<'_>) -> Result<Listing<RuleRow>> {
    RULES.scoped(db, args).await
}

/// Every active rule: what the alarm engine evaluates.
pub async fn active(db: &Db) -> Result<Vec<RuleRow>> {
    let sql = format!("{SELECT} WHERE is_active = 1 ORDER BY id_alarm_rule");
    db.rows(sqlx::AssertSqlSafe(sql), values![]).await
}

/// How many times any rule changed: a node reads the rules again when it moves.
pub async fn version(db: &Db) -> Result<i64> {
    let row: Option<(i64,)> = db
        .row("SELECT version FROM alarm_rule_changes WHERE id = 1", values![])
        .await?;
    Ok(row.map_or(0, |(v,)| v))
}

async fn bump(tx: &mut Tx) -> sqlx::Result<u64> {
    tx.execute(
        "UPDATE alarm_rule_changes SET version = version + 1 WHERE id = 1".to_string(),
        values![],
    )
    .await
}

/// Stores a new rule unless its group holds `per_group` rules already (`None` then).
pub async fn create(db: &Db, rule: &RuleRow, per_group: u64) -> Result<Option<RuleRow>> {
    let per_group = i64::try_from(per_group).unwrap_or(i64::MAX);
    let mut tx = Tx::begin(db).await?;
    // The group's row is held, so that two rules created at once are counted one after the other.
    tx.execute(
        "UPDATE groups SET id_group = id_group WHERE id_group = $1".to_string(),
        values![rule.id_group.as_str()],
    )
    .await?;
    let count = tx
        .scalar(
            "SELECT COUNT(*) FROM alarm_rules WHERE id_group = $1".to_string(),
            values![rule.id_group.as_str()],
        )
        .await?;
    if count >= per_group {
        tx.rollback().await?;
        return Ok(None);
    }
    tx.execute(
        "INSERT INTO alarm_rules (id_alarm_rule, id_group, label, severity, condition, clear_condition, inactivity_s, \
         datatype, source_device, for_s, is_active, created_at, updated_at, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
            .to_string(),
        values![
            rule.id_alarm_rule.as_str(),
            rule.id_group.as_str(),
            rule.label.as_str(),
            rule.severity.as_str(),
            rule.condition.as_deref(),
            rule.clear_condition.as_deref(),
            rule.inactivity_s,
            rule.datatype,
            rule.source_device.as_deref(),
            rule.for_s,
            rule.is_active,
            rule.created_at,
            rule.updated_at,
            rule.created_by.as_deref()
        ],
    )
    .await?;
    bump(&mut tx).await?;
    tx.commit().await?;
    Ok(Some(rule.clone()))
}

/// What a change or deletion of a rule cleared: the alarms and their events 232.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cleared {
    pub alarms: Vec<AlarmRow>,
    pub events: Vec<EventRow>,
}

/// Writes `rule` over `stored` (every field but the id, group and creation); a rule made
/// inactive, or whose scope changed (its datatype, its device, a condition for a silence or the
/// reverse), has its open alarms cleared at `now`: they may be of series it no longer watches.
/// `None` when the rule is gone.
pub async fn update(db: &Db, routes: &Routes, stored: &RuleRow, rule: &RuleRow, now: i64) -> Result<Option<Cleared>> {
    let scope_changed = stored.datatype != rule.datatype
        || stored.source_device != rule.source_device
        || stored.inactivity_s.is_some() != rule.inactivity_s.is_some();
    let table = routes.table(db).await?;
    let mut tx = Tx::begin(db).await?;
    let changed = tx
        .execute(
            "UPDATE alarm_rules SET label = $1, severity = $2, condition = $3, clear_condition = $4, inactivity_s = $5, \
             datatype = $6, source_device = $7, for_s = $8, is_active = $9, updated_at = $10 WHERE id_alarm_rule = $11"
                .to_string(),
            values![
                rule.label.as_str(),
                rule.severity.as_str(),
                rule.condition.as_deref(),
                rule.clear_condition.as_deref(),
                rule.inactivity_s,
                rule.datatype,
                rule.source_device.as_deref(),
                rule.for_s,
                rule.is_active,
                rule.updated_at,
                rule.id_alarm_rule.as_str()
            ],
        )
        .await?;
    if changed == 0 {
        tx.rollback().await?;
        return Ok(None);
    }
    // A changed condition counts `for_s` anew.
    tx.execute(
        "DELETE FROM alarm_holds WHERE id_alarm_rule = $1".to_string(),
        values![rule.id_alarm_rule.as_str()],
    )
    .await?;
    let cleared = if rule.is_active == 1 && !scope_changed {
        Cleared::default()
    } else {
        alarms::clear_rule_in(&mut tx, &table, &rule.id_alarm_rule, now).await?
    };
    bump(&mut tx).await?;
    tx.commit().await?;
    Ok(Some(cleared))
}

/// Deletes a rule, clearing its open alarms at `now` (the alarms stay, as history). `None` when
/// the rule is gone.
pub async fn delete(db: &Db, routes: &Routes, id: &str, now: i64) -> Result<Option<Cleared>> {
    let table = routes.table(db).await?;
    let mut tx = Tx::begin(db).await?;
    let deleted = tx
        .execute(
            "DELETE FROM alarm_rules WHERE id_alarm_rule = $1".to_string(),
            values![id],
        )
        .await?;
    if deleted == 0 {
        tx.rollback().await?;
        return Ok(None);
    }
    tx.execute(
        "DELETE FROM alarm_holds WHERE id_alarm_rule = $1".to_string(),
        values![id],
    )
    .await?;
    let cleared = alarms::clear_rule_in(&mut tx, &table, id, now).await?;
    bump(&mut tx).await?;
    tx.commit().await?;
    Ok(Some(cleared))
}

//! Alarm rules and alarms (docs/api.md, "Alarms"): a manager writes a group's rules, whoever sees
//! the group reads them and its alarms, an operator acknowledges an alarm. A rule's condition is
//! compiled when it is saved: one that does not compile, or does not give a boolean, is refused
//! with its position and never reaches the engine.

use devicecloud_engine::alarms::condition::{Condition, ConditionError};
use devicecloud_engine::auth::Role;
use devicecloud_store::alarm_rules::{self, Cleared, RuleRow};
use devicecloud_store::alarms::{self, AlarmRow};
use devicecloud_store::{devices, new_id, unix_now};

use super::validate::Fields;
use super::{Input, Result, ServiceError, access};
use crate::caller::Caller;
use crate::state::AppState;

/// The severities, worst first.
pub const SEVERITIES: [&str; 4] = ["critical", "major", "minor", "warning"];
/// Longest condition text.
pub const CONDITION_MAX_CHARS: usize = 4096;
/// Longest `inactivity_s` and `for_s`: a year.
pub const SECONDS_MAX: i64 = 31_536_000;

/// Checks a condition's text as a rule's `field` would be: the 422 message naming its position.
pub fn check_condition(text: &str) -> std::result::Result<(), String> {
    Condition::compile(text).map(|_| ()).map_err(|e| message(&e))
}

fn message(e: &ConditionError) -> String {
    format!(
        "The condition does not compile at line {}, column {}: {}.",
        e.line, e.column, e.message
    )
}

/// The rule `stored` (or a new one in the group the input names) with the input's fields laid
/// over it, checked whole.
async fn read_rule(state: &AppState, caller: &Caller, input: &Input, stored: Option<&RuleRow>) -> Result<RuleRow> {
    let creating = stored.is_none();
    let mut f = Fields::new(input);
    let id_group = f.fixed("id_group", creating, 64).map(str::to_string);
    let label = f.string("label", creating, 255).map(str::to_string);
    let severity = f.string("severity", creating, 16).map(str::to_string);
    if severity.as_deref().is_some_and(|s| !SEVERITIES.contains(&s)) {
        f.error("severity", "Severity is invalid: critical, major, minor or warning.");
    }
    // A field given as null clears it; absent, it stays as stored.
    let given = |name: &str| input.contains_key(name);
    let condition = f.string("condition", false, CONDITION_MAX_CHARS).map(str::to_string);
    let clear_condition = f
        .string("clear_condition", false, CONDITION_MAX_CHARS)
        .map(str::to_string);
    let inactivity_s = f.integer("inactivity_s", false, 1, SECONDS_MAX);
    let datatype = f.integer("datatype", false, 0, i64::from(i32::MAX));
    let source_device = f.string("source_device", false, 64).map(str::to_string);
    let for_s = f.integer("for_s", false, 0, SECONDS_MAX);
    let is_active = f.boolean("is_active");
    f.finish()?;
    let mut rule = match stored {
        Some(stored) => stored.clone(),
        None => RuleRow {
            id_alarm_rule: new_id(),
            id_group: id_group.clone().unwrap_or_default(),
            label: String::new(),
            severity: String::new(),
            condition: None,
            clear_condition: None,
            inactivity_s: None,
            datatype: None,
            source_device: None,
            for_s: 0,
            is_active: 1,
            created_at: unix_now(),
            updated_at: unix_now(),
            created_by: Some(caller.id_user.clone()),
        },
    };
    if let Some(label) = label {
        rule.label = label;
    }
    if let Some(severity) = severity {
        rule.severity = severity;
    }
    if given("condition") {
        rule.condition = condition;
    }
    if given("clear_condition") {
        rule.clear_condition = clear_condition;
    }
    if given("inactivity_s") {
        rule.inactivity_s = inactivity_s;
    }
    if given("datatype") {
        rule.datatype = datatype;
    }
    if given("source_device") {
        rule.source_device = source_device.filter(|d| !d.is_empty());
    }
    if given("for_s") {
        rule.for_s = for_s.unwrap_or(0);
    }
    if let Some(active) = is_active {
        rule.is_active = i64::from(active);
    }
    rule.updated_at = unix_now();
    if creating {
        access::input_group(state, caller, &rule.id_group, Role::Manager).await?;
    }
    // A device archived since the rule was saved does not stop the rule being changed.
    check_rule(state, &rule, creating || given("source_device")).await?;
    Ok(rule)
}

/// The checks over a whole rule: a condition or an inactivity, conditions that compile, a
/// source device of the rule's group.
async fn check_rule(state: &AppState, rule: &RuleRow, check_device: bool) -> Result<()> {
    let mut errors = Vec::new();
    match (&rule.condition, rule.inactivity_s) {
        (Some(_), Some(_)) => errors.push((
            "inactivity_s",
            "Give either condition or inactivity_s, not both.".to_string(),
        )),
        (None, None) => errors.push(("condition", "Condition cannot be blank.".to_string())),
        (None, Some(_)) => {
            if rule.clear_condition.is_some() {
                errors.push((
                    "clear_condition",
                    "An inactivity rule clears when a point arrives: it takes no clear_condition.".to_string(),
                ));
            }
            if rule.for_s != 0 {
                errors.push(("for_s", "An inactivity rule takes no for_s.".to_string()));
            }
        }
        (Some(_), None) => {}
    }
    for (field, text) in [
        ("condition", &rule.condition),
        ("clear_condition", &rule.clear_condition),
    ] {
        if let Some(text) = text
            && let Err(e) = check_condition(text)
        {
            errors.push((field, e));
        }
    }
    if let Some(device) = rule.source_device.as_ref().filter(|_| check_device) {
        let found = devices::get(&state.db, device).await?;
        if !found.is_some_and(|d| d.id_group == rule.id_group && d.archived_at.is_none()) {
            errors.push((
                "source_device",
                "Source Device is not a device of the rule's group.".to_string(),
            ));
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    Err(ServiceError::Invalid(
        errors
            .into_iter()
            .map(|(field, message)| super::FieldError::new(field, message))
            .collect(),
    ))
}

/// Hands over what a rule's change cleared: the alarms and their events on the live stream, the
/// events to the webhooks.
async fn announce(state: &AppState, cleared: Cleared) {
    if !cleared.events.is_empty() {
        state.webhooks.queued.notify_waiters();
    }
    for alarm in &cleared.alarms {
        state.stream.alarm(&alarm.id_group, &alarm.source_device, || {
            devicecloud_engine::alarms::record(alarm)
        });
    }
    state.stream.event_rows(cleared.events);
    state.alarms.rules_changed().await;
}

/// Creates a rule from `{id_group, label, severity, condition | inactivity_s, datatype?,
/// source_device?, clear_condition?, for_s?, is_active?}`: a manager of the group, which must hold
/// fewer than `alarm_rules_per_group` rules.
pub async fn create(state: &AppState, caller: &Caller, input: &Input) -> Result<RuleRow> {
    let rule = read_rule(state, caller, input, None).await?;
    let per_group = state.settings.limits.alarm_rules_per_group;
    let row = alarm_rules::create(&state.db, &rule, per_group as u64)
        .await?
        .ok_or_else(|| {
            ServiceError::invalid(
                "id_group",
                format!("The group already has {per_group} alarm rules, the most it may have."),
            )
        })?;
    state.alarms.rules_changed().await;
    Ok(row)
}

/// The rule `id` as the caller may act on it with `need`.
pub async fn get_rule(state: &AppState, caller: &Caller, id: &str, need: Role) -> Result<RuleRow> {
    let row = alarm_rules::get(&state.db, id).await?;
    access::alarm_rule(state, caller, id, row, need).await
}

/// Changes a rule with any of its fields but `id_group`; a manager of its group. Made inactive,
/// or given another scope (datatype, device, kind), its open alarms clear.
pub async fn update(state: &AppState, caller: &Caller, id: &str, input: &Input) -> Result<RuleRow> {
    let stored = get_rule(state, caller, id, Role::Manager).await?;
    let rule = read_rule(state, caller, input, Some(&stored)).await?;
    let cleared = alarm_rules::update(&state.db, &state.webhooks.routes, &stored, &rule, unix_now())
        .await?
        .ok_or_else(|| ServiceError::not_found("Alarm rule", id))?;
    announce(state, cleared).await;
    Ok(rule)
}

/// Deletes a rule; a manager of its group. Its open alarms clear; its alarms stay as history.
pub async fn delete(state: &AppState, caller: &Caller, id: &str) -> Result<()> {
    get_rule(state, caller, id, Role::Manager).await?;
    let cleared = alarm_rules::delete(&state.db, &state.webhooks.routes, id, unix_now())
        .await?
        .ok_or_else(|| ServiceError::not_found("Alarm rule", id))?;
    announce(state, cleared).await;
    Ok(())
}

/// The alarm `id` as the caller may act on it with `need`.
pub async fn get_alarm(state: &AppState, caller: &Caller, id: &str, need: Role) -> Result<AlarmRow> {
    let row = alarms::get(&state.db, id).await?;
    access::alarm(state, caller, id, row, need).await
}

/// Acknowledges alarm `id` for the caller (an operator of its group): an active alarm becomes
/// `acknowledged`, with event 231; one acknowledged before is answered as it is.
pub async fn acknowledge(state: &AppState, caller: &Caller, id: &str) -> Result<AlarmRow> {
    get_alarm(state, caller, id, Role::Operator).await?;
    let (alarm, event) = alarms::acknowledge(&state.db, &state.webhooks.routes, id, &caller.id_user, unix_now())
        .await?
        .ok_or_else(|| ServiceError::not_found("Alarm", id))?;
    if let Some(event) = event {
        state.webhooks.queued.notify_waiters();
        state.stream.alarm(&alarm.id_group, &alarm.source_device, || {
            devicecloud_engine::alarms::record(&alarm)
        });
        state.stream.event_rows(vec![event]);
    }
    Ok(alarm)
}

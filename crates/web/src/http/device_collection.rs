//! `GET|HEAD /api/v2/physical-device`: the device collection with its `expand`, `labels` and
//! `deviceStatuses` keys, and the expand options of devices (specification, Physical Device;
//! docs/api.md, "Physical devices" says what each relation holds). Relations are loaded for a whole
//! page at once.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use devicecloud_query::CollectionSpec;
use devicecloud_store::device_collection::{self as store, DeviceDocuments};
use devicecloud_store::devices::DeviceRow;
use devicecloud_store::{ListArgs, Listing, groups};
use serde_json::{Map, Value, json};

use super::collection::{CollectionGet, CollectionPage, Listed, Rendered, Selection, spec};
use super::events::event_fields;
use crate::http::error::ApiError;
use crate::render::{device_fields, device_links, group_fields, group_links, record_fields};
use crate::state::AppState;

/// The expand options, in declaration order (specification, Physical Device).
pub const EXPANDS: [&str; 10] = [
    "latestEvent",
    "group",
    "parent",
    "deviceType",
    "location",
    "iotDevice",
    "deviceInfo",
    "modbusTemplateHistory",
    "currentModbusTemplate",
    "simCard",
];

/// The `labels` key of the collection: field path → human-readable label.
fn labels() -> Value {
    json!({
        "id_physical_device": "ID",
        "label": "Label",
        "labelLink": "Label",
        "serial_hardware": "Serial number",
        "group.label": "Group",
        "id_group": "Group",
        "id_device_type": "Device type",
        "parentDevice.displayLabel": "Parent device",
    })
}

/// The `deviceStatuses` key: the names of `expected_live_status` 0/1 and `device_status`
/// 0/1/2, in code order (docs/api.md, "Physical devices").
fn device_statuses() -> Value {
    json!({
        "expectedStatuses": ["ALWAYS_OFF", "ALWAYS_ON"],
        "availableStatuses": ["EXPECTED_OFF", "EXPECTED_ON_DEVICE_ON", "EXPECTED_ON_DEVICE_OFF"],
    })
}

/// The devices of the caller's groups, archived ones included.
struct Devices;

impl Listed for Devices {
    type Row = DeviceRow;
    /// Default page size 20 (specification Limits), largest 1000 (docs/api.md, "Reading").
    const SPEC: CollectionSpec = spec(&store::ATTRIBUTES, store::SORTABLE);
    const EXPANDS: &'static [&'static str] = &EXPANDS;

    async fn list(&self, state: &AppState, args: ListArgs<'_>) -> Result<Listing<DeviceRow>, ApiError> {
        Ok(store::list(&state.db, args).await?)
    }

    async fn render(&self, state: &AppState, rows: &[DeviceRow], selection: &Selection) -> Rendered {
        render_devices(state, rows, selection).await
    }

    fn extra(&self) -> Vec<(&'static str, Value)> {
        vec![("labels", labels()), ("deviceStatuses", device_statuses())]
    }
}

/// List physical devices
///
/// Gateways and their assets in the caller's groups, archived ones included, with `expand`
/// (latestEvent, group, parent, deviceType, location, iotDevice, deviceInfo, modbusTemplateHistory,
/// currentModbusTemplate, simCard), `labels` and `deviceStatuses`. Expanded list relations hold at
/// most `expand_max_entries` entries in all (400 naming `expand` beyond); an expand path has at
/// most 4 segments (400).
#[utoipa::path(get, path = "/api/v2/physical-device", tag = "physical devices",
    params(("page" = Option<i64>, Query), ("per-page" = Option<i64>, Query), ("fields" = Option<String>, Query), ("expand" = Option<String>, Query), ("sort" = Option<String>, Query)),
    responses((status = 200, description = "Collection envelope of Physical Device records with expand, labels and deviceStatuses", body = super::schemas::records::PhysicalDeviceCollection), (status = 401, description = "Invalid credentials"), (status = 422, description = "Invalid filter")),
    security(("bearer" = [])))]
pub async fn index(get: CollectionGet) -> Result<CollectionPage, ApiError> {
    get.serve(&Devices).await
}

/// One device record with the relations `selection` expands.
pub async fn render_one(state: &AppState, row: DeviceRow, selection: &Selection) -> Result<Value, ApiError> {
    let rows = [row];
    let mut items = render_devices(state, &rows, selection).await?;
    Ok(items.pop().unwrap_or(Value::Null))
}

/// Device records with the relations `selection` expands, in the order of `rows`.
pub fn render_devices<'a>(
    state: &'a AppState,
    rows: &'a [DeviceRow],
    selection: &'a Selection,
) -> Pin<Box<dyn Future<Output = Result<Vec<Value>, ApiError>> + Send + 'a>> {
    render_weighted(state, rows, vec![1; rows.len()], selection)
}

/// [`render_devices`], where `copies[i]` says how many times the answer holds `rows[i]`: a
/// parent is rendered once and copied into each of its children, so its relations count once
/// per child against the expand budget.
fn render_weighted<'a>(
    state: &'a AppState,
    rows: &'a [DeviceRow],
    copies: Vec<usize>,
    selection: &'a Selection,
) -> Pin<Box<dyn Future<Output = Result<Vec<Value>, ApiError>> + Send + 'a>> {
    // Boxed: `parent` renders devices again (`expand=parent.parent.group`).
    Box::pin(async move {
        // No rows, no relations: an empty page (or a parent chain that ends) costs no query.
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let wanted = selection.expanded(&EXPANDS);
        let ids: Vec<&str> = rows.iter().map(|r| r.id_physical_device.as_str()).collect();
        spend_budget(state, rows, &copies, &wanted, selection).await?;
        let mut relations: HashMap<&str, HashMap<String, Value>> = HashMap::new();
        for name in &wanted {
            let values = relation(state, name, rows, &copies, &ids, &selection.nested(name)).await?;
            relations.insert(name, values);
        }
        Ok(rows
            .iter()
            .map(|row| {
                let expanded = wanted
                    .iter()
                    .map(|name| {
                        let value = relations
                            .get(name)
                            .and_then(|m| m.get(&row.id_physical_device))
                            .cloned()
                            .unwrap_or(Value::Null);
                        (name.to_string(), value)
                    })
                    .collect();
                selection.render(
                    device_fields(row),
                    expanded,
                    Some(device_links(&row.id_physical_device)),
                )
            })
            .collect())
    })
}

/// Counts the list relations this level would put into the answer (`group.latestData`'s
/// series, `modbusTemplateHistory`'s templates, each as often as the answer holds its device)
/// against the expand budget, before any of them is loaded.
async fn spend_budget(
    state: &AppState,
    rows: &[DeviceRow],
    copies: &[usize],
    wanted: &[&str],
    selection: &Selection,
) -> Result<(), ApiError> {
    let max = state.settings.limits.expand_max_entries;
    let weighted = |counts: Vec<(String, i64)>, key: &dyn Fn(&DeviceRow) -> &str| -> usize {
        let counts: HashMap<String, usize> = counts
            .into_iter()
            .map(|(id, n)| (id, usize::try_from(n).unwrap_or(usize::MAX)))
            .collect();
        rows.iter()
            .zip(copies)
            .map(|(row, copies)| counts.get(key(row)).map_or(0, |n| n.saturating_mul(*copies)))
            .fold(0, usize::saturating_add)
    };
    if wanted.contains(&"group") && selection.nested("group").expands("latestData") {
        let mut groups: Vec<&str> = rows.iter().map(|r| r.id_group.as_str()).collect();
        groups.sort_unstable();
        groups.dedup();
        let counts = store::latest_data_counts(&state.db, &groups).await?;
        selection.spend(weighted(counts, &|r| r.id_group.as_str()), max)?;
    }
    if wanted.contains(&"modbusTemplateHistory") {
        let ids: Vec<&str> = rows.iter().map(|r| r.id_physical_device.as_str()).collect();
        let counts = store::template_history_counts(&state.db, &ids).await?;
        selection.spend(weighted(counts, &|r| r.id_physical_device.as_str()), max)?;
    }
    Ok(())
}

/// A stored JSON document, or null when there is none or it does not parse.
fn document(text: Option<&str>) -> Value {
    text.and_then(|t| serde_json::from_str(t).ok()).unwrap_or(Value::Null)
}

/// A device type's label: the gateway kinds and the asset types of the protocol by name.
fn device_type_label(id: &str) -> String {
    match id {
        "GO" => "GO connectivity module".into(),
        "CORE" => "CORE connectivity module".into(),
        "PLUS" => "PLUS connectivity module".into(),
        "modbus" => "Modbus device".into(),
        "zwave" => "Z-wave node".into(),
        "sensor" => "Sensor".into(),
        "asset" => "Asset".into(),
        other => other.to_string(),
    }
}

/// The values of one relation for a page of devices, by device id.
async fn relation(
    state: &AppState,
    name: &str,
    rows: &[DeviceRow],
    copies: &[usize],
    ids: &[&str],
    nested: &Selection,
) -> Result<HashMap<String, Value>, ApiError> {
    let db = &state.db;
    let mut out = HashMap::new();
    match name {
        "latestEvent" => {
            for event in store::latest_events(db, ids).await? {
                let value = nested.render(event_fields(&event), Vec::new(), None);
                out.insert(event.source_device.clone(), value);
            }
        }
        "group" => {
            let mut by_group: HashMap<String, Value> = HashMap::new();
            for row in rows {
                if !by_group.contains_key(&row.id_group)
                    && let Some(group) = groups::get(db, &row.id_group).await?
                {
                    let value = render_group(state, &group, nested).await?;
                    by_group.insert(row.id_group.clone(), value);
                }
            }
            for row in rows {
                if let Some(group) = by_group.get(&row.id_group) {
                    out.insert(row.id_physical_device.clone(), group.clone());
                }
            }
        }
        "parent" => {
            let mut parent_copies: HashMap<&str, usize> = HashMap::new();
            for (row, copies) in rows.iter().zip(copies) {
                if let Some(parent) = row.id_parent.as_deref() {
                    *parent_copies.entry(parent).or_default() += copies;
                }
            }
            let parent_ids: Vec<&str> = parent_copies.keys().copied().collect();
            let parents = store::devices(db, &parent_ids).await?;
            let weights = parents
                .iter()
                .map(|p| parent_copies.get(p.id_physical_device.as_str()).copied().unwrap_or(1))
                .collect();
            let rendered = render_weighted(state, &parents, weights, nested).await?;
            let by_id: HashMap<&str, Value> = parents
                .iter()
                .map(|p| p.id_physical_device.as_str())
                .zip(rendered)
                .collect();
            for row in rows {
                if let Some(parent) = row.id_parent.as_deref().and_then(|p| by_id.get(p)) {
                    out.insert(row.id_physical_device.clone(), parent.clone());
                }
            }
        }
        "deviceType" => {
            for row in rows {
                let mut map = Map::new();
                map.insert("id_device_type".into(), json!(row.id_device_type));
                map.insert("label".into(), json!(device_type_label(&row.id_device_type)));
                out.insert(row.id_physical_device.clone(), nested.render(map, Vec::new(), None));
            }
        }
        "iotDevice" => {
            // The endpoint a device's `id_iot_device` names: an asset shows its gateway's.
            let mut iot_ids: Vec<&str> = rows.iter().filter_map(|r| r.id_iot_device.as_deref()).collect();
            iot_ids.sort_unstable();
            iot_ids.dedup();
            let mut by_iot: HashMap<String, Value> = HashMap::new();
            for iot in store::iot_devices(db, &iot_ids).await? {
                let value = nested.render(record_fields(&iot), Vec::new(), None);
                by_iot.insert(iot.id_iot_device.clone(), value);
            }
            for row in rows {
                if let Some(iot) = row.id_iot_device.as_deref().and_then(|id| by_iot.get(id)) {
                    out.insert(row.id_physical_device.clone(), iot.clone());
                }
            }
        }
        "modbusTemplateHistory" => {
            let mut lists: HashMap<String, Vec<Value>> = HashMap::new();
            for t in store::template_history(db, ids).await? {
                let mut map = Map::new();
                map.insert("id_template".into(), json!(t.id_template));
                map.insert("received_at".into(), json!(t.received_at));
                map.insert("template".into(), document(Some(&t.template_json)));
                lists
                    .entry(t.id_physical_device.clone())
                    .or_default()
                    .push(nested.render(map, Vec::new(), None));
            }
            for id in ids {
                out.insert(id.to_string(), Value::Array(lists.remove(*id).unwrap_or_default()));
            }
        }
        _ => {
            for docs in store::documents(db, ids).await? {
                if let Some(value) = document_relation(name, &docs, nested) {
                    out.insert(docs.id_physical_device.clone(), value);
                }
            }
        }
    }
    Ok(out)
}

/// The relations held as documents on the device row.
fn document_relation(name: &str, docs: &DeviceDocuments, nested: &Selection) -> Option<Value> {
    match name {
        "location" => Some(document(docs.location_json.as_deref())),
        "simCard" => Some(document(docs.sim_json.as_deref())),
        "currentModbusTemplate" => Some(document(docs.modbus_template_json.as_deref())),
        "deviceInfo" => {
            let payload = document(docs.device_info_json.as_deref());
            if payload.is_null() {
                return Some(Value::Null);
            }
            let mut map = Map::new();
            map.insert("updated_at".into(), json!(docs.device_info_at));
            map.insert("payload".into(), payload);
            Some(nested.render(map, Vec::new(), None))
        }
        _ => None,
    }
}

/// An expanded group, with `latestData` when asked for (`expand=group.latestData`).
async fn render_group(state: &AppState, group: &groups::GroupRow, selection: &Selection) -> Result<Value, ApiError> {
    let mut expanded = Vec::new();
    if selection.expands("latestData") {
        let rows = store::latest_data(&state.db, &[group.id_group.as_str()]).await?;
        let inner = selection.nested("latestData");
        let list: Vec<Value> = rows
            .iter()
            .map(|r| inner.render(record_fields(r), Vec::new(), None))
            .collect();
        expanded.push(("latestData".to_string(), Value::Array(list)));
    }
    Ok(selection.render(group_fields(group), expanded, Some(group_links(&group.id_group))))
}

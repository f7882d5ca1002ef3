//! The data behind a chart: downsampled points read through the API's own collection (so the
//! resolution rule, the rollups and the rights are the API's), split per container, and the
//! names and units a gateway's Modbus template gives its datatypes.

use std::collections::{BTreeMap, HashMap};

use devicecloud_store::downsampled::{self, ATTRIBUTES};
use devicecloud_store::unix_now;
use serde_json::Value;

use crate::chart::Point;
use crate::page::{filter, list_args};
use devicecloud_web::caller::Caller;
use devicecloud_web::http::error::ApiError;
use devicecloud_web::state::AppState;

/// Most points read for one page of charts: a day of 1 Hz raw points for a dozen series.
pub const MAX_POINTS: u64 = 50_000;

/// The points of one container, ascending in time.
pub struct Series {
    pub source_device: String,
    pub datatype: i64,
    pub points: Vec<Point>,
}

/// The series a data-downsampled filter selects; the flag says whether [`MAX_POINTS`] cut it.
pub async fn load(state: &AppState, caller: &Caller, condition: &Value) -> Result<(Vec<Series>, bool), ApiError> {
    let condition = filter(condition, &ATTRIBUTES)?;
    let listing = downsampled::list(
        &state.db,
        list_args(caller, condition.as_ref(), None, Some(1), MAX_POINTS),
        unix_now(),
    )
    .await?;
    let truncated = listing.page.total > listing.items.len() as u64;
    let mut by_container: BTreeMap<(String, i64), Vec<Point>> = BTreeMap::new();
    for b in listing.items {
        by_container
            .entry((b.source_device, b.datatype))
            .or_default()
            .push(Point {
                t: b.timestamp_seconds,
                min: b.min_val,
                max: b.max_val,
                avg: b.avg_val,
            });
    }
    let series = by_container
        .into_iter()
        .map(|((source_device, datatype), points)| Series {
            source_device,
            datatype,
            points,
        })
        .collect();
    Ok((series, truncated))
}

/// A datatype's label and unit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatatypeName {
    pub label: String,
    pub unit: String,
}

/// Labels and units by datatype from a Modbus template (docs/gateway-protocol.md, "Messages":
/// `registers` with `datatype`, `label`, `unit`); datatypes it does not name are absent.
pub fn datatype_names(template_json: Option<&str>) -> HashMap<i64, DatatypeName> {
    let Some(template) = template_json.and_then(|t| serde_json::from_str::<Value>(t).ok()) else {
        return HashMap::new();
    };
    template
        .get("registers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let datatype = r.get("datatype")?.as_i64()?;
            let text = |key: &str| r.get(key).and_then(Value::as_str).unwrap_or("").to_string();
            Some((
                datatype,
                DatatypeName {
                    label: text("label"),
                    unit: text("unit"),
                },
            ))
        })
        .collect()
}

/// The title of a datatype's chart or row.
pub fn datatype_title(names: &HashMap<i64, DatatypeName>, datatype: i64) -> String {
    match names.get(&datatype) {
        Some(n) if !n.label.is_empty() => format!("{} · datatype {datatype}", n.label),
        _ => format!("Datatype {datatype}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_names_datatypes() {
        let t = r#"{"name":"flowmeter-v2","registers":[{"datatype":12,"address":40001,"type":"u16","label":"Flow","unit":"m3/h"},{"datatype":"x"}]}"#;
        let names = datatype_names(Some(t));
        assert_eq!(names.len(), 1);
        assert_eq!(
            names[&12],
            DatatypeName {
                label: "Flow".into(),
                unit: "m3/h".into()
            }
        );
        assert_eq!(datatype_title(&names, 12), "Flow · datatype 12");
        assert_eq!(datatype_title(&names, 3), "Datatype 3");
        assert!(datatype_names(Some("not json")).is_empty());
    }
}

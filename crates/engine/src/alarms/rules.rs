//! The active rules, compiled once each time the rules change, and which of them a series (or a
//! device's silence) answers to.

use std::collections::HashMap;
use std::sync::Arc;

use devicecloud_store::alarm_rules::RuleRow;

use super::condition::Condition;

/// What a rule looks at.
#[derive(Debug)]
pub enum Test {
    /// A condition over each point, cleared by `clear` (`None`: the condition no longer holds);
    /// boxed, as a compiled program is large beside an inactivity's seconds.
    Threshold {
        condition: Box<Condition>,
        clear: Option<Box<Condition>>,
    },
    /// No point for this long.
    Inactivity { seconds: i64 },
}

/// One compiled rule.
#[derive(Debug)]
pub struct Rule {
    pub id: Arc<str>,
    /// When it last changed (`updated_at`).
    pub version: i64,
    pub label: Arc<str>,
    pub id_group: Arc<str>,
    pub severity: Arc<str>,
    pub datatype: Option<i64>,
    pub source_device: Option<Arc<str>>,
    /// `for_s` in microseconds.
    pub for_us: i64,
    pub test: Test,
}

impl Rule {
    /// Whether the rule looks at the series of `device` and `datatype` in `group`.
    pub fn covers(&self, group: &str, device: &str, datatype: i64) -> bool {
        &*self.id_group == group
            && self.datatype.is_none_or(|d| d == datatype)
            && self.source_device.as_deref().is_none_or(|d| d == device)
    }

    /// Compiles a stored rule; `None` (logged) for one that no longer compiles.
    pub fn compile(row: &RuleRow) -> Option<Rule> {
        let test = match (&row.condition, row.inactivity_s) {
            (Some(condition), _) => {
                let condition = Box::new(compile(row, condition)?);
                let clear = match &row.clear_condition {
                    Some(c) => Some(Box::new(compile(row, c)?)),
                    None => None,
                };
                Test::Threshold { condition, clear }
            }
            (None, Some(seconds)) => Test::Inactivity { seconds },
            (None, None) => return None,
        };
        Some(Rule {
            id: Arc::from(row.id_alarm_rule.as_str()),
            version: row.updated_at,
            label: Arc::from(row.label.as_str()),
            id_group: Arc::from(row.id_group.as_str()),
            severity: Arc::from(row.severity.as_str()),
            datatype: row.datatype,
            source_device: row.source_device.as_deref().map(Arc::from),
            for_us: row.for_s.saturating_mul(1_000_000),
            test,
        })
    }
}

fn compile(row: &RuleRow, source: &str) -> Option<Condition> {
    match Condition::compile(source) {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::error!(rule = %row.id_alarm_rule, error = %e, "an alarm rule's condition does not compile; the rule is left out");
            None
        }
    }
}

/// The active rules, by group.
#[derive(Debug, Default)]
pub struct RuleSet {
    pub rules: Vec<Arc<Rule>>,
    by_group: HashMap<Arc<str>, Vec<usize>>,
}

impl RuleSet {
    /// The active rules of `rows`, compiled.
    pub fn new(rows: &[RuleRow]) -> RuleSet {
        RuleSet::after(rows, &RuleSet::default())
    }

    /// The active rules of `rows`, those unchanged since `before` (same id and version) taken
    /// from it as compiled: a change of one rule compiles that rule, not all of them.
    pub fn after(rows: &[RuleRow], before: &RuleSet) -> RuleSet {
        let kept: HashMap<&str, &Arc<Rule>> = before.rules.iter().map(|r| (&*r.id, r)).collect();
        let rules: Vec<Arc<Rule>> = rows
            .iter()
            .filter(|r| r.is_active == 1)
            .filter_map(|row| match kept.get(row.id_alarm_rule.as_str()) {
                Some(rule) if rule.version == row.updated_at => Some(Arc::clone(rule)),
                _ => Rule::compile(row).map(Arc::new),
            })
            .collect();
        let mut by_group: HashMap<Arc<str>, Vec<usize>> = HashMap::new();
        for (i, rule) in rules.iter().enumerate() {
            by_group.entry(Arc::clone(&rule.id_group)).or_default().push(i);
        }
        RuleSet { rules, by_group }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules (by index) that look at a series: its threshold rules and its inactivity rules.
    pub fn of_series(&self, group: &str, device: &str, datatype: i64) -> (Vec<usize>, Vec<usize>) {
        let (mut thresholds, mut silences) = (Vec::new(), Vec::new());
        for &i in self.by_group.get(group).map(Vec::as_slice).unwrap_or_default() {
            let rule = &self.rules[i];
            if rule.covers(group, device, datatype) {
                match rule.test {
                    Test::Threshold { .. } => thresholds.push(i),
                    Test::Inactivity { .. } => silences.push(i),
                }
            }
        }
        (thresholds, silences)
    }

    /// The inactivity rules.
    pub fn silences(&self) -> impl Iterator<Item = (usize, &Arc<Rule>, i64)> {
        self.rules.iter().enumerate().filter_map(|(i, r)| match r.test {
            Test::Inactivity { seconds } => Some((i, r, seconds)),
            Test::Threshold { .. } => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, updated_at: i64) -> RuleRow {
        RuleRow {
            id_alarm_rule: id.into(),
            id_group: "g".into(),
            label: "l".into(),
            severity: "minor".into(),
            condition: Some("value > 1.0".into()),
            clear_condition: None,
            inactivity_s: None,
            datatype: None,
            source_device: None,
            for_s: 0,
            is_active: 1,
            created_at: 0,
            updated_at,
            created_by: None,
        }
    }

    /// Reading the rules again compiles only those that changed.
    #[test]
    fn an_unchanged_rule_is_not_compiled_again() {
        let first = RuleSet::new(&[row("a", 1), row("b", 1)]);
        let second = RuleSet::after(&[row("a", 1), row("b", 2)], &first);
        assert!(Arc::ptr_eq(&first.rules[0], &second.rules[0]));
        assert!(!Arc::ptr_eq(&first.rules[1], &second.rules[1]));
        assert_eq!(second.of_series("g", "d", 1).0, [0, 1]);
    }
}

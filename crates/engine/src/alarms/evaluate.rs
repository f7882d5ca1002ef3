//! A series as the alarm engine keeps it, and what one committed point does to its rules: the
//! state machine of docs/api.md, "Alarms" (raise after `for_s`, count repeated matches, clear on
//! the clear condition), free of I/O so that it is tested alone.

use std::sync::Arc;

use devicecloud_store::alarms::{Change, Raise};

use super::condition::Vars;
use super::rules::{Rule, RuleSet, Test};

/// What does not change about a series.
#[derive(Clone, Debug, PartialEq)]
pub struct Facts {
    pub group: Arc<str>,
    pub device: Arc<str>,
    pub serial: Arc<str>,
    pub datatype: i64,
    /// The gateway whose messages bring its points.
    pub gateway: Arc<str>,
}

/// A threshold rule's state on one series.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleState {
    /// The rule's index in the [`RuleSet`] of the series' generation.
    pub rule: usize,
    /// The rule's id and version (`updated_at`): an unchanged rule keeps its state when the rules
    /// are read again.
    pub id: Arc<str>,
    pub version: i64,
    /// Whether its alarm is not cleared.
    pub open: bool,
    /// Since when (point time, µs) its condition has held on every point, while it waits for
    /// `for_s`.
    pub since_us: Option<i64>,
    /// Matches of the open alarm not written yet, and the value of the last one.
    pub pending: i64,
    pub pending_value: f64,
}

/// One series.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesState {
    pub key: i64,
    pub facts: Facts,
    /// The newest point evaluated (µs): an older one is backfill, not evaluated.
    pub newest_us: Option<i64>,
    /// The point before the next one: (time in µs, value).
    pub previous: Option<(i64, f64)>,
    /// The rule set generation `thresholds` and `silences` were made for.
    pub generation: u64,
    pub thresholds: Vec<RuleState>,
    /// The inactivity rules that watch this series' device.
    pub silences: Vec<usize>,
}

/// The variables of a point at `t_us` of value `value` after `previous`.
fn vars<'a>(facts: &'a Facts, previous: Option<(i64, f64)>, t_us: i64, value: f64) -> Vars<'a> {
    let rate = previous
        .filter(|(t, _)| *t < t_us)
        .map(|(t, v)| (value - v) / ((t_us - t) as f64 / 1e6));
    Vars {
        value,
        previous: previous.map(|(_, v)| v),
        rate,
        datatype: facts.datatype,
        serial: &facts.serial,
    }
}

impl SeriesState {
    /// Evaluates a committed point against the series' threshold rules, pushing what changes
    /// to `out` and the rules whose matches wait to be written to `dirty` (as (series, rule
    /// state)). `now` (Unix seconds) stamps raised and cleared alarms. Returns false for a point
    /// not newer than the newest evaluated (backfill), which changes nothing.
    pub fn evaluate(
        &mut self,
        rules: &RuleSet,
        t_us: i64,
        value: f64,
        now: i64,
        out: &mut Vec<Change>,
        dirty: &mut Vec<(i64, usize)>,
    ) -> bool {
        if self.newest_us.is_some_and(|newest| t_us <= newest) {
            return false;
        }
        let SeriesState {
            key,
            facts,
            previous,
            thresholds,
            ..
        } = self;
        let vars = vars(facts, *previous, t_us, value);
        for (i, state) in thresholds.iter_mut().enumerate() {
            let rule = &rules.rules[state.rule];
            let Test::Threshold { condition, clear } = &rule.test else {
                continue;
            };
            let holds = condition.eval(&vars);
            if state.open {
                let clears = match clear {
                    Some(clear) => clear.eval(&vars),
                    None => holds.map(|h| !h),
                };
                if clears == Some(true) {
                    flush(facts, rule, state, now, out);
                    out.push(Change::Clear {
                        id_alarm_rule: rule.id.to_string(),
                        source_device: facts.device.to_string(),
                        datatype: Some(facts.datatype),
                        at: now,
                    });
                    state.open = false;
                    state.since_us = None;
                } else if holds == Some(true) {
                    if state.pending == 0 {
                        dirty.push((*key, i));
                    }
                    state.pending += 1;
                    state.pending_value = value;
                }
                continue;
            }
            if holds != Some(true) {
                if state.since_us.take().is_some() && rule.for_us > 0 {
                    out.push(Change::Release {
                        id_alarm_rule: rule.id.to_string(),
                        container_key: *key,
                    });
                }
                continue;
            }
            let since = *state.since_us.get_or_insert_with(|| {
                if rule.for_us > 0 {
                    out.push(Change::Hold {
                        id_alarm_rule: rule.id.to_string(),
                        container_key: *key,
                        since_us: t_us,
                    });
                }
                t_us
            });
            if t_us - since >= rule.for_us {
                if rule.for_us > 0 {
                    out.push(Change::Release {
                        id_alarm_rule: rule.id.to_string(),
                        container_key: *key,
                    });
                }
                state.since_us = None;
                state.open = true;
                out.push(Change::Raise(raise(facts, rule, Some(value), 1, now, true)));
            }
        }
        self.previous = Some((t_us, value));
        self.newest_us = Some(t_us);
        true
    }

    /// Writes the matches of rule state `i` that wait (a [`Change::Count`]), if any.
    pub fn flush(&mut self, rules: &RuleSet, i: usize, now: i64, out: &mut Vec<Change>) {
        let Some(state) = self.thresholds.get_mut(i) else {
            return;
        };
        if let Some(rule) = rules.rules.get(state.rule) {
            flush(&self.facts, rule, state, now, out);
        }
    }
}

/// The alarm a rule raises on a series' device (a match adds to an open one).
pub fn raise(facts: &Facts, rule: &Rule, value: Option<f64>, count: i64, at: i64, add_to_open: bool) -> Raise {
    Raise {
        id_alarm_rule: rule.id.to_string(),
        label: rule.label.to_string(),
        id_group: facts.group.to_string(),
        source_device: facts.device.to_string(),
        datatype: Some(facts.datatype),
        severity: rule.severity.to_string(),
        value,
        count,
        at,
        add_to_open,
    }
}

fn flush(facts: &Facts, rule: &Rule, state: &mut RuleState, now: i64, out: &mut Vec<Change>) {
    if state.pending > 0 && state.open {
        out.push(Change::Count(raise(
            facts,
            rule,
            Some(state.pending_value),
            state.pending,
            now,
            true,
        )));
    }
    state.pending = 0;
}

#[cfg(test)]
mod tests {
    use super::*;
    use devicecloud_store::alarm_rules::RuleRow;

    fn rule(condition: &str, clear: Option<&str>, for_s: i64) -> RuleRow {
        RuleRow {
            id_alarm_rule: "r1".into(),
            id_group: "g".into(),
            label: "hot".into(),
            severity: "major".into(),
            condition: Some(condition.into()),
            clear_condition: clear.map(str::to_string),
            inactivity_s: None,
            datatype: None,
            source_device: None,
            for_s,
            is_active: 1,
            created_at: 0,
            updated_at: 0,
            created_by: None,
        }
    }

    fn series(rules: &RuleSet) -> SeriesState {
        let (thresholds, silences) = rules.of_series("g", "d", 10);
        SeriesState {
            key: 7,
            facts: Facts {
                group: "g".into(),
                device: "d".into(),
                serial: "S".into(),
                datatype: 10,
                gateway: "d".into(),
            },
            newest_us: None,
            previous: None,
            generation: 0,
            thresholds: thresholds
                .into_iter()
                .map(|rule| RuleState {
                    rule,
                    id: Arc::clone(&rules.rules[rule].id),
                    version: 0,
                    open: false,
                    since_us: None,
                    pending: 0,
                    pending_value: 0.0,
                })
                .collect(),
            silences,
        }
    }

    /// The kinds of changes a run of points made.
    fn run(rules: &RuleSet, s: &mut SeriesState, points: &[(i64, f64)]) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut dirty = Vec::new();
        for &(t, v) in points {
            s.evaluate(rules, t * 1_000_000, v, t, &mut out, &mut dirty);
        }
        for (_, i) in dirty {
            s.flush(rules, i, 0, &mut out);
        }
        out.iter()
            .map(|c| match c {
                Change::Raise(_) => "raise",
                Change::Count(_) => "count",
                Change::Clear { .. } => "clear",
                Change::Hold { .. } => "hold",
                Change::Release { .. } => "release",
            })
            .collect()
    }

    #[test]
    fn a_threshold_raises_counts_and_clears() {
        let rules = RuleSet::new(&[rule("value > 30.0", None, 0)]);
        let mut s = series(&rules);
        assert_eq!(run(&rules, &mut s, &[(1, 20.0), (2, 31.0)]), ["raise"]);
        assert_eq!(run(&rules, &mut s, &[(3, 32.0), (4, 33.0)]), ["count"]);
        assert_eq!(s.thresholds[0].pending, 0);
        assert_eq!(run(&rules, &mut s, &[(5, 10.0)]), ["clear"]);
        assert!(!s.thresholds[0].open);
    }

    #[test]
    fn matches_waiting_are_written_before_a_clear() {
        let rules = RuleSet::new(&[rule("value > 30.0", None, 0)]);
        let mut s = series(&rules);
        let mut out = Vec::new();
        let mut dirty = Vec::new();
        for (t, v) in [(1, 31.0), (2, 32.0), (3, 1.0)] {
            s.evaluate(&rules, t * 1_000_000, v, t, &mut out, &mut dirty);
        }
        assert!(matches!(&out[1], Change::Count(r) if r.count == 1 && r.value == Some(32.0)));
        assert!(matches!(out[2], Change::Clear { .. }));
    }

    #[test]
    fn hysteresis_keeps_the_alarm_until_the_clear_condition() {
        let rules = RuleSet::new(&[rule("value > 30.0", Some("value < 25.0"), 0)]);
        let mut s = series(&rules);
        assert_eq!(run(&rules, &mut s, &[(1, 31.0), (2, 28.0)]), ["raise"]);
        assert!(s.thresholds[0].open);
        assert_eq!(run(&rules, &mut s, &[(3, 24.0)]), ["clear"]);
    }

    #[test]
    fn for_s_needs_the_condition_on_every_point_that_long() {
        let rules = RuleSet::new(&[rule("value > 30.0", None, 10)]);
        let mut s = series(&rules);
        assert_eq!(run(&rules, &mut s, &[(0, 31.0), (5, 31.0)]), ["hold"]);
        // Broken: counting starts again.
        assert_eq!(run(&rules, &mut s, &[(8, 1.0)]), ["release"]);
        assert_eq!(run(&rules, &mut s, &[(9, 31.0), (15, 31.0)]), ["hold"]);
        assert_eq!(run(&rules, &mut s, &[(19, 32.0)]), ["release", "raise"]);
    }

    #[test]
    fn backfill_and_resends_are_not_evaluated() {
        let rules = RuleSet::new(&[rule("value > 30.0", None, 0)]);
        let mut s = series(&rules);
        assert_eq!(run(&rules, &mut s, &[(10, 1.0)]), Vec::<&str>::new());
        assert_eq!(run(&rules, &mut s, &[(5, 99.0), (10, 99.0)]), Vec::<&str>::new());
        assert_eq!(s.previous, Some((10_000_000, 1.0)));
    }

    #[test]
    fn previous_and_rate_follow_the_points() {
        let rules = RuleSet::new(&[rule("rate != null && rate > 1.0", None, 0)]);
        let mut s = series(&rules);
        // 10 → 12 in 4 s is 0.5/s; 12 → 20 in 2 s is 4/s.
        assert_eq!(run(&rules, &mut s, &[(0, 10.0), (4, 12.0)]), Vec::<&str>::new());
        assert_eq!(run(&rules, &mut s, &[(6, 20.0)]), ["raise"]);
    }
}

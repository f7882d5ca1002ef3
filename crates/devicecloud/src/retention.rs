//! The retention settings (docs/operations.md, "Retention"): the days groups without their own
//! retention keep raw points and each rollup (unset: forever), and how often expired data is
//! removed. Each is a TOML key (`retention_raw_days`, …) and a `DEVICECLOUD_*` variable (the key
//! in capitals), the variable winning.

use std::time::Duration;

use anyhow::{Context, Result};
use devicecloud_store::retention::Retention;

use crate::limits::{positive, take_number};

/// The most days a retention may name: a hundred years.
pub const MAX_DAYS: u64 = 36_500;

/// The retention settings as configured.
#[derive(Clone, Debug, PartialEq)]
pub struct RetentionSettings {
    pub raw_days: Option<u64>,
    pub minute_days: Option<u64>,
    pub hour_days: Option<u64>,
    pub day_days: Option<u64>,
    pub interval_s: u64,
}

impl Default for RetentionSettings {
    fn default() -> RetentionSettings {
        RetentionSettings {
            raw_days: None,
            minute_days: None,
            hour_days: None,
            day_days: None,
            interval_s: 600,
        }
    }
}

impl RetentionSettings {
    /// Each default by its key; the interval is apart (it cannot be unset).
    fn days(&mut self) -> [(&'static str, &mut Option<u64>); 4] {
        [
            ("retention_raw_days", &mut self.raw_days),
            ("retention_minute_days", &mut self.minute_days),
            ("retention_hour_days", &mut self.hour_days),
            ("retention_day_days", &mut self.day_days),
        ]
    }

    /// Takes the retention keys out of a settings file's table, leaving the other keys.
    pub fn apply_table(&mut self, table: &mut toml::Table, file: &str) -> Result<()> {
        let days = |n| checked_days(Some(n)).is_some();
        for (key, slot) in self.days() {
            if let Some(n) = take_number(table, key, file, days, &expected())? {
                *slot = Some(n);
            }
        }
        let positive = "a positive whole number";
        if let Some(n) = take_number(table, "retention_interval_s", file, |n| n > 0, positive)? {
            self.interval_s = n;
        }
        Ok(())
    }

    /// Applies the `DEVICECLOUD_RETENTION_*` variables that `env` finds (by name without the
    /// prefix); an empty value unsets a default (keep forever).
    pub fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<()> {
        for (key, slot) in self.days() {
            let name = key.to_ascii_uppercase();
            if let Some(v) = env(&name) {
                *slot = if v.trim().is_empty() {
                    None
                } else {
                    Some(
                        checked_days(v.trim().parse().ok())
                            .with_context(|| format!("DEVICECLOUD_{name}={v} must be {}", expected()))?,
                    )
                };
            }
        }
        if let Some(v) = env("RETENTION_INTERVAL_S") {
            self.interval_s = positive(&v)
                .with_context(|| format!("DEVICECLOUD_RETENTION_INTERVAL_S={v} is not a positive whole number"))?;
        }
        Ok(())
    }

    /// The defaults as the store takes them.
    pub fn defaults(&self) -> Retention {
        let days = |d: Option<u64>| d.map(|d| d as i64);
        Retention {
            raw_days: days(self.raw_days),
            minute_days: days(self.minute_days),
            hour_days: days(self.hour_days),
            day_days: days(self.day_days),
        }
    }

    pub fn interval(&self) -> Duration {
        Duration::from_secs(self.interval_s)
    }
}

fn checked_days(days: Option<u64>) -> Option<u64> {
    days.filter(|d| (1..=MAX_DAYS).contains(d))
}

fn expected() -> String {
    format!("a whole number of days from 1 to {MAX_DAYS} (unset keeps forever)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_come_from_the_file_and_the_variables_win() {
        let mut r = RetentionSettings::default();
        assert_eq!(r.defaults(), Retention::default());
        let mut table: toml::Table =
            toml::from_str("retention_raw_days = 30\nretention_day_days = 3650\nlog = \"x\"\n").unwrap();
        r.apply_table(&mut table, "f.toml").unwrap();
        assert!(table.contains_key("log") && !table.contains_key("retention_raw_days"));
        r.apply_env(|name| match name {
            "RETENTION_RAW_DAYS" => Some("7".into()),
            "RETENTION_DAY_DAYS" => Some(String::new()),
            "RETENTION_INTERVAL_S" => Some("60".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(
            r.defaults(),
            Retention {
                raw_days: Some(7),
                ..Retention::default()
            }
        );
        assert_eq!(r.interval(), Duration::from_secs(60));
        assert!(
            r.apply_env(|n| (n == "RETENTION_HOUR_DAYS").then(|| "0".into()))
                .is_err()
        );
        assert!(
            r.apply_env(|n| (n == "RETENTION_HOUR_DAYS").then(|| "36501".into()))
                .is_err()
        );
        let mut bad: toml::Table = toml::from_str("retention_minute_days = -1\n").unwrap();
        assert!(r.apply_table(&mut bad, "f.toml").is_err());
    }
}

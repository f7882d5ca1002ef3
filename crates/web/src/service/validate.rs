//! Validating an operation's input fields with Yii's messages (`[{field, message}]`, first
//! error per attribute, docs/api.md, "Errors"), so that the JSON API and the dashboard's forms
//! refuse the same input with the same words.

use serde_json::{Map, Value};

use super::{FieldError, ServiceError};

/// Yii's attribute label: `serial_hardware` → "Serial Hardware".
pub fn label_of(field: &str) -> String {
    field
        .split(['_', '-'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Collects validation errors over one body, so that every bad field is reported at once.
#[derive(Debug)]
pub struct Fields<'a> {
    map: &'a Map<String, Value>,
    errors: Vec<FieldError>,
}

impl<'a> Fields<'a> {
    pub fn new(map: &'a Map<String, Value>) -> Fields<'a> {
        Fields {
            map,
            errors: Vec::new(),
        }
    }

    fn fail(&mut self, field: &str, message: String) {
        if !self.errors.iter().any(|e| e.field == field) {
            self.errors.push(FieldError::new(field, message));
        }
    }

    /// A string of at most `max` characters; `required` refuses absence, null and blank.
    pub fn string(&mut self, field: &str, required: bool, max: usize) -> Option<&'a str> {
        match self.map.get(field) {
            None | Some(Value::Null) => {
                if required {
                    self.fail(field, format!("{} cannot be blank.", label_of(field)));
                }
                None
            }
            Some(Value::String(s)) if required && s.trim().is_empty() => {
                self.fail(field, format!("{} cannot be blank.", label_of(field)));
                None
            }
            Some(Value::String(s)) if s.chars().count() > max => {
                self.fail(
                    field,
                    format!("{} should contain at most {max} characters.", label_of(field)),
                );
                None
            }
            // PostgreSQL cannot store a NUL; SQLite could, but the same input gets the same
            // answer on either store.
            Some(Value::String(s)) if s.contains('\0') => {
                self.fail(field, format!("{} must not contain NUL characters.", label_of(field)));
                None
            }
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => {
                self.fail(field, format!("{} must be a string.", label_of(field)));
                None
            }
        }
    }

    /// A string that may also be sent as an integer (codes such as a group `type`).
    pub fn code(&mut self, field: &str) -> Option<String> {
        match self.map.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) if n.is_i64() => Some(n.to_string()),
            // As Yii compares a JSON float with a code: 1.0 is "1".
            Some(Value::Number(n)) if n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 1e14) => {
                n.as_f64().map(|f| (f as i64).to_string())
            }
            Some(_) => {
                self.fail(field, format!("{} must be a string.", label_of(field)));
                None
            }
        }
    }

    /// A boolean; also 0/1 and "0"/"1" as Yii's BooleanValidator accepts.
    pub fn boolean(&mut self, field: &str) -> Option<bool> {
        match self.map.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(v) if v == 1 || v == "1" => Some(true),
            Some(v) if v == 0 || v == "0" => Some(false),
            Some(_) => {
                self.fail(field, format!("{} must be either \"1\" or \"0\".", label_of(field)));
                None
            }
        }
    }

    /// An integer within `[min, max]`.
    pub fn integer(&mut self, field: &str, required: bool, min: i64, max: i64) -> Option<i64> {
        let value = match self.map.get(field) {
            None | Some(Value::Null) => {
                if required {
                    self.fail(field, format!("{} cannot be blank.", label_of(field)));
                }
                return None;
            }
            // As Yii reads a JSON float: 7045.0 prints as "7045", an integer.
            Some(Value::Number(n)) => n.as_i64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 1e14)
                    .map(|f| f as i64)
            }),
            Some(Value::String(s)) => s.trim().parse::<i64>().ok(),
            Some(_) => None,
        };
        match value {
            None => self.fail(field, format!("{} must be an integer.", label_of(field))),
            Some(v) if v < min => self.fail(field, format!("{} must be no less than {min}.", label_of(field))),
            Some(v) if v > max => self.fail(field, format!("{} must be no greater than {max}.", label_of(field))),
            Some(v) => return Some(v),
        }
        None
    }

    /// Adds an error found by the caller's own check.
    pub fn error(&mut self, field: &str, message: impl Into<String>) {
        self.fail(field, message.into());
    }

    /// A string set when the record is created (`creating`: then required) and never after: an
    /// update that names it is refused, "cannot be changed".
    pub fn fixed(&mut self, field: &str, creating: bool, max: usize) -> Option<&'a str> {
        if creating {
            return self.string(field, true, max);
        }
        if self.map.contains_key(field) {
            self.fail(field, format!("{} cannot be changed.", label_of(field)));
        }
        None
    }

    /// Ok when every field was valid, else the list of invalid fields.
    pub fn finish(self) -> Result<(), ServiceError> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ServiceError::Invalid(self.errors))
        }
    }
}

#[cfg(test)]
mod tests;

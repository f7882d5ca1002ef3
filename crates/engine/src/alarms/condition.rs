//! An alarm rule's condition: a CEL expression (cel-spec) over one point, compiled once when the
//! rule is saved or read, evaluated for every point the rule matches (docs/api.md, "Alarms").
//! CEL has no loops and no side effects, so a condition always ends, in about the time it takes to
//! read it: no script can time out or be cut off.
//!
//! A condition is checked when saved: it must parse, name only the variables of a point, and give
//! a boolean for a point with every variable set; anything else is refused with its position.
//! At evaluation, an error (`previous > 3` while `previous` is null, say) is neither true nor
//! false: the point neither matches nor clears.

use std::sync::{Arc, LazyLock};

use cel::common::types::{CelDouble, CelInt, CelNull, CelString};
use cel::common::value::CowVal;
use cel::context::VariableResolver;
use cel::{Context, Env, Program, Value};

use super::native::{Node, Out, V};

/// The variables a condition may name.
pub const VARIABLES: [&str; 5] = ["value", "previous", "rate", "datatype", "serial"];

/// The standard environment, built once.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// What a condition sees of a point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Vars<'a> {
    pub value: f64,
    /// The series' point before this one, if any.
    pub previous: Option<f64>,
    /// Change per second since the previous point, if there is one at an earlier time.
    pub rate: Option<f64>,
    pub datatype: i64,
    /// The source device's serial.
    pub serial: &'a str,
}

impl VariableResolver for Vars<'_> {
    fn resolve<'b>(&'b self, name: &str) -> Option<CowVal<'b, 'b>> {
        let number = |n: Option<f64>| match n {
            Some(n) => CowVal::owned(CelDouble::from(n)),
            None => CowVal::owned(CelNull),
        };
        Some(match name {
            "value" => CowVal::owned(CelDouble::from(self.value)),
            "previous" => number(self.previous),
            "rate" => number(self.rate),
            "datatype" => CowVal::owned(CelInt::from(self.datatype)),
            "serial" => CowVal::owned(CelString::from(self.serial)),
            _ => return None,
        })
    }
}

/// A compiled condition: the interpreter's program, and its native form when it has one
/// (`native`).
#[derive(Debug)]
pub struct Condition {
    program: Program,
    native: Option<Node>,
}

/// Why a condition was refused: where (1-based line and column) and what.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ConditionError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl Condition {
    /// Compiles and checks `source`.
    pub fn compile(source: &str) -> Result<Condition, ConditionError> {
        let program = ENV.compile(source).map_err(|errors| {
            let first = errors.errors.first();
            let (line, column) = first.map_or((1, 1), |e| (e.pos.0.max(1) as usize, e.pos.1.max(1) as usize));
            let message = first.map_or_else(|| "the condition does not parse".to_string(), |e| e.msg.clone());
            ConditionError { line, column, message }
        })?;
        let references = program.references();
        if let Some(unknown) = references.variables().into_iter().find(|v| !VARIABLES.contains(v)) {
            let (line, column) = position_of(source, unknown);
            return Err(ConditionError {
                line,
                column,
                message: format!(
                    "unknown variable '{unknown}': a condition names value, previous, rate, datatype and serial"
                ),
            });
        }
        let native = Node::compile(program.expression());
        let condition = Condition { program, native };
        let sample = Vars {
            value: 1.0,
            previous: Some(1.0),
            rate: Some(0.0),
            datatype: 1,
            serial: "S",
        };
        match condition.run(&sample) {
            Ok(Value::Bool(_)) => Ok(condition),
            Ok(other) => Err(ConditionError {
                line: 1,
                column: 1,
                message: format!("the condition gives {}, not a boolean", type_name(&other)),
            }),
            Err(e) => Err(ConditionError {
                line: 1,
                column: 1,
                message: format!(
                    "the condition does not give a boolean for a point ({e}); numbers of a point are doubles: write 30.0, not 30, beside them in arithmetic"
                ),
            }),
        }
    }

    fn run(&self, vars: &Vars<'_>) -> cel::ResolveResult {
        let mut context = Context::with_env(Arc::clone(&ENV));
        context.set_variable_resolver(vars);
        self.program.execute(&context)
    }

    /// The condition for a point: `None` when it does not evaluate to a boolean (an error).
    pub fn eval(&self, vars: &Vars<'_>) -> Option<bool> {
        if let Some(native) = &self.native {
            match native.eval(vars) {
                Out::Val(V::B(b)) => return Some(b),
                Out::Val(_) | Out::Error => return None,
                Out::Ask => {}
            }
        }
        match self.run(vars) {
            Ok(Value::Bool(b)) => Some(b),
            _ => None,
        }
    }
}

/// What the interpreter gives for `source` (compiled without the checks of a rule), and the
/// native form of it, if any: for the tests that hold the one to the other.
#[cfg(test)]
pub(super) fn both(source: &str, vars: &Vars<'_>) -> Option<(cel::ResolveResult, Option<Node>)> {
    let program = ENV.compile(source).ok()?;
    let native = Node::compile(program.expression());
    let condition = Condition { program, native };
    Some((condition.run(vars), condition.native))
}

/// The position of the first whole-word `name` in `source` (1-based line and column).
fn position_of(source: &str, name: &str) -> (usize, usize) {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    for (number, line) in source.lines().enumerate() {
        let mut from = 0;
        while let Some(found) = line[from..].find(name) {
            let start = from + found;
            let end = start + name.len();
            let before = line[..start].chars().next_back();
            let after = line[end..].chars().next();
            if !before.is_some_and(is_word) && !after.is_some_and(is_word) {
                return (number + 1, line[..start].chars().count() + 1);
            }
            from = end;
        }
    }
    (1, 1)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Int(_) => "an int",
        Value::UInt(_) => "a uint",
        Value::Float(_) => "a double",
        Value::String(_) => "a string",
        Value::Null => "null",
        Value::List(_) => "a list",
        Value::Map(_) => "a map",
        _ => "a value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(value: f64, previous: Option<f64>) -> Vars<'static> {
        Vars {
            value,
            previous,
            rate: None,
            datatype: 10,
            serial: "GW-1",
        }
    }

    #[test]
    fn a_threshold_holds_above_and_not_below() {
        let c = Condition::compile("value > 30").unwrap();
        assert_eq!(c.eval(&point(31.0, None)), Some(true));
        assert_eq!(c.eval(&point(29.5, None)), Some(false));
    }

    #[test]
    fn every_variable_is_seen() {
        let c = Condition::compile(
            "datatype == 10 && serial.startsWith('GW') && previous != null && value - previous > 2.0",
        )
        .unwrap();
        assert_eq!(c.eval(&point(10.0, Some(7.0))), Some(true));
        assert_eq!(c.eval(&point(10.0, Some(9.0))), Some(false));
        assert_eq!(c.eval(&point(10.0, None)), Some(false));
        let rate = Condition::compile("rate != null && rate > 0.5").unwrap();
        let mut v = point(1.0, Some(0.0));
        v.rate = Some(1.0);
        assert_eq!(rate.eval(&v), Some(true));
    }

    #[test]
    fn an_error_at_evaluation_is_neither_true_nor_false() {
        let c = Condition::compile("previous > 3.0").unwrap();
        assert_eq!(c.eval(&point(1.0, None)), None);
        assert_eq!(c.eval(&point(1.0, Some(4.0))), Some(true));
    }

    #[test]
    fn a_syntax_error_names_its_position() {
        let e = Condition::compile("value >").unwrap_err();
        assert_eq!((e.line, e.column), (1, 8));
        let e = Condition::compile("value > 1 &&\n  (").unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn an_unknown_variable_is_refused_where_it_is() {
        let e = Condition::compile("value > 1.0 && temp < 3.0").unwrap_err();
        assert_eq!((e.line, e.column), (1, 16));
        assert!(e.message.contains("temp"), "{}", e.message);
    }

    #[test]
    fn a_condition_that_is_not_boolean_is_refused() {
        assert!(
            Condition::compile("value + 1.0")
                .unwrap_err()
                .message
                .contains("double")
        );
        assert!(Condition::compile("'high'").is_err());
        // Mixed arithmetic is an error for every point.
        assert!(Condition::compile("value + 1 > 3.0").is_err());
    }
}

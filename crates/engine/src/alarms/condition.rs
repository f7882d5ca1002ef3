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

/// Deepest nesting a condition may have: brackets within brackets, operators within operators.
/// The parser and the evaluator recurse once a level, on a thread's stack, so that a deeper one
/// (a few hundred levels fit in 4,096 characters) would end the process, not just the request.
pub const MAX_DEPTH: usize = 32;

/// Stack of the thread a condition is parsed and checked on: enough for the deepest text the
/// parser may meet before the depth is known.
const PARSE_STACK_BYTES: usize = 256 << 20;

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
    /// Compiles and checks `source`, on a thread of its own with a stack for any text (the
    /// parser recurses per level of nesting); a condition nested deeper than [`MAX_DEPTH`] is
    /// refused, so that evaluating it never runs deep.
    pub fn compile(source: &str) -> Result<Condition, ConditionError> {
        if let Some((line, column)) = bracket_too_deep(source) {
            return Err(too_deep(line, column));
        }
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("condition".into())
                .stack_size(PARSE_STACK_BYTES)
                .spawn_scoped(scope, || Condition::compile_here(source))
                .map_err(|e| ConditionError {
                    line: 1,
                    column: 1,
                    message: format!("the condition could not be checked ({e})"),
                })?
                .join()
                .unwrap_or_else(|_| {
                    Err(ConditionError {
                        line: 1,
                        column: 1,
                        message: "the condition does not parse".into(),
                    })
                })
        })
    }

    fn compile_here(source: &str) -> Result<Condition, ConditionError> {
        let program = ENV.compile(source).map_err(|errors| {
            let first = errors.errors.first();
            let (line, column) = first.map_or((1, 1), |e| (e.pos.0.max(1) as usize, e.pos.1.max(1) as usize));
            let message = first.map_or_else(|| "the condition does not parse".to_string(), |e| e.msg.clone());
            ConditionError { line, column, message }
        })?;
        if depth(program.expression()) > MAX_DEPTH {
            return Err(too_deep(1, 1));
        }
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

fn too_deep(line: usize, column: usize) -> ConditionError {
    ConditionError {
        line,
        column,
        message: format!("the condition is nested deeper than {MAX_DEPTH} levels"),
    }
}

/// Where brackets first nest deeper than [`MAX_DEPTH`], if they do (outside string literals).
fn bracket_too_deep(source: &str) -> Option<(usize, usize)> {
    let (mut depth, mut quote) = (0usize, None::<char>);
    let (mut line, mut column) = (1, 0);
    let mut escaped = false;
    for c in source.chars() {
        column += 1;
        if c == '\n' {
            (line, column) = (line + 1, 0);
        }
        if let Some(q) = quote {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                _ if c == q => quote = None,
                _ => {}
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some((line, column));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// How deep an expression nests.
fn depth(expr: &cel::IdedExpr) -> usize {
    use cel::common::ast::{EntryExpr, Expr};
    let deepest = |exprs: &mut dyn Iterator<Item = &cel::IdedExpr>| exprs.map(depth).max().unwrap_or(0);
    1 + match &expr.expr {
        Expr::Call(call) => deepest(&mut call.target.iter().map(|t| &**t).chain(call.args.iter())),
        Expr::Comprehension(c) => {
            deepest(&mut [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result].into_iter())
        }
        Expr::List(list) => deepest(&mut list.elements.iter()),
        Expr::Map(map) => deepest(&mut map.entries.iter().flat_map(|e| match &e.expr {
            EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })),
        Expr::Struct(st) => deepest(&mut st.entries.iter().flat_map(|e| match &e.expr {
            EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })),
        Expr::Select(select) => depth(&select.operand),
        _ => 0,
    }
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

    /// Nesting that would run the parser or the evaluator deep is refused, whatever its form,
    /// and the service lives on.
    #[test]
    fn a_condition_nested_too_deep_is_refused() {
        let parens = format!("{}value{} > 1.0", "(".repeat(2_000), ")".repeat(2_000));
        let e = Condition::compile(&parens).unwrap_err();
        assert_eq!((e.line, e.column), (1, MAX_DEPTH + 1));
        let chain = format!("value{} > 1.0", " + 1.0".repeat(600));
        assert!(Condition::compile(&chain).unwrap_err().message.contains("deeper"));
        // The parser folds repeated negations: not deep once parsed.
        let nots = format!("{}true", "!".repeat(4_000));
        assert!(Condition::compile(&nots).is_ok());
        // A string holding brackets is no nesting.
        assert!(Condition::compile("serial == '((((((((((((((((((((((((((((((((((((('").is_ok());
        let fine = format!("{}value > 1.0{}", "(".repeat(10), ")".repeat(10));
        assert!(Condition::compile(&fine).is_ok());
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

//! The native evaluation held to the CEL interpreter over random expressions and points: where it
//! answers, it answers as the interpreter does.

use proptest::prelude::*;

use super::super::condition::{Vars, both};
use super::{Out, V};

fn leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("value".to_string()),
        Just("previous".to_string()),
        Just("rate".to_string()),
        Just("datatype".to_string()),
        Just("30".to_string()),
        Just("30.0".to_string()),
        Just("-2.5".to_string()),
        Just("0.0".to_string()),
        Just("12".to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        Just("9007199254740993".to_string()),
        Just("-9223372036854775808".to_string()),
        Just("(datatype + 1 == 13)".to_string()),
        Just("(true == true)".to_string()),
        Just("1e308".to_string()),
    ]
}

fn expression() -> impl Strategy<Value = String> {
    let ops = prop_oneof![
        Just("<"),
        Just("<="),
        Just(">"),
        Just(">="),
        Just("=="),
        Just("!="),
        Just("&&"),
        Just("||"),
        Just("+"),
        Just("-"),
        Just("*"),
        Just("/"),
    ];
    leaf().prop_recursive(4, 24, 2, move |inner| {
        prop_oneof![
            (inner.clone(), ops.clone(), inner.clone()).prop_map(|(l, op, r)| format!("({l}) {op} ({r})")),
            inner.clone().prop_map(|e| format!("!({e})")),
            inner.prop_map(|e| format!("-({e})")),
        ]
    })
}

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(1.5),
        Just(-3.0),
        Just(30.0),
        Just(f64::NAN),
        Just(1e308),
        Just(f64::INFINITY),
        -100.0..100.0f64,
    ]
}

fn same(native: V, interpreted: &cel::Value) -> bool {
    match (native, interpreted) {
        (V::D(a), cel::Value::Float(b)) => a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
        (V::I(a), cel::Value::Int(b)) => a == *b,
        (V::B(a), cel::Value::Bool(b)) => a == *b,
        (V::Null, cel::Value::Null) => true,
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn the_native_answer_is_the_interpreters(
        source in expression(),
        value in number(),
        previous in proptest::option::of(number()),
        rate in proptest::option::of(number()),
        datatype in prop_oneof![Just(0i64), Just(12), Just(-1), Just(i64::MAX)],
    ) {
        let vars = Vars { value, previous, rate, datatype, serial: "S" };
        let Some((interpreted, native)) = both(&source, &vars) else { return Ok(()); };
        let Some(native) = native else { return Ok(()); };
        match native.eval(&vars) {
            Out::Ask => {}
            Out::Error => prop_assert!(interpreted.is_err(), "{source}: native error, interpreter {interpreted:?}"),
            Out::Val(v) => match &interpreted {
                Ok(value) => prop_assert!(same(v, value), "{source}: native {v:?}, interpreter {value:?}"),
                Err(e) => prop_assert!(false, "{source}: native {v:?}, interpreter error {e:?}"),
            },
        }
    }
}

/// The conditions of the benchmark and the documentation's examples are native, without asking.
#[test]
fn common_conditions_are_native() {
    let vars = Vars {
        value: 31.0,
        previous: Some(20.0),
        rate: Some(2.0),
        datatype: 12,
        serial: "S",
    };
    for source in [
        "value > 30",
        "value < 0.0",
        "rate != null && rate > 1000.0",
        "previous != null && value - previous > 10.0",
        "value < 0.5 || value > 9.5",
        "!(value > 30.0)",
    ] {
        let (_, native) = both(source, &vars).unwrap();
        let out = native.unwrap_or_else(|| panic!("{source} not native")).eval(&vars);
        assert!(matches!(out, Out::Val(V::B(_))), "{source}: {out:?}");
    }
}

/// An operand the native evaluation leaves to the interpreter may be the value that decides `&&`
/// or `||` before its right side, an error, is looked at.
#[test]
fn an_unknown_left_operand_is_left_to_the_interpreter() {
    let vars = Vars {
        value: 1.0,
        previous: None,
        rate: None,
        datatype: 12,
        serial: "S",
    };
    for source in [
        "(datatype + 1 == 13) || previous > 1.0",
        "(datatype + 1 == 14) && previous > 1.0",
    ] {
        let (interpreted, native) = both(source, &vars).unwrap();
        assert!(interpreted.is_ok(), "{source}: {interpreted:?}");
        assert_eq!(native.unwrap().eval(&vars), Out::Ask, "{source}");
    }
}

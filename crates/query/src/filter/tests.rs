//! Tests of the filter grammar against docs/api.md, "Collections" (query-string and JSON forms).

use serde_json::{Value, json};

use super::*;
use crate::params::Params;

const ATTRS: &[Attribute] = &[
    Attribute::new("id", AttrKind::Integer),
    Attribute::new("name", AttrKind::String),
    Attribute::new("weight", AttrKind::Number),
    Attribute::new("active", AttrKind::Boolean),
    Attribute::new("note", AttrKind::String),
    Attribute::new("group_id", AttrKind::Integer),
    Attribute::new("created_at", AttrKind::Integer),
    Attribute::labelled("id_group", AttrKind::Integer, "Group"),
];

/// The filter of a query string, as the server reads it.
fn fq(query: &str) -> Result<Option<Filter>, QueryError> {
    let params = Params::parse_query(query.as_bytes());
    let raw = params.get("filter").map(|p| p.to_json()).unwrap_or(Value::Null);
    parse_filter(&raw, ATTRS, crate::DEFAULT_MAX_LIST_VALUES)
}

fn fj(v: Value) -> Result<Option<Filter>, QueryError> {
    parse_filter(&v, ATTRS, crate::DEFAULT_MAX_LIST_VALUES)
}

fn ok(query: &str) -> Filter {
    match fq(query) {
        Ok(Some(f)) => f,
        other => panic!("{query}: {other:?}"),
    }
}

fn okj(v: Value) -> Filter {
    match fj(v.clone()) {
        Ok(Some(f)) => f,
        other => panic!("{v}: {other:?}"),
    }
}

fn err(query: &str) -> String {
    match fq(query) {
        Err(QueryError::Filter(m)) => m,
        other => panic!("{query}: {other:?}"),
    }
}

fn errj(v: Value) -> String {
    match fj(v.clone()) {
        Err(QueryError::Filter(m)) => m,
        other => panic!("{v}: {other:?}"),
    }
}

fn cmp(attr: &'static str, op: CompareOp, value: Scalar) -> Filter {
    Filter::Compare { attr, op, value }
}

fn int(attr: &'static str, op: CompareOp, v: i64) -> Filter {
    cmp(attr, op, Scalar::Int(v))
}

fn str_eq(attr: &'static str, v: &str) -> Filter {
    cmp(attr, CompareOp::Eq, Scalar::Str(v.to_owned()))
}

fn ints(vs: &[i64]) -> Vec<Scalar> {
    vs.iter().map(|&v| Scalar::Int(v)).collect()
}

// Query-string forms.

#[test]
fn equality() {
    assert_eq!(ok("filter[name]=x"), str_eq("name", "x"));
    assert_eq!(ok("filter[id]=5"), int("id", CompareOp::Eq, 5));
}

#[test]
fn two_operators_on_one_attribute_are_anded() {
    assert_eq!(
        ok("filter[id][gt]=1&filter[id][lt]=5"),
        Filter::And(vec![int("id", CompareOp::Gt, 1), int("id", CompareOp::Lt, 5)])
    );
}

#[test]
fn in_list() {
    assert_eq!(
        ok("filter[id][in][]=2&filter[id][in][]=5&filter[id][in][]=9"),
        Filter::In {
            attr: "id",
            values: ints(&[2, 5, 9]),
            or_null: false,
            negated: false
        }
    );
    // One value stays an In.
    assert_eq!(
        ok("filter[id][in][]=5"),
        Filter::In {
            attr: "id",
            values: ints(&[5]),
            or_null: false,
            negated: false
        }
    );
    // A map of values is a list too.
    assert_eq!(
        ok("filter[id][nin][x]=5&filter[id][nin][y]=6"),
        Filter::In {
            attr: "id",
            values: ints(&[5, 6]),
            or_null: false,
            negated: true
        }
    );
}

#[test]
fn or_list() {
    assert_eq!(
        ok("filter[or][][id]=1&filter[or][][id][gte]=44"),
        Filter::Or(vec![int("id", CompareOp::Eq, 1), int("id", CompareOp::Gte, 44)])
    );
}

#[test]
fn and_list() {
    assert_eq!(
        ok("filter[and][0][id][gt]=40&filter[and][1][active]=1"),
        Filter::And(vec![
            int("id", CompareOp::Gt, 40),
            cmp("active", CompareOp::Eq, Scalar::Bool(true))
        ])
    );
}

#[test]
fn not_block() {
    assert_eq!(
        ok("filter[not][id][lt]=43"),
        Filter::Not(Box::new(int("id", CompareOp::Lt, 43)))
    );
}

#[test]
fn several_keys_are_anded_in_key_order() {
    assert_eq!(
        ok("filter[id][gt]=1&filter[id][lt]=9&filter[name]=x"),
        Filter::And(vec![
            Filter::And(vec![int("id", CompareOp::Gt, 1), int("id", CompareOp::Lt, 9)]),
            str_eq("name", "x"),
        ])
    );
    assert_eq!(
        okj(json!({"name": "x", "id": 1})),
        Filter::And(vec![str_eq("name", "x"), int("id", CompareOp::Eq, 1)])
    );
}

#[test]
fn repeated_key_last_wins() {
    assert_eq!(ok("filter[id][eq]=1&filter[id][eq]=2"), int("id", CompareOp::Eq, 2));
}

#[test]
fn numbers_and_booleans_are_typed() {
    assert_eq!(
        ok("filter[weight][gte]=1.5"),
        cmp("weight", CompareOp::Gte, Scalar::Float(1.5))
    );
    assert_eq!(
        ok("filter[active]=0"),
        cmp("active", CompareOp::Eq, Scalar::Bool(false))
    );
    assert_eq!(ok("filter[id][neq]=3"), int("id", CompareOp::Neq, 3));
    assert_eq!(ok("filter[id][lte]=3"), int("id", CompareOp::Lte, 3));
}

// Semantics.

#[test]
fn null_means_sql_null() {
    assert_eq!(ok("filter[note]=NULL"), Filter::IsNull { attr: "note" });
    assert_eq!(ok("filter[id]=NULL"), Filter::IsNull { attr: "id" });
    assert_eq!(ok("filter[note][eq]=NULL"), Filter::Never);
    assert_eq!(ok("filter[note][neq]=NULL"), Filter::Never);
    assert_eq!(ok("filter[id][gt]=NULL"), Filter::Never);
    assert_eq!(ok("filter[note][like]=NULL"), Filter::Never);
    assert_eq!(
        ok("filter[note][in][]=a&filter[note][in][]=NULL"),
        Filter::In {
            attr: "note",
            values: vec![Scalar::Str("a".into())],
            or_null: true,
            negated: false
        }
    );
    assert_eq!(ok("filter[note][in][]=NULL"), Filter::IsNull { attr: "note" });
    assert_eq!(ok("filter[note][nin][]=NULL"), Filter::IsNotNull { attr: "note" });
    assert_eq!(
        ok("filter[id][nin][]=NULL&filter[id][nin][]=4"),
        Filter::In {
            attr: "id",
            values: ints(&[4]),
            or_null: true,
            negated: true
        }
    );
    // Only the exact string.
    assert_eq!(ok("filter[note]=null"), str_eq("note", "null"));
    assert_eq!(okj(json!({"id": null})), Filter::IsNull { attr: "id" });
    assert_eq!(okj(json!({"id": {"eq": null}})), Filter::Never);
    assert_eq!(
        okj(json!({"id": {"in": [1, null]}})),
        Filter::In {
            attr: "id",
            values: ints(&[1]),
            or_null: true,
            negated: false
        }
    );
}

#[test]
fn like_is_a_literal_substring() {
    assert_eq!(
        ok("filter[name][like]=banana_"),
        Filter::Like {
            attr: "name",
            value: "banana_".into()
        }
    );
    assert_eq!(
        ok("filter[name][like]="),
        Filter::Like {
            attr: "name",
            value: String::new()
        }
    );
    // A list is not a string, even a list of one empty string; an empty list matches nothing.
    assert_eq!(err("filter[name][like][]="), "Name must be a string.");
    assert_eq!(okj(json!({"name": {"like": []}})), Filter::Never);
}

#[test]
fn empty_operands() {
    // Not ignored: `id = ''` matches nothing on a number column.
    assert_eq!(ok("filter[id]="), Filter::Never);
    assert_eq!(ok("filter[id][in][]="), Filter::Never);
    assert_eq!(ok("filter[id][eq]="), Filter::Never);
    assert_eq!(ok("filter[id][lt]="), Filter::Never);
    assert_eq!(ok("filter[active]="), Filter::Never);
    assert_eq!(ok("filter[id][neq]="), Filter::IsNotNull { attr: "id" });
    assert_eq!(ok("filter[id][nin][]="), Filter::IsNotNull { attr: "id" });
    assert_eq!(
        ok("filter[id][in][]=&filter[id][in][]=3"),
        Filter::In {
            attr: "id",
            values: ints(&[3]),
            or_null: false,
            negated: false
        }
    );
    assert_eq!(
        ok("filter[id][nin][]=&filter[id][nin][]=3"),
        Filter::In {
            attr: "id",
            values: ints(&[3]),
            or_null: false,
            negated: true
        }
    );
    // On a string column "" is a value.
    assert_eq!(ok("filter[name]="), str_eq("name", ""));
    assert_eq!(
        ok("filter[name][neq]="),
        cmp("name", CompareOp::Neq, Scalar::Str(String::new()))
    );
    assert_eq!(
        ok("filter[name][in][]="),
        Filter::In {
            attr: "name",
            values: vec![Scalar::Str(String::new())],
            or_null: false,
            negated: false
        }
    );
    // Empty containers in a JSON body.
    assert_eq!(okj(json!({"id": []})), Filter::Never);
    assert_eq!(okj(json!({"name": {}})), Filter::Never);
    assert_eq!(okj(json!({"id": {"in": []}})), Filter::Never);
    assert_eq!(fj(json!({"id": {"nin": []}})), Ok(None));
    assert_eq!(okj(json!({"id": {"eq": []}})), Filter::Never);
    assert_eq!(okj(json!({"id": {"neq": {}}})), Filter::IsNotNull { attr: "id" });
}

#[test]
fn a_plain_array_is_not_an_in_list() {
    assert_eq!(err("filter[id][]=1&filter[id][]=2"), "Id must be an integer.");
}

#[test]
fn empty_filters_set_no_condition() {
    assert_eq!(fq(""), Ok(None));
    assert_eq!(fj(json!(null)), Ok(None));
    assert_eq!(fj(json!({})), Ok(None));
    assert_eq!(fj(json!([])), Ok(None));
    assert_eq!(fj(json!({"and": []})), Ok(None));
    assert_eq!(fj(json!({"or": {}})), Ok(None));
    assert_eq!(fj(json!({"not": {}})), Ok(None));
    assert_eq!(fj(json!({"and": [{}, {}]})), Ok(None));
    assert_eq!(okj(json!({"and": [{}, {"id": 1}]})), int("id", CompareOp::Eq, 1));
    assert_eq!(okj(json!({"or": [{"id": 1}]})), int("id", CompareOp::Eq, 1));
}

// Errors: every message Yii gives.

#[test]
fn error_table() {
    for (query, message) in [
        ("filter[foo]=1", "Unknown filter attribute \"foo\""),
        ("filter[Name]=x", "Unknown filter attribute \"Name\""),
        ("filter[]=x", "Unknown filter attribute \"0\""),
        ("filter[id]=abc", "Id must be an integer."),
        ("filter[weight][gt]=x", "Weight must be a number."),
        ("filter[active]=yes", "Active must be either \"1\" or \"0\"."),
        ("filter[name][like][]=a", "Name must be a string."),
        ("filter[created_at][gt]=2024-13-45", "Created At must be an integer."),
        ("filter[id][like]=1", "\"id\" does not support operator \"like\"."),
        ("filter[id][in]=5", "Operator \"in\" requires multiple operands."),
        ("filter[and]=1", "Operator \"and\" requires multiple operands."),
        ("filter[and][x][id]=1", "Operator \"and\" requires multiple operands."),
        ("filter[eq]=5", "Operator \"eq\" must be used with a search attribute."),
        (
            "filter[id][gt]=1&filter[id][bogus]=2",
            "Condition for \"id\" should be either a value or valid operator specification.",
        ),
        ("filter=abc", "The format of Filter is invalid."),
        ("filter=", "The format of Filter is invalid."),
        ("filter[and][]=", "The format of Filter is invalid."),
    ] {
        assert_eq!(err(query), message, "{query}");
    }
}

#[test]
fn more_errors() {
    for (query, message) in [
        // Keywords are case-sensitive: `GT` makes the map a value.
        ("filter[id][GT]=5", "Id must be an integer."),
        ("filter[name][GT]=5", "Name must be a string."),
        ("filter[id][and][x]=5", "Id must be an integer."),
        ("filter[or]=1", "Operator \"or\" requires multiple operands."),
        (
            "filter[nin]=5",
            "Operator \"nin\" must be used with a search attribute.",
        ),
        (
            "filter[like][name]=5",
            "Operator \"like\" must be used with a search attribute.",
        ),
        ("filter[id][nin]=5", "Operator \"nin\" requires multiple operands."),
        ("filter[id][in]=NULL", "Operator \"in\" requires multiple operands."),
        ("filter[name][gt]=a", "\"name\" does not support operator \"gt\"."),
        ("filter[active][lte]=1", "\"active\" does not support operator \"lte\"."),
        (
            "filter[weight][like]=1",
            "\"weight\" does not support operator \"like\".",
        ),
        ("filter[not]=x", "The format of Filter is invalid."),
        ("filter[or][0]=x", "The format of Filter is invalid."),
        ("filter[id_group]=x", "Group must be an integer."),
        ("filter[group_id]=x", "Group Id must be an integer."),
        ("filter[id][in][]=1&filter[id][in][]=x", "Id must be an integer."),
        ("filter[id][in][][]=1", "Id must be an integer."),
    ] {
        assert_eq!(err(query), message, "{query}");
    }
}

#[test]
fn first_error_depth_first_in_key_order() {
    assert_eq!(err("filter[foo]=1&filter[id]=abc"), "Unknown filter attribute \"foo\"");
    assert_eq!(err("filter[id]=abc&filter[foo]=1"), "Id must be an integer.");
    // An operator's own error comes before the "mixed keys" error.
    assert_eq!(err("filter[id][bogus]=2&filter[id][gt]=x"), "Id must be an integer.");
    assert_eq!(
        err("filter[id][bogus]=2&filter[id][gt]=1"),
        "Condition for \"id\" should be either a value or valid operator specification."
    );
    assert_eq!(
        err("filter[and][0][id]=1&filter[and][1][x]=1&filter[zz]=1"),
        "Unknown filter attribute \"x\""
    );
    // The type check of an operator precedes the operand check.
    assert_eq!(
        err("filter[id][like][]=a"),
        "\"id\" does not support operator \"like\"."
    );
}

// JSON bodies.

#[test]
fn json_body_types() {
    assert_eq!(okj(json!({"id": 5})), int("id", CompareOp::Eq, 5));
    assert_eq!(okj(json!({"id": "5"})), int("id", CompareOp::Eq, 5));
    assert_eq!(
        okj(json!({"weight": 1.5})),
        cmp("weight", CompareOp::Eq, Scalar::Float(1.5))
    );
    assert_eq!(
        okj(json!({"active": true})),
        cmp("active", CompareOp::Eq, Scalar::Bool(true))
    );
    assert_eq!(
        okj(json!({"active": 0})),
        cmp("active", CompareOp::Eq, Scalar::Bool(false))
    );
    assert_eq!(errj(json!({"name": 5})), "Name must be a string.");
    assert_eq!(errj(json!({"id": true})), "Id must be an integer.");
    assert_eq!(errj(json!({"id": 1.5})), "Id must be an integer.");
    assert_eq!(
        okj(json!({"id": {"in": [2, "5"]}})),
        Filter::In {
            attr: "id",
            values: ints(&[2, 5]),
            or_null: false,
            negated: false
        }
    );
}

#[test]
fn json_body_structure() {
    // An object whose keys are all integers is a list.
    assert_eq!(
        okj(json!({"or": {"0": {"id": 1}, "5": {"id": 2}}})),
        Filter::Or(vec![int("id", CompareOp::Eq, 1), int("id", CompareOp::Eq, 2)])
    );
    assert_eq!(
        errj(json!({"or": {"0": {"id": 1}, "01": {"id": 2}}})),
        "Operator \"or\" requires multiple operands."
    );
    assert_eq!(
        errj(json!({"and": null})),
        "Operator \"and\" requires multiple operands."
    );
    assert_eq!(errj(json!({"and": [null]})), "The format of Filter is invalid.");
    assert_eq!(errj(json!({"not": null})), "The format of Filter is invalid.");
    assert_eq!(errj(json!([{"id": 1}])), "Unknown filter attribute \"0\"");
    for scalar in [json!("abc"), json!(5), json!(true), json!(false), json!("")] {
        assert_eq!(errj(scalar), "The format of Filter is invalid.");
    }
    assert_eq!(
        okj(json!({"not": {"or": [{"name": {"like": "a"}}, {"note": "NULL"}]}})),
        Filter::Not(Box::new(Filter::Or(vec![
            Filter::Like {
                attr: "name",
                value: "a".into()
            },
            Filter::IsNull { attr: "note" },
        ])))
    );
}

// Depth.

fn nested_nots(n: usize) -> Value {
    let mut v = json!({"id": 1});
    for _ in 0..n {
        v = json!({ "not": v });
    }
    v
}

#[test]
fn depth_limit() {
    // 63 `not`s put the innermost condition at depth 64: accepted.
    let mut expected = int("id", CompareOp::Eq, 1);
    for _ in 0..63 {
        expected = Filter::Not(Box::new(expected));
    }
    assert_eq!(okj(nested_nots(63)), expected);
    assert_eq!(errj(nested_nots(64)), "The format of Filter is invalid.");

    let mut deep = json!({"id": 1});
    for _ in 0..200 {
        deep = json!({ "and": [deep, {"id": 2}] });
    }
    assert_eq!(errj(deep), "The format of Filter is invalid.");
}

#[test]
fn labels() {
    let a = Attribute::new("created_at", AttrKind::Integer);
    assert_eq!(a.label(), "Created At");
    let b = Attribute::labelled("id_group", AttrKind::Integer, "Group");
    assert_eq!(b.label(), "Group");
    assert_eq!(Attribute::new("groupId", AttrKind::Integer).label(), "Group Id");
    assert_eq!(Attribute::new("id_group", AttrKind::Integer).label(), "Id Group");
}

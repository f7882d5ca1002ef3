//! Property tests: random query strings and JSON bodies never make the parser panic, parsed
//! parameters survive `http_build_query` → `parse_str`, and links re-parse to their parameters.
//! Cases: `PROPTEST_CASES` (proptest's default 256 otherwise).

use devicecloud_query::{
    AttrKind, Attribute, CollectionQuery, CollectionSpec, Filter, Page, Param, Params, QueryError, parse_filter,
};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};

const ATTRIBUTES: &[Attribute] = &[
    Attribute::new("id", AttrKind::Integer),
    Attribute::new("id_group", AttrKind::Integer),
    Attribute::new("name", AttrKind::String),
    Attribute::new("serial_hardware", AttrKind::String),
    Attribute::new("note", AttrKind::String),
    Attribute::new("weight", AttrKind::Number),
    Attribute::new("value", AttrKind::Number),
    Attribute::new("active", AttrKind::Boolean),
    Attribute::new("is_connected", AttrKind::Boolean),
    Attribute::labelled("created_at", AttrKind::Integer, "Created"),
];

const SPEC: CollectionSpec = CollectionSpec {
    attributes: ATTRIBUTES,
    sortable: &["id", "name", "created_at", "weight"],
    default_per_page: 20,
    max_per_page: 1000,
};

const BASE: &str = "http://h/api/v2/items";

/// Words of the collection language, attribute names and values.
const WORDS: &[&str] = &[
    "filter",
    "and",
    "or",
    "not",
    "in",
    "nin",
    "like",
    "gt",
    "gte",
    "lt",
    "lte",
    "eq",
    "neq",
    "NULL",
    "GT",
    "bogus",
    "id",
    "id_group",
    "name",
    "note",
    "weight",
    "value",
    "active",
    "is_connected",
    "created_at",
    "serial_hardware",
    "foo",
    "page",
    "per-page",
    "sort",
    "fields",
    "expand",
    "r",
    "0",
    "1",
    "2",
    "5",
    "44",
    "-3",
    "99",
    "1.5",
    "1e1",
    "abc",
    "-id",
    "id,name",
    "9223372036854775807",
    "",
    "é",
    "日本",
    "😀",
    "\u{FFFD}",
    "a b",
    "x.y",
];

/// Punctuation and escapes that matter to PHP's parser.
const PUNCT: &[&str] = &[
    "[", "]", "[]", "=", "&", "%", "%FF", "%C3%A9", "%5B", "%5D", "%00", "%2", "%zz", "%3D", "%26", "+", ".", " ", ",",
    "-", "#", "%23", "[ ]", "][",
];

/// Units repeated into long runs.
const RUNS: &[&str] = &[
    "[", "]", "[a]", "[]", "a", "%FF", "&x=1", "[and][0]", "[or][]", "1", "+", "é",
];

fn token() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => select(WORDS).prop_map(|w| w.as_bytes().to_vec()),
        6 => select(PUNCT).prop_map(|p| p.as_bytes().to_vec()),
        1 => any::<u8>().prop_map(|b| vec![b]),
        1 => any::<char>().prop_map(|c| c.to_string().into_bytes()),
        1 => (select(RUNS), 1..1200usize).prop_map(|(unit, n)| unit.repeat(n).into_bytes()),
    ]
}

/// One `name[a][b]=value&` pair with grammar words, so that parsing reaches the filter grammar.
fn pair() -> impl Strategy<Value = Vec<u8>> {
    let top = select(
        &[
            "filter", "filter", "filter", "page", "per-page", "sort", "fields", "expand", "x",
        ][..],
    );
    let segment = prop_oneof![
        4 => select(WORDS).prop_map(|w| format!("[{w}]")),
        1 => Just("[]".to_owned()),
        1 => (0..4u8).prop_map(|i| format!("[{i}]")),
    ];
    let value = prop_oneof![
        4 => select(WORDS).prop_map(str::to_owned),
        1 => any::<i64>().prop_map(|i| i.to_string()),
        1 => "[ -~]{0,12}",
    ];
    (top, prop::collection::vec(segment, 0..8), value)
        .prop_map(|(top, segments, value)| format!("{top}{}={value}&", segments.concat()).into_bytes())
}

const ATTRIBUTE_NAMES: &[&str] = &[
    "id",
    "id_group",
    "name",
    "serial_hardware",
    "note",
    "weight",
    "value",
    "active",
    "is_connected",
    "created_at",
];
const OPERATORS: &[&str] = &["eq", "neq", "lt", "lte", "gt", "gte", "in", "nin", "like"];
/// Operands that are valid for most attribute types, plus a few that are not.
const OPERANDS: &[&str] = &["1", "0", "5", "44", "-3", "1.5", "NULL", "", "abc", "1e1"];

/// A filter pair that follows the grammar (`filter[or][][not][id][gt]=5&`), mostly valid.
fn grammar_pair() -> impl Strategy<Value = Vec<u8>> {
    let prefix = prop_oneof![
        Just("[and][]".to_owned()),
        Just("[or][]".to_owned()),
        Just("[not]".to_owned()),
        (0..3u8).prop_map(|i| format!("[and][{i}]")),
        (0..3u8).prop_map(|i| format!("[or][{i}]")),
    ];
    let operator = prop::option::of(select(OPERATORS)).prop_map(|op| match op {
        None => String::new(),
        Some(op @ ("in" | "nin")) => format!("[{op}][]"),
        Some(op) => format!("[{op}]"),
    });
    (
        prop::collection::vec(prefix, 0..5),
        select(ATTRIBUTE_NAMES),
        operator,
        select(OPERANDS),
    )
        .prop_map(|(prefixes, attr, op, value)| {
            format!("filter{}[{attr}]{op}={value}&", prefixes.concat()).into_bytes()
        })
}

/// A JSON condition that follows the grammar, mostly valid.
fn grammar_condition() -> impl Strategy<Value = Value> {
    let operand = prop_oneof![
        4 => select(OPERANDS).prop_map(Value::from),
        2 => (-3i64..50).prop_map(Value::from),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(Value::Null),
        1 => Just(Value::from(1.5)),
    ];
    let leaf = (
        select(ATTRIBUTE_NAMES),
        prop::option::of(select(OPERATORS)),
        prop::collection::vec(operand, 1..4),
    )
        .prop_map(|(attr, op, mut operands)| {
            let first = operands.first().cloned().unwrap_or(Value::Null);
            let condition = match op {
                None => first,
                Some(op @ ("in" | "nin")) => object([(op, Value::Array(std::mem::take(&mut operands)))]),
                Some(op) => object([(op, first)]),
            };
            object([(attr, condition)])
        });
    leaf.prop_recursive(5, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|c| object([("and", Value::Array(c))])),
            prop::collection::vec(inner.clone(), 0..4).prop_map(|c| object([("or", Value::Array(c))])),
            inner.clone().prop_map(|c| object([("not", c)])),
            // Several keys at one level.
            (inner.clone(), inner).prop_map(|(a, b)| match (a, b) {
                (Value::Object(mut a), Value::Object(b)) => {
                    a.extend(b);
                    Value::Object(a)
                }
                (a, _) => a,
            }),
        ]
    })
}

fn query() -> impl Strategy<Value = Vec<u8>> {
    let mixed = prop::collection::vec(prop_oneof![2 => grammar_pair(), 3 => pair(), 2 => token()], 0..40);
    let grammatical = prop::collection::vec(prop_oneof![6 => grammar_pair(), 1 => pair()], 0..12);
    prop_oneof![mixed, grammatical].prop_map(|parts| parts.concat())
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        2 => (-3i64..60).prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_map(Value::from),
        4 => select(WORDS).prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(6, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((select(WORDS), inner), 0..5).prop_map(|members| {
                Value::Object(
                    members
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

fn object<const N: usize>(members: [(&str, Value); N]) -> Value {
    Value::Object(members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// A value wrapped in a chain of `and`/`or`/`not`/attribute/array levels, up to 150 deep. The
/// chain is drawn from one seed rather than a vector of choices, which keeps generation cheap.
fn deep_value() -> impl Strategy<Value = Value> {
    (json_value(), 0..150usize, 1..u64::MAX).prop_map(|(mut v, depth, mut seed)| {
        for _ in 0..depth {
            // xorshift64: a cheap, deterministic sequence of wrapper kinds.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // Built by hand: `json!` would deep-copy `v` at every level.
            v = match seed % 6 {
                0 => object([("and", Value::Array(vec![v]))]),
                1 => object([("or", object([("0", v), ("1", object([("id", Value::from(1))]))]))]),
                2 => object([("not", v)]),
                3 => object([("id", v)]),
                4 => Value::Array(vec![v]),
                _ => object([("name", object([("in", v)]))]),
            };
        }
        v
    })
}

fn body() -> impl Strategy<Value = Option<Value>> {
    let object = (
        prop::option::of(prop_oneof![2 => grammar_condition(), 1 => json_value(), 1 => deep_value()]),
        prop::option::of(json_leaf()),
        prop::option::of(json_leaf()),
        prop::option::of(json_leaf()),
        prop::option::of(json_value()),
    )
        .prop_map(|(filter, page, per_page, sort, extra)| {
            let mut m = Map::new();
            let mut put = |k: &str, v: Option<Value>| {
                if let Some(v) = v {
                    m.insert(k.to_owned(), v);
                }
            };
            put("filter", filter);
            put("page", page);
            put("per-page", per_page);
            put("sort", sort);
            put("extra", extra);
            Some(Value::Object(m))
        });
    prop_oneof![3 => Just(None), 1 => json_value().prop_map(Some), 4 => object]
}

fn total() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 0..300u64, 1 => any::<u64>()]
}

/// Whether `http_build_query` → `parse_str` can reproduce these parameters exactly: keys PHP
/// would not rewrite, no empty maps (PHP writes nothing for them), within PHP's limits.
fn well_formed(p: &Params) -> bool {
    fn value_ok(v: &Param, depth: usize) -> bool {
        match v {
            Param::Scalar(_) => true,
            Param::Map(m) => {
                depth <= 64
                    && !m.is_empty()
                    && m.iter()
                        .all(|(k, v)| !k.is_empty() && k != " " && !k.contains([']', '\0']) && value_ok(v, depth + 1))
            }
        }
    }
    fn leaves(p: &Params) -> usize {
        p.iter()
            .map(|(_, v)| match v {
                Param::Scalar(_) => 1,
                Param::Map(m) => leaves(m),
            })
            .sum()
    }
    leaves(p) <= 1000
        && p.iter()
            .all(|(k, v)| !k.is_empty() && !k.starts_with(' ') && !k.contains(['.', ' ', '[', '\0']) && value_ok(v, 1))
}

/// Structural promises of the AST.
fn check_filter(f: &Filter, depth: usize) {
    assert!(depth <= 64, "AST deeper than the input limit");
    match f {
        Filter::And(parts) | Filter::Or(parts) => {
            assert!(parts.len() >= 2, "a conjunction of {} parts", parts.len());
            for p in parts {
                check_filter(p, depth + 1);
            }
        }
        Filter::Not(inner) => check_filter(inner, depth + 1),
        Filter::In { values, .. } => assert!(!values.is_empty()),
        _ => {}
    }
}

/// The parameters a link to `target` must carry.
fn expected_link_params(params: &Params, target: u64, page: &Page) -> Params {
    let mut p = params.clone();
    for key in ["0", "r", "#"] {
        p.remove(key);
    }
    p.set("page", Param::Scalar(target.to_string()));
    if page.per_page == SPEC.default_per_page {
        p.remove("per-page");
    } else {
        p.set("per-page", Param::Scalar(page.per_page.to_string()));
    }
    p
}

fn check_links(q: &CollectionQuery, page: &Page) {
    let links = q.links(BASE, page);
    let rels: Vec<&str> = links.iter().map(|(r, _)| *r).collect();
    assert_eq!(rels.first(), Some(&"self"));
    for (rel, href) in &links {
        let target = match *rel {
            "self" => page.current_page,
            "first" => 1,
            "last" => page.page_count,
            "prev" => page.current_page - 1,
            "next" => page.current_page + 1,
            other => panic!("unexpected rel {other}"),
        };
        let query = href
            .strip_prefix(BASE)
            .and_then(|r| r.strip_prefix('?'))
            .expect("href is base?query");
        assert!(query.is_ascii(), "href not ASCII: {query}");
        let expected = expected_link_params(&q.link_params, target, page);
        if well_formed(&expected) {
            assert_eq!(Params::parse_query(query.as_bytes()), expected, "{rel} {href}");
        }
    }
}

proptest! {
    #[test]
    fn parse_query_round_trips(raw in query()) {
        let p = Params::parse_query(&raw);
        prop_assert!(well_formed(&p), "parse produced {p:?}");
        let rebuilt = p.to_query_string();
        prop_assert_eq!(&Params::parse_query(rebuilt.as_bytes()), &p, "via {}", rebuilt);
    }

    #[test]
    fn collection_parse_never_panics(raw in query(), body in body(), total in total()) {
        match CollectionQuery::parse(&raw, body.as_ref(), &SPEC, devicecloud_query::DEFAULT_MAX_LIST_VALUES) {
            Ok(q) => {
                if let Some(f) = &q.filter {
                    check_filter(f, 1);
                }
                prop_assert!(q.page.per_page >= 1 && q.page.per_page <= SPEC.max_per_page);
                let page = q.page.resolve(total);
                prop_assert!(page.current_page >= 1 && page.current_page <= page.page_count.max(1));
                prop_assert_eq!(page.page_count, total.div_ceil(page.per_page));
                check_links(&q, &page);
            }
            Err(QueryError::Filter(m)) => prop_assert!(!m.is_empty()),
            Err(QueryError::BadBody(_)) => prop_assert!(body.is_some_and(|b| !b.is_object())),
        }
    }

    #[test]
    fn parse_filter_never_panics(v in prop_oneof![grammar_condition(), json_value(), deep_value()]) {
        if let Ok(Some(f)) = parse_filter(&v, ATTRIBUTES, devicecloud_query::DEFAULT_MAX_LIST_VALUES) {
            check_filter(&f, 1);
        }
        if let Some(p) = Params::from_json(&v) {
            let _ = p.to_query_string();
            let _ = parse_filter(&p.to_json(), ATTRIBUTES, devicecloud_query::DEFAULT_MAX_LIST_VALUES);
        }
    }
}

//! Oversized and over-nested input: 10,000-character filters and 200-deep `and`/`or` nesting
//! in the query string and in a JSON body end in `Ok` or a `QueryError`, on a small stack.

use devicecloud_query::{AttrKind, Attribute, CollectionQuery, CollectionSpec, Filter, QueryError};
use serde_json::{Value, json};

const ATTRIBUTES: &[Attribute] = &[
    Attribute::new("id", AttrKind::Integer),
    Attribute::new("name", AttrKind::String),
    Attribute::new("weight", AttrKind::Number),
];

const SPEC: CollectionSpec = CollectionSpec {
    attributes: ATTRIBUTES,
    sortable: &["id"],
    default_per_page: 20,
    max_per_page: 50,
};

/// Runs `f` on a 512 KiB stack: bounded recursion fits easily, unbounded would not.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic, no overflow");
}

fn parse(query: &str, body: Option<Value>) -> Result<CollectionQuery, QueryError> {
    CollectionQuery::parse(
        query.as_bytes(),
        body.as_ref(),
        &SPEC,
        devicecloud_query::DEFAULT_MAX_LIST_VALUES,
    )
}

fn invalid() -> QueryError {
    QueryError::Filter("The format of Filter is invalid.".into())
}

#[test]
fn deep_query_strings() {
    on_small_stack(|| {
        // 200 levels of and/or: far past PHP's 64, so the whole `filter` parameter is dropped.
        let and = format!("filter{}[id]=1", "[and][0]".repeat(100));
        let q = parse(&and, None).unwrap();
        assert_eq!(q.filter, None);
        assert!(!q.link_params.contains_key("filter"));
        let mixed = format!("filter{}[id]=1&page=2", "[or][][and][0]".repeat(50));
        assert_eq!(parse(&mixed, None).unwrap().filter, None);
        // Just inside the limit: 64 brackets.
        let inside = format!("filter{}[id]=1", "[not]".repeat(63));
        let q = parse(&inside, None).unwrap();
        let mut depth = 0;
        let mut f = q.filter.as_ref();
        while let Some(Filter::Not(inner)) = f {
            depth += 1;
            f = Some(inner);
        }
        assert_eq!(depth, 63);
        // Long runs of brackets.
        // Without a closing bracket PHP would rename the parameter and drop the filter; an
        // attribute is never ignored, so this is an unknown one.
        assert!(matches!(
            parse(&format!("filter{}=1", "[".repeat(10_000)), None),
            Err(QueryError::Filter(m)) if m.starts_with("Unknown filter attribute")
        ));
        assert!(parse(&format!("filter{}=1", "[]".repeat(5_000)), None).is_ok());
        assert_eq!(
            parse(&format!("filter={}", "]".repeat(10_000)), None).unwrap_err(),
            invalid()
        );
    });
}

#[test]
fn long_query_string_filters() {
    on_small_stack(|| {
        // A `like` value holds at most 256 characters; a longer one is a filter error.
        let like = format!("filter[name][like]={}", "a".repeat(256));
        match parse(&like, None).unwrap().filter {
            Some(Filter::Like { value, .. }) => assert_eq!(value.len(), 256),
            other => panic!("{other:?}"),
        }
        let like = format!("filter[name][like]={}", "a".repeat(10_000));
        match parse(&like, None) {
            Err(QueryError::Filter(message)) => assert!(message.contains("longer than 256"), "{message}"),
            other => panic!("{other:?}"),
        }
        // More comparisons than the database can take are refused with a clear message.
        let many: String = (0..1_000).map(|i| format!("filter[or][][id]={i}&")).collect();
        assert!(many.len() > 10_000);
        match parse(&many, None) {
            Err(QueryError::Filter(message)) => assert!(message.contains("too many conditions"), "{message}"),
            other => panic!("{other:?}"),
        }
        let most = devicecloud_query::filter::MAX_CONDITIONS;
        let allowed: String = (0..most).map(|i| format!("filter[or][][id]={i}&")).collect();
        match parse(&allowed, None).unwrap().filter {
            Some(Filter::Or(parts)) => assert_eq!(parts.len(), most),
            other => panic!("{other:?}"),
        }
        let unknown = format!("filter[{}]=1", "x".repeat(10_000));
        assert!(
            matches!(parse(&unknown, None), Err(QueryError::Filter(m)) if m.starts_with("Unknown filter attribute"))
        );
        let bad = format!("filter[id]={}", "9".repeat(10_000));
        assert!(parse(&bad, None).is_ok());
        let junk = "%FF[&]=%".repeat(1_250);
        let _ = parse(&junk, None);
    });
}

#[test]
fn deep_json_bodies() {
    on_small_stack(|| {
        let mut and_or = json!({"id": 1});
        for i in 0..200 {
            and_or = if i % 2 == 0 {
                json!({"and": [and_or]})
            } else {
                json!({"or": [and_or, {"id": 2}]})
            };
        }
        assert_eq!(parse("", Some(json!({"filter": and_or}))).unwrap_err(), invalid());

        let mut nots = json!({"id": 1});
        for _ in 0..200 {
            nots = json!({ "not": nots });
        }
        assert_eq!(parse("", Some(json!({"filter": nots.clone()}))).unwrap_err(), invalid());
        // The URL's filter wins, so the deep body filter is never read.
        assert!(parse("filter[id]=1", Some(json!({"filter": nots}))).is_ok());

        let mut arrays = json!(1);
        for _ in 0..200 {
            arrays = json!([arrays]);
        }
        assert_eq!(
            parse("", Some(json!({"filter": {"id": arrays.clone()}, "page": arrays}))).unwrap_err(),
            QueryError::Filter("Id must be an integer.".into())
        );
    });
}

#[test]
fn long_json_filters() {
    on_small_stack(|| {
        let values: Vec<Value> = (0..1_000).map(Value::from).collect();
        match parse("", Some(json!({"filter": {"id": {"in": values}}})))
            .unwrap()
            .filter
        {
            Some(Filter::In { values, .. }) => assert_eq!(values.len(), 1_000),
            other => panic!("{other:?}"),
        }
        // One value more than a list may hold is a filter error (422); 40,000 pass the size of a
        // whole filter before the list is even read.
        for (n, says) in [(1_001, "at most 1000"), (40_000, "larger than 64 KiB")] {
            let values: Vec<Value> = (0..n).map(Value::from).collect();
            match parse("", Some(json!({"filter": {"id": {"nin": values}}}))) {
                Err(QueryError::Filter(message)) => assert!(message.contains(says), "{message}"),
                other => panic!("{n} values: {other:?}"),
            }
        }
        // Many lists within the limit each still cannot pass the total a statement can bind.
        let lists: Vec<Value> = (0..11)
            .map(|_| json!({"id": {"in": (0..1_000).collect::<Vec<i64>>()}}))
            .collect();
        match parse("", Some(json!({"filter": {"or": lists}}))) {
            Err(QueryError::Filter(message)) => assert!(message.contains("too many values"), "{message}"),
            other => panic!("{other:?}"),
        }
        let name = "n".repeat(10_000);
        assert!(parse("", Some(json!({"filter": {name: 1}}))).is_err());
        let ors: Vec<Value> = (0..2_000).map(|i| json!({"id": i})).collect();
        assert!(matches!(
            parse("", Some(json!({"filter": {"or": ors}}))),
            Err(QueryError::Filter(_))
        ));
    });
}

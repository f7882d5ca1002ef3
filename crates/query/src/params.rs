//! PHP-style ordered parameter tree: what PHP's `$_GET` holds, read like `parse_str` and written
//! back like `http_build_query`, so that `_links` carry the request's parameters as Yii2 does.

mod build_query;
mod parse_str;

use serde_json::{Map, Value};

/// Deepest bracket nesting PHP accepts in one parameter name (`max_input_nesting_level`).
pub const MAX_NESTING: usize = 64;
/// Most `name=value` pairs PHP reads from one query string (`max_input_vars`).
pub const MAX_INPUT_VARS: usize = 1000;

/// One parameter value: a string, or a nested map (`a[b]=…`).
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    /// A plain value; PHP keeps every query-string value as a string.
    Scalar(String),
    /// A bracketed group, like a PHP array.
    Map(Params),
}

impl Param {
    /// The string value, if this is a scalar (Yii's `is_scalar` checks).
    pub fn as_scalar(&self) -> Option<&str> {
        match self {
            Param::Scalar(s) => Some(s),
            Param::Map(_) => None,
        }
    }

    /// The nested map, if this is one.
    pub fn as_map(&self) -> Option<&Params> {
        match self {
            Param::Map(m) => Some(m),
            Param::Scalar(_) => None,
        }
    }

    /// The value as JSON: a scalar as a string, a map as an object.
    pub fn to_json(&self) -> Value {
        param_json(self, 1)
    }
}

/// An ordered map of parameters: keys unique, ordered by first appearance (a PHP array).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Params(pub Vec<(String, Param)>);

impl Params {
    /// An empty parameter map.
    pub fn new() -> Self {
        Params::default()
    }

    /// PHP `parse_str` semantics on a raw query string (the bytes after `?`): pairs split on
    /// `&`, `+` as space, percent-decoding, non-UTF-8 bytes replaced by U+FFFD; bracket syntax
    /// `a[b][c]=v`, `a[]=v` appending at the next integer index; a repeated key's last value
    /// wins in the first one's place; bare `foo` is `foo=""`; `.` and space in the top-level
    /// name become `_`; malformed brackets as PHP reads them; a name nested deeper than 64
    /// levels removes its top-level parameter (as PHP does); pairs after the 1000th are ignored.
    pub fn parse_query(raw: &[u8]) -> Params {
        parse_str::parse(raw)
    }

    /// Whether `raw` holds more than [`MAX_INPUT_VARS`] pairs: PHP would drop the rest
    /// silently, so the service refuses such a query string instead (docs/operations.md,
    /// "Limits").
    pub fn has_too_many_pairs(raw: &[u8]) -> bool {
        parse_str::has_too_many_pairs(raw)
    }

    /// The attribute of the first `filter[…]` parameter whose name PHP would mangle (a NUL
    /// byte in it, or no closing bracket), so that it is refused rather than ignored.
    pub fn mangled_filter_name(raw: &[u8]) -> Option<String> {
        parse_str::mangled_filter_name(raw)
    }

    /// Parameters from a JSON object body, as PHP holds a decoded body: null members dropped,
    /// `true` → "1", `false` → "0", numbers → their JSON text, arrays → maps keyed "0", "1", …,
    /// objects → maps. Members nested deeper than [`MAX_NESTING`] are dropped.
    /// `None` when the value is not an object.
    pub fn from_json(v: &Value) -> Option<Params> {
        match v {
            Value::Object(map) => Some(json_members(map.iter().map(|(k, v)| (k.clone(), v)), 0)),
            _ => None,
        }
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&Param> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value under `key` if it is a scalar.
    pub fn get_scalar(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Param::as_scalar)
    }

    /// Whether `key` is present, whatever its value.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Sets `key`: replaced in place when present (PHP keeps an array key's position),
    /// appended otherwise.
    pub fn set(&mut self, key: &str, value: Param) {
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some((_, slot)) => *slot = value,
            None => self.0.push((key.to_owned(), value)),
        }
    }

    /// Removes `key` if present.
    pub fn remove(&mut self, key: &str) {
        self.0.retain(|(k, _)| k != key);
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Param)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of top-level entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// PHP `http_build_query` (RFC 1738 form encoding): space → `+`, bytes other than
    /// `A-Za-z0-9-_.` → `%XX` (uppercase, UTF-8), nested keys as `a%5Bb%5D%5B0%5D=v`,
    /// empty maps left out, pairs joined with `&`.
    pub fn to_query_string(&self) -> String {
        build_query::build(self)
    }

    /// The tree as JSON for the filter parser: scalars → strings, maps → objects.
    pub fn to_json(&self) -> Value {
        Value::Object(params_json(self, 1))
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.0.iter().position(|(k, _)| k == key)
    }
}

/// JSON of one parameter whose map (if it is one) sits `depth` brackets deep. Maps deeper than
/// anything PHP or [`Params::from_json`] produce come out empty, so hand-built trees cannot
/// drive the recursion arbitrarily deep.
fn param_json(p: &Param, depth: usize) -> Value {
    match p {
        Param::Scalar(s) => Value::String(s.clone()),
        Param::Map(_) if depth > MAX_NESTING => Value::Object(Map::new()),
        Param::Map(m) => Value::Object(params_json(m, depth + 1)),
    }
}

fn params_json(p: &Params, depth: usize) -> Map<String, Value> {
    p.0.iter().map(|(k, v)| (k.clone(), param_json(v, depth))).collect()
}

/// Members of a JSON container as parameters; `depth` is the bracket depth of the container.
fn json_members<'a>(members: impl Iterator<Item = (String, &'a Value)>, depth: usize) -> Params {
    Params(
        members
            .filter_map(|(k, v)| json_param(v, depth + 1).map(|p| (k, p)))
            .collect(),
    )
}

/// One JSON value as a parameter placed `depth` brackets deep; `None` when PHP would have
/// nothing there (null) or the nesting is beyond [`MAX_NESTING`].
fn json_param(v: &Value, depth: usize) -> Option<Param> {
    match v {
        Value::Null => None,
        Value::Bool(b) => Some(Param::Scalar(if *b { "1" } else { "0" }.to_owned())),
        Value::Number(n) => Some(Param::Scalar(n.to_string())),
        Value::String(s) => Some(Param::Scalar(s.clone())),
        Value::Array(_) | Value::Object(_) if depth > MAX_NESTING => None,
        Value::Array(items) => Some(Param::Map(json_members(
            items.iter().enumerate().map(|(i, v)| (i.to_string(), v)),
            depth,
        ))),
        Value::Object(map) => Some(Param::Map(json_members(map.iter().map(|(k, v)| (k.clone(), v)), depth))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn s(v: &str) -> Param {
        Param::Scalar(v.to_owned())
    }

    #[test]
    fn set_replaces_in_place_and_appends() {
        let mut p = Params::parse_query(b"a=1&b=2");
        p.set("a", s("x"));
        p.set("c", s("3"));
        assert_eq!(p.to_query_string(), "a=x&b=2&c=3");
        p.remove("b");
        assert_eq!(p.to_query_string(), "a=x&c=3");
        assert!(p.contains_key("a") && !p.contains_key("b"));
        assert_eq!(p.get_scalar("c"), Some("3"));
    }

    #[test]
    fn from_json_converts_like_php() {
        let body = json!({
            "filter": {"id": {"in": [2, 5]}},
            "per-page": 1,
            "gone": null,
            "t": true,
            "f": false,
            "x": 1.5,
            "list": [1, null, "z"]
        });
        let p = Params::from_json(&body).unwrap();
        assert_eq!(
            p.to_query_string(),
            "filter%5Bid%5D%5Bin%5D%5B0%5D=2&filter%5Bid%5D%5Bin%5D%5B1%5D=5&per-page=1&t=1&f=0&x=1.5\
             &list%5B0%5D=1&list%5B2%5D=z"
        );
        assert_eq!(Params::from_json(&json!([1])), None);
        assert_eq!(Params::from_json(&json!("x")), None);
    }

    #[test]
    fn from_json_drops_members_nested_too_deep() {
        let mut v = json!("leaf");
        for _ in 0..200 {
            v = json!({ "a": v });
        }
        let p = Params::from_json(&json!({ "deep": v, "k": "v" })).unwrap();
        // "deep" itself is one bracket deep; its chain is cut at MAX_NESTING.
        assert_eq!(p.get_scalar("k"), Some("v"));
        let mut depth = 0;
        let mut cur = p.get("deep");
        while let Some(Param::Map(m)) = cur {
            depth += 1;
            cur = m.get("a");
        }
        assert_eq!(depth, MAX_NESTING);
    }

    #[test]
    fn to_json_keeps_order_and_strings() {
        let p = Params::parse_query(b"filter[b]=1&filter[a][gt]=2&x=y");
        assert_eq!(p.to_json(), json!({"filter": {"b": "1", "a": {"gt": "2"}}, "x": "y"}));
        assert_eq!(
            serde_json::to_string(&p.to_json()).unwrap(),
            r#"{"filter":{"b":"1","a":{"gt":"2"}},"x":"y"}"#
        );
        assert_eq!(s("v").to_json(), json!("v"));
    }
}

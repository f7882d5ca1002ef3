//! Yii2's `fields` / `expand` (`Serializer::getRequestedFields`, `ArrayableTrait::toArray`) on
//! serde_json records (docs/api.md, "Collections").

use serde_json::{Map, Value};

/// PCRE `\s`: the ASCII whitespace Yii's `/\s*,\s*/` strips next to commas.
fn is_pcre_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0B' | '\x0C')
}

/// Splits a `fields`/`expand` value like `preg_split('/\s*,\s*/', …, PREG_SPLIT_NO_EMPTY)`:
/// whitespace next to a comma is dropped, empty pieces are skipped, whitespace at the very
/// start or end is kept (`" id"` stays `" id"`).
pub fn parse_list(raw: &str) -> Vec<String> {
    let pieces: Vec<&str> = raw.split(',').collect();
    let last = pieces.len().saturating_sub(1);
    pieces
        .iter()
        .enumerate()
        .map(|(i, piece)| {
            let piece = if i > 0 {
                piece.trim_start_matches(is_pcre_space)
            } else {
                piece
            };
            if i < last {
                piece.trim_end_matches(is_pcre_space)
            } else {
                piece
            }
        })
        .filter(|piece| !piece.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Root names of a dotted list (`"group.label"` → `"group"`), deduplicated, in order
/// (`ArrayableTrait::extractRootFields`). As in Yii, a `*` among them means "everything" and
/// gives an empty list, which [`select`] reads as all fields; for `expand` it means none.
pub fn root_names(list: &[String]) -> Vec<String> {
    let mut roots: Vec<String> = Vec::new();
    for name in list {
        let root = name.split_once('.').map_or(name.as_str(), |(root, _)| root);
        if root == "*" {
            return Vec::new();
        }
        if !roots.iter().any(|r| r == root) {
            roots.push(root.to_owned());
        }
    }
    roots
}

/// The nested list for one root (`ArrayableTrait::extractFieldsFor`): `["group.label",
/// "group.latestData.x"]` with root `"group"` → `["label", "latestData.x"]`, deduplicated.
pub fn nested(list: &[String], root: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in list {
        let rest = name.strip_prefix(root).and_then(|r| r.strip_prefix('.'));
        if let Some(rest) = rest
            && !out.iter().any(|o| o == rest)
        {
            out.push(rest.to_owned());
        }
    }
    out
}

/// One record as Yii's `toArray` shapes it. `regular` holds the record's fields in declaration
/// order. With `fields` absent or empty (or containing `*`) all are kept; otherwise those whose
/// name is among [`root_names`]`(fields)`, still in declaration order (not request order);
/// unknown names are ignored. Then the already-computed `expanded` relations are appended in
/// the order given (a name already present is replaced in place). When nothing remains the
/// result is an empty JSON array `[]` — Yii's quirk — otherwise an object.
pub fn select(regular: Map<String, Value>, fields: Option<&[String]>, expanded: Vec<(String, Value)>) -> Value {
    let roots = fields.map(root_names).unwrap_or_default();
    let mut out: Map<String, Value> = if roots.is_empty() {
        regular
    } else {
        regular
            .into_iter()
            .filter(|(name, _)| roots.iter().any(|r| r == name))
            .collect()
    };
    for (name, value) in expanded {
        out.insert(name, value);
    }
    if out.is_empty() {
        Value::Array(Vec::new())
    } else {
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list(raw: &str) -> Vec<String> {
        parse_list(raw)
    }

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    fn item() -> Map<String, Value> {
        obj(json!({"id": 2, "name": "banana_2", "price": "1.5", "id_group": 2}))
    }

    fn group() -> Map<String, Value> {
        obj(json!({"id": 2, "label": "Beta"}))
    }

    #[test]
    fn lists_split_like_preg_split() {
        assert_eq!(list("id,name"), ["id", "name"]);
        assert_eq!(list("id , name"), ["id", "name"]);
        assert_eq!(list("id,\tname\n,x"), ["id", "name", "x"]);
        assert_eq!(list(" id"), [" id"]);
        assert_eq!(list("id "), ["id "]);
        assert_eq!(list("id,,name,"), ["id", "name"]);
        assert_eq!(list(", ,"), Vec::<String>::new());
        assert_eq!(list(""), Vec::<String>::new());
        assert_eq!(list("a\u{A0},b"), ["a\u{A0}", "b"]);
    }

    #[test]
    fn roots_and_nested() {
        let l = list("id,group.label,group.latestData.name,group.label");
        assert_eq!(root_names(&l), ["id", "group"]);
        assert_eq!(nested(&l, "group"), ["label", "latestData.name"]);
        assert_eq!(nested(&l, "id"), Vec::<String>::new());
        assert_eq!(nested(&list("groupX.a,group.b"), "group"), ["b"]);
        assert_eq!(root_names(&list("id,*")), Vec::<String>::new());
    }

    #[test]
    fn all_fields_without_a_list() {
        assert_eq!(select(item(), None, vec![]), Value::Object(item()));
        assert_eq!(select(item(), Some(&[]), vec![]), Value::Object(item()));
        assert_eq!(select(item(), Some(&list("*")), vec![]), Value::Object(item()));
    }

    #[test]
    fn declaration_order_not_request_order() {
        let v = select(item(), Some(&list("name,id")), vec![]);
        assert_eq!(serde_json::to_string(&v).unwrap(), r#"{"id":2,"name":"banana_2"}"#);
    }

    #[test]
    fn nothing_matching_is_an_empty_array() {
        assert_eq!(select(item(), Some(&list("bogus")), vec![]), json!([]));
        assert_eq!(select(Map::new(), None, vec![]), json!([]));
    }

    #[test]
    fn expand_is_independent_of_fields() {
        let fields = list("id");
        let expanded = vec![("group".to_owned(), select(group(), None, vec![]))];
        let v = select(item(), Some(&fields), expanded);
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"id":2,"group":{"id":2,"label":"Beta"}}"#
        );
    }

    #[test]
    fn dotted_fields_reach_into_expanded_relations() {
        // fields=id,group.label&expand=group → {"id":2,"group":{"label":"Beta"}}
        let fields = list("id,group.label");
        let g = select(group(), Some(&nested(&fields, "group")), vec![]);
        let v = select(item(), Some(&fields), vec![("group".into(), g)]);
        assert_eq!(v, json!({"id": 2, "group": {"label": "Beta"}}));
        // Without the expand, group is no regular field.
        assert_eq!(select(item(), Some(&fields), vec![]), json!({"id": 2}));

        // expand=group.latestData&fields=id,group.id,group.latestData.name
        let fields = list("id,group.id,group.latestData.name");
        let expand = list("group.latestData");
        assert_eq!(root_names(&expand), ["group"]);
        let group_fields = nested(&fields, "group");
        let group_expand = nested(&expand, "group");
        assert_eq!(root_names(&group_expand), ["latestData"]);
        let latest = select(
            obj(json!({"name": "banana_44", "value": 3})),
            Some(&nested(&group_fields, "latestData")),
            vec![],
        );
        let g = select(group(), Some(&group_fields), vec![("latestData".into(), latest)]);
        let v = select(item(), Some(&fields), vec![("group".into(), g)]);
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"id":2,"group":{"id":2,"latestData":{"name":"banana_44"}}}"#
        );
    }

    #[test]
    fn an_expanded_name_replaces_a_regular_field_in_place() {
        let v = select(item(), None, vec![("id".into(), json!("x"))]);
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"id":"x","name":"banana_2","price":"1.5","id_group":2}"#
        );
    }
}

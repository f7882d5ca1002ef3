//! PHP's query-string reader (`php_default_treat_data` + `php_register_variable_ex`, PHP 8.2),
//! which decides what Yii2 sees in `$_GET` and therefore what `_links` carry.

use super::{MAX_INPUT_VARS, MAX_NESTING, Param, Params};
use crate::php;

/// Reads a raw query string into a parameter tree, pair by pair.
pub(super) fn parse(raw: &[u8]) -> Params {
    let mut params = Params::default();
    // PHP tokenises with strtok: empty pieces (`a=1&&b=2`) are skipped and not counted.
    let pairs = raw.split(|&b| b == b'&').filter(|t| !t.is_empty());
    for pair in pairs.take(MAX_INPUT_VARS) {
        let mut halves = pair.splitn(2, |&b| b == b'=');
        let name = url_decode(halves.next().unwrap_or_default());
        let value = url_decode(halves.next().unwrap_or_default());
        // The name is a C string from here on: a decoded NUL ends it. Values are binary-safe.
        let name: &[u8] = match name.iter().position(|&b| b == 0) {
            Some(nul) => name.get(..nul).unwrap_or_default(),
            None => &name,
        };
        register(
            &mut params,
            &String::from_utf8_lossy(name),
            String::from_utf8_lossy(&value).into_owned(),
        );
    }
    params
}

/// The first `filter[…]` parameter name that PHP would silently mangle (a NUL byte in it, which
/// ends the name, or no closing bracket), shown with its NUL bytes as `\0`. Such a name would
/// otherwise drop the whole filter and match every record.
pub(super) fn mangled_filter_name(raw: &[u8]) -> Option<String> {
    let pairs = raw.split(|&b| b == b'&').filter(|t| !t.is_empty());
    for pair in pairs.take(MAX_INPUT_VARS) {
        let name = url_decode(pair.split(|&b| b == b'=').next().unwrap_or_default());
        let Some(rest) = name.strip_prefix(b"filter[".as_slice()) else {
            continue;
        };
        if name.contains(&0) || !rest.contains(&b']') {
            let inner = rest.split(|&b| b == b']').next().unwrap_or_default();
            return Some(String::from_utf8_lossy(inner).replace('\0', "\\0"));
        }
    }
    None
}

/// `php_url_decode`: `+` → space, `%XX` → byte, a `%` without two hex digits stays literal.
fn url_decode(raw: &[u8]) -> Vec<u8> {
    fn hex(b: Option<&u8>) -> Option<u8> {
        let b = *b?;
        (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        match b {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => match (hex(raw.get(i + 1)), hex(raw.get(i + 2))) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 3;
                }
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Replaces what PHP cannot keep in a variable name.
fn underscored(s: &str, also_bracket: bool) -> String {
    s.chars()
        .map(|c| match c {
            ' ' | '.' => '_',
            '[' if also_bracket => '_',
            c => c,
        })
        .collect()
}

/// Stores one decoded `name=value` the way `php_register_variable_ex` does.
fn register(params: &mut Params, name: &str, value: String) {
    // Leading spaces of the name are ignored.
    let name = name.trim_start_matches(' ');
    let (top, mut rest) = match name.split_once('[') {
        Some((top, rest)) => (underscored(top, false), rest),
        None => {
            let top = underscored(name, false);
            if !top.is_empty() {
                params.set(&top, Param::Scalar(value));
            }
            return;
        }
    };
    if top.is_empty() {
        return;
    }
    // One entry per bracket group: `Some(key)`, or `None` for `[]` (append).
    let mut path: Vec<Option<String>> = Vec::new();
    loop {
        if path.len() >= MAX_NESTING {
            // PHP drops the whole top-level variable, including what earlier pairs put in it.
            params.remove(&top);
            return;
        }
        // `rest` starts right after a '['. One space before ']' still means "append".
        let after = if let Some(r) = rest.strip_prefix(' ').unwrap_or(rest).strip_prefix(']') {
            path.push(None);
            r
        } else if let Some((key, r)) = rest.split_once(']') {
            path.push(Some(key.to_owned()));
            r
        } else if path.is_empty() {
            // `a[b=1`: no closing bracket, so the name is not an array: `a_b`.
            let name = format!("{top}_{}", underscored(rest, true));
            params.set(&name, Param::Scalar(value));
            return;
        } else {
            // `a[x][b=1`: the unterminated group is ignored, `a[x]` gets the value.
            break;
        };
        // Anything after `]` that does not open another group is ignored (`a[b]c=1` → a[b]).
        match after.strip_prefix('[') {
            Some(r) => rest = r,
            None => break,
        }
    }
    assign(params, top, &path, value);
}

/// Walks `top` and then `path`, creating maps (a scalar in the way becomes an empty map in its
/// place), and stores the value at the end.
fn assign(params: &mut Params, top: String, path: &[Option<String>], value: String) {
    let mut table = params;
    let mut key = Some(top);
    for next in path {
        let Some(child) = child_map(table, key.as_deref()) else {
            return;
        };
        table = child;
        key = next.clone();
    }
    match key {
        Some(k) => table.set(&k, Param::Scalar(value)),
        None => {
            if let Some(index) = next_index(table) {
                table.0.push((index.to_string(), Param::Scalar(value)));
            }
        }
    }
}

/// The map under `key` in `table` (or a new one appended at the next index for `None`).
fn child_map<'a>(table: &'a mut Params, key: Option<&str>) -> Option<&'a mut Params> {
    let at = match key {
        None => {
            let index = next_index(table)?;
            table.0.push((index.to_string(), Param::Map(Params::default())));
            table.0.len().checked_sub(1)?
        }
        Some(k) => match table.position(k) {
            Some(at) => at,
            None => {
                table.0.push((k.to_owned(), Param::Map(Params::default())));
                table.0.len().checked_sub(1)?
            }
        },
    };
    let (_, slot) = table.0.get_mut(at)?;
    if !matches!(slot, Param::Map(_)) {
        *slot = Param::Map(Params::default());
    }
    match slot {
        Param::Map(m) => Some(m),
        Param::Scalar(_) => None,
    }
}

/// The key `$a[] = …` uses: one past the largest integer key, never below 0 (PHP before 8.3);
/// `None` when the largest key is already `PHP_INT_MAX` (PHP then drops the value).
fn next_index(table: &Params) -> Option<i64> {
    match table.0.iter().filter_map(|(k, _)| php::int_key(k)).max() {
        None => Some(0),
        Some(max) => max.checked_add(1).map(|n| n.max(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(raw: &str) -> String {
        Params::parse_query(raw.as_bytes()).to_query_string()
    }

    fn scalar<'a>(p: &'a Params, path: &[&str]) -> Option<&'a str> {
        let (last, init) = path.split_last()?;
        let mut cur = p;
        for k in init {
            cur = cur.get(k)?.as_map()?;
        }
        cur.get_scalar(last)
    }

    #[test]
    fn plain_pairs_and_decoding() {
        let p = Params::parse_query(b"a=1&b=x+y&c=%41%2c&d=%zz&e=%4&f");
        assert_eq!(scalar(&p, &["a"]), Some("1"));
        assert_eq!(scalar(&p, &["b"]), Some("x y"));
        assert_eq!(scalar(&p, &["c"]), Some("A,"));
        assert_eq!(scalar(&p, &["d"]), Some("%zz"));
        assert_eq!(scalar(&p, &["e"]), Some("%4"));
        assert_eq!(scalar(&p, &["f"]), Some(""));
        assert_eq!(p.len(), 6);
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let p = Params::parse_query(b"a=%FF%C3%A9&%FE=1");
        assert_eq!(scalar(&p, &["a"]), Some("\u{FFFD}é"));
        assert_eq!(scalar(&p, &["\u{FFFD}"]), Some("1"));
    }

    #[test]
    fn last_value_wins_in_first_place() {
        assert_eq!(q("a=1&b=2&a=3"), "a=3&b=2");
        // A scalar overwritten by a group and back keeps its place too.
        assert_eq!(q("a=1&b=2&a[x]=3"), "a%5Bx%5D=3&b=2");
        assert_eq!(q("a[x]=1&b=2&a=3"), "a=3&b=2");
    }

    #[test]
    fn top_level_dots_and_spaces_become_underscores() {
        assert_eq!(q("a.b=1"), "a_b=1");
        assert_eq!(q("a+b=1"), "a_b=1");
        assert_eq!(q("++a=1"), "a=1");
        assert_eq!(q("a.b[c.d]=1"), "a_b%5Bc.d%5D=1");
    }

    #[test]
    fn empty_names_are_dropped() {
        assert_eq!(q("=1&[a]=2&+=3&b=4"), "b=4");
        assert_eq!(q("&&&"), "");
        assert_eq!(q(""), "");
    }

    #[test]
    fn nul_ends_a_name_but_not_a_value() {
        let p = Params::parse_query(b"a%00b=x%00y");
        assert_eq!(scalar(&p, &["a"]), Some("x\0y"));
    }

    #[test]
    fn brackets_nest_and_append() {
        assert_eq!(
            q("filter[id][in][]=2&filter[id][in][]=5&filter[id][in][]=9"),
            "filter%5Bid%5D%5Bin%5D%5B0%5D=2&filter%5Bid%5D%5Bin%5D%5B1%5D=5&filter%5Bid%5D%5Bin%5D%5B2%5D=9"
        );
        assert_eq!(
            q("filter[or][][id]=1&filter[or][][id][gte]=44"),
            "filter%5Bor%5D%5B0%5D%5Bid%5D=1&filter%5Bor%5D%5B1%5D%5Bid%5D%5Bgte%5D=44"
        );
        // One space before ']' still appends; other spaces are part of the key.
        assert_eq!(
            q("a[ ]=1&a[ ]=2&a[ x]=3&a[  ]=4"),
            "a%5B0%5D=1&a%5B1%5D=2&a%5B+x%5D=3&a%5B++%5D=4"
        );
    }

    #[test]
    fn append_uses_the_largest_integer_key() {
        assert_eq!(q("a[5]=x&a[]=y"), "a%5B5%5D=x&a%5B6%5D=y");
        assert_eq!(q("a[x]=1&a[]=2"), "a%5Bx%5D=1&a%5B0%5D=2");
        // "05" and "-0" are string keys; a negative key does not lower the next index (PHP 8.2).
        assert_eq!(q("a[05]=1&a[-3]=2&a[]=3"), "a%5B05%5D=1&a%5B-3%5D=2&a%5B0%5D=3");
        // Nothing can follow PHP_INT_MAX.
        assert_eq!(
            q("a[9223372036854775807]=1&a[]=2&a[][x]=3"),
            "a%5B9223372036854775807%5D=1"
        );
    }

    #[test]
    fn malformed_brackets_as_php() {
        assert_eq!(q("a[b=1"), "a_b=1");
        assert_eq!(q("a[b.c[d e=1"), "a_b_c_d_e=1");
        assert_eq!(q("a[x][b=1"), "a%5Bx%5D=1");
        assert_eq!(q("a[][b=1"), "a%5B0%5D=1");
        assert_eq!(q("a[b]c=1"), "a%5Bb%5D=1");
        assert_eq!(q("a[b]c[d]=1"), "a%5Bb%5D=1");
        assert_eq!(q("a]=1"), "a%5D=1");
        assert_eq!(q("a[b[c]=1"), "a%5Bb%5Bc%5D=1");
    }

    #[test]
    fn nesting_limit_drops_the_whole_variable() {
        let ok = format!("a{}=1", "[x]".repeat(MAX_NESTING));
        let p = Params::parse_query(ok.as_bytes());
        assert!(p.contains_key("a"));
        let too_deep = format!("b=1&a[y]=0&a{}=1&c=2", "[x]".repeat(MAX_NESTING + 1));
        assert_eq!(q(&too_deep), "b=1&c=2");
        // Re-created later, it goes to the end.
        let again = format!("a=0&b=1&a{}=1&a=2", "[x]".repeat(MAX_NESTING + 1));
        assert_eq!(q(&again), "b=1&a=2");
    }

    #[test]
    fn at_most_1000_pairs_are_read() {
        let raw: String = (0..1100).map(|i| format!("k{i}=v&&")).collect();
        let p = Params::parse_query(raw.as_bytes());
        assert_eq!(p.len(), MAX_INPUT_VARS);
        assert_eq!(p.get_scalar("k999"), Some("v"));
        assert_eq!(p.get("k1000"), None);
        // Pairs with an empty name count towards the limit, empty pieces do not.
        let raw = format!("{}x=1", "=&".repeat(1000));
        assert!(Params::parse_query(raw.as_bytes()).is_empty());
    }

    #[test]
    fn equals_in_values_and_encoded_names() {
        let p = Params::parse_query(b"a=b=c&x%3Dy=1&s%5B0%5D=z");
        assert_eq!(scalar(&p, &["a"]), Some("b=c"));
        assert_eq!(scalar(&p, &["x=y"]), Some("1"));
        assert_eq!(scalar(&p, &["s", "0"]), Some("z"));
    }
}

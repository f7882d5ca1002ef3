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

/// Whether the query string holds more pairs than PHP reads ([`MAX_INPUT_VARS`]), counted as
/// [`parse`] counts them.
pub(super) fn has_too_many_pairs(raw: &[u8]) -> bool {
    raw.split(|&b| b == b'&')
        .filter(|t| !t.is_empty())
        .nth(MAX_INPUT_VARS)
        .is_some()
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
mod tests;

//! PHP's `http_build_query` (RFC 1738 form encoding), with which Yii2's `UrlManager` writes the
//! query of every link (docs/api.md, "Collections").

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::{MAX_NESTING, Param, Params};

/// What PHP's `urlencode` escapes: everything but `A-Za-z0-9-_.` (spaces are handled apart).
const FORM: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.');

/// Writes the whole tree as `k=v&a%5Bb%5D=w…`.
pub(super) fn build(params: &Params) -> String {
    let mut out = String::new();
    for (key, value) in params.iter() {
        let mut name = String::new();
        urlencode_into(key, &mut name);
        write_param(&mut out, &name, value, 1);
    }
    out
}

/// Writes one parameter under its already-encoded name; maps expand to `name%5Bkey%5D`.
/// An empty map writes nothing, as in PHP.
fn write_param(out: &mut String, name: &str, value: &Param, depth: usize) {
    match value {
        Param::Scalar(v) => {
            if !out.is_empty() {
                out.push('&');
            }
            out.push_str(name);
            out.push('=');
            urlencode_into(v, out);
        }
        // Deeper than PHP or `Params::from_json` ever build: nothing to write.
        Param::Map(_) if depth > MAX_NESTING => {}
        Param::Map(map) => {
            for (key, child) in map.iter() {
                let mut child_name = String::with_capacity(name.len() + key.len() + 6);
                child_name.push_str(name);
                child_name.push_str("%5B");
                urlencode_into(key, &mut child_name);
                child_name.push_str("%5D");
                write_param(out, &child_name, child, depth + 1);
            }
        }
    }
}

/// PHP `urlencode`: space → `+`, `A-Za-z0-9-_.` literal, every other UTF-8 byte → `%XX`.
fn urlencode_into(s: &str, out: &mut String) {
    for (i, part) in s.split(' ').enumerate() {
        if i > 0 {
            out.push('+');
        }
        out.extend(utf8_percent_encode(part, FORM));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(key: &str, value: &str) -> String {
        Params(vec![(key.to_owned(), Param::Scalar(value.to_owned()))]).to_query_string()
    }

    #[test]
    fn form_encoding_like_php() {
        assert_eq!(one("fields", "id,name"), "fields=id%2Cname");
        assert_eq!(one("q", "a b+c"), "q=a+b%2Bc");
        assert_eq!(one("k", "-_.~*'()!"), "k=-_.%7E%2A%27%28%29%21");
        assert_eq!(one("k", "é/€"), "k=%C3%A9%2F%E2%82%AC");
        assert_eq!(one("a[b]", "[x]"), "a%5Bb%5D=%5Bx%5D");
        assert_eq!(one("", ""), "=");
    }

    #[test]
    fn nested_maps_and_empty_ones() {
        let p = Params(vec![
            ("e".to_owned(), Param::Map(Params::default())),
            (
                "a".to_owned(),
                Param::Map(Params(vec![
                    ("b c".to_owned(), Param::Scalar("1".to_owned())),
                    (
                        "0".to_owned(),
                        Param::Map(Params(vec![("x".to_owned(), Param::Scalar("2".to_owned()))])),
                    ),
                ])),
            ),
            ("z".to_owned(), Param::Scalar(String::new())),
        ]);
        assert_eq!(p.to_query_string(), "a%5Bb+c%5D=1&a%5B0%5D%5Bx%5D=2&z=");
    }

    #[test]
    fn arrays_get_explicit_indexes() {
        assert_eq!(
            Params::parse_query(b"a[]=1&a[]=2").to_query_string(),
            "a%5B0%5D=1&a%5B1%5D=2"
        );
    }
}

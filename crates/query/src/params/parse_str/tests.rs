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

use super::*;

fn page(query: &str, total: u64) -> Page {
    PageRequest::from_params(&Params::parse_query(query.as_bytes()), 20, 50).resolve(total)
}

/// (query, currentPage, perPage, pageCount) for 45 rows, docs/api.md, "Collections"
#[test]
fn table_of_the_sheet() {
    for (query, current, per, count) in [
        ("", 1, 20, 3),
        ("per-page=3&page=99", 15, 3, 15),
        ("per-page=0&page=-3", 1, 1, 45),
        ("per-page=100", 1, 50, 1),
        ("page=1.9&per-page=5abc", 1, 5, 9),
    ] {
        let p = page(query, 45);
        assert_eq!(
            (p.current_page, p.per_page, p.page_count),
            (current, per, count),
            "{query}"
        );
        assert_eq!(p.total, 45);
        assert_eq!(p.offset, (current - 1) * per);
    }
}

#[test]
fn per_page_values() {
    for (raw, per) in [
        ("0", 1),
        ("-5", 1),
        ("abc", 1),
        ("", 1),
        ("100", 50),
        ("7", 7),
        ("1e1", 10),
        (" 5", 5),
        ("99999999999999999999", 50),
    ] {
        assert_eq!(page(&format!("per-page={raw}"), 45).per_page, per, "per-page={raw}");
    }
    // Non-scalar → absent → default.
    assert_eq!(page("per-page[]=5", 45).per_page, 20);
    // Case-sensitive.
    assert_eq!(page("PER-PAGE=5&PAGE=2", 45).per_page, 20);
    assert_eq!(page("PER-PAGE=5&PAGE=2", 45).current_page, 1);
}

#[test]
fn page_values() {
    for (raw, current) in [
        ("0", 1),
        ("-3", 1),
        ("abc", 1),
        ("2", 2),
        ("2.9", 2),
        ("3", 3),
        ("4", 3),
        ("9223372036854775807", 3),
        ("-9223372036854775808", 1),
    ] {
        assert_eq!(page(&format!("page={raw}"), 45).current_page, current, "page={raw}");
    }
    assert_eq!(page("page[]=2", 45).current_page, 1);
}

#[test]
fn empty_result() {
    let p = page("page=5&per-page=10", 0);
    assert_eq!(
        p,
        Page {
            total: 0,
            page_count: 0,
            current_page: 1,
            per_page: 10,
            offset: 0
        }
    );
}

#[test]
fn zero_size_built_by_hand() {
    let r = PageRequest {
        page: 3,
        per_page: 0,
        default_per_page: 20,
    };
    assert_eq!(
        r.resolve(10),
        Page {
            total: 10,
            page_count: 1,
            current_page: 1,
            per_page: 0,
            offset: 0
        }
    );
}

#[test]
fn php_intval_examples() {
    assert_eq!(php_intval("5abc"), 5);
    assert_eq!(php_intval("1.9"), 1);
    assert_eq!(php_intval("1e1"), 10);
    assert_eq!(php_intval(" 5"), 5);
    assert_eq!(php_intval("x"), 0);
    assert_eq!(php_intval(""), 0);
}

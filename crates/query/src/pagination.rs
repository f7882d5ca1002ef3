//! Yii2 `Pagination`: `page` and `per-page` read with PHP integer casts and clamped, never an
//! error (docs/api.md, "Collections").

use crate::params::Params;
use crate::php;

/// PHP `(int)` cast of a string: leading whitespace skipped, optional sign, digits, and a
/// fraction or exponent if present (`"5abc"` → 5, `"1.9"` → 1, `"1e1"` → 10, `" 5"` → 5);
/// non-numeric or empty → 0; out of range → saturated.
pub fn php_intval(s: &str) -> i64 {
    php::intval(s)
}

/// What the client asked for, before the total is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRequest {
    /// The raw 1-based page (PHP int of `page`; 1 when absent or not a scalar).
    pub page: i64,
    /// The effective page size: `per-page` clamped to [1, max], the default when absent.
    pub per_page: u64,
    /// The endpoint's default size; links leave `per-page` out when it equals this.
    pub default_per_page: u64,
}

/// One resolved page of a collection: the `_meta` values and the SQL offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    /// Rows matching the filter (`X-Pagination-Total-Count`).
    pub total: u64,
    /// `ceil(total / per_page)`, 0 for an empty result.
    pub page_count: u64,
    /// 1-based page actually served, clamped to [1, page_count] (1 when empty).
    pub current_page: u64,
    /// Rows per page.
    pub per_page: u64,
    /// Rows to skip: `(current_page - 1) * per_page`.
    pub offset: u64,
}

impl PageRequest {
    /// Reads `page` and `per-page` from `params` as `Pagination::getPage` / `getPageSize` do:
    /// a non-scalar counts as absent; `per-page` is clamped to [1, `max_per_page`].
    pub fn from_params(params: &Params, default_per_page: u64, max_per_page: u64) -> PageRequest {
        let page = params.get_scalar("page").map_or(1, php_intval);
        let per_page = match params.get_scalar("per-page") {
            None => default_per_page,
            Some(raw) => {
                let asked = php_intval(raw);
                if asked < 1 {
                    1
                } else {
                    u64::try_from(asked).unwrap_or(u64::MAX).min(max_per_page.max(1))
                }
            }
        };
        PageRequest {
            page,
            per_page,
            default_per_page,
        }
    }

    /// Places the request on a result of `total` rows: the page is clamped to
    /// [1, pageCount] (a page past the end serves the last page), an empty result is page 1.
    pub fn resolve(&self, total: u64) -> Page {
        let per_page = self.per_page;
        // Pagination::getPageCount; a size below 1 cannot come from a request, but a caller may
        // build one: Yii then shows everything on one page.
        let page_count = if per_page == 0 {
            u64::from(total > 0)
        } else {
            total.div_ceil(per_page)
        };
        let last_index = page_count.saturating_sub(1);
        let index = match u64::try_from(self.page.saturating_sub(1)) {
            Ok(i) => i.min(last_index),
            Err(_) => 0,
        };
        Page {
            total,
            page_count,
            current_page: index + 1,
            per_page,
            offset: index.saturating_mul(per_page),
        }
    }
}

#[cfg(test)]
mod tests {
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
}

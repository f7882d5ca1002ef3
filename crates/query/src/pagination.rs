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
mod tests;

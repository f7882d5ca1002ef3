//! Yii2 `Pagination::getLinks` / `createUrl`: the `_links` of a collection and the `Link`
//! header, with the request's parameters carried along (docs/api.md, "Collections").

use crate::pagination::Page;
use crate::params::{Param, Params};

/// Parameters `UrlManager::createUrl` consumes instead of writing them into the query: `0`
/// (the route slot `Pagination::createUrl` fills), `r` (`routeParam`) and `#` (the anchor).
/// The anchor is not reproduced: a raw, client-chosen fragment has no place in a `Link` header.
const CONSUMED_BY_URL_MANAGER: [&str; 3] = ["0", "r", "#"];

/// The links of one page, `[(rel, absolute href)]` in the order self, first, last, prev, next
/// with Yii ≥ 2.0.39 presence rules: `self` always; `first` and `last` when `total > 0`; `prev`
/// when the current page is not the first; `next` when it is not the last.
///
/// Each href is `base?query`: `params` with `page` set to the target page (kept in place when
/// present, appended otherwise) and `per-page` set to the effective size when it differs from
/// `default_per_page` (kept in place, or appended after `page`), removed when equal; encoded
/// like PHP's `http_build_query`.
pub fn page_links(base: &str, params: &Params, page: &Page, default_per_page: u64) -> Vec<(&'static str, String)> {
    let mut kept = params.clone();
    for key in CONSUMED_BY_URL_MANAGER {
        kept.remove(key);
    }
    let href = |target: u64| {
        let mut p = kept.clone();
        p.set("page", Param::Scalar(target.to_string()));
        if page.per_page == default_per_page {
            p.remove("per-page");
        } else {
            p.set("per-page", Param::Scalar(page.per_page.to_string()));
        }
        format!("{base}?{}", p.to_query_string())
    };
    let mut links = vec![("self", href(page.current_page))];
    if page.total > 0 {
        links.push(("first", href(1)));
        links.push(("last", href(page.page_count)));
        if page.current_page > 1 {
            links.push(("prev", href(page.current_page - 1)));
        }
        if page.current_page < page.page_count {
            links.push(("next", href(page.current_page.saturating_add(1))));
        }
    }
    links
}

/// The `Link` header value: `<u>; rel=self, <u>; rel=first, …` (rel unquoted, ", "-separated).
pub fn link_header(links: &[(&'static str, String)]) -> String {
    links
        .iter()
        .map(|(rel, href)| format!("<{href}>; rel={rel}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;

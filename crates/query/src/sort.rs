//! Yii2 `Sort` with multi-sort off: the first known name of the `sort` list is the order
//! (docs/api.md, "Collections": "nothing known" means the default order).

use crate::params::Param;

/// The one ordering a request asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortKey {
    /// A name from the endpoint's sortable list.
    pub attr: &'static str,
    /// `-name` in the request.
    pub descending: bool,
}

impl SortKey {
    /// `attr` ascending (`sort=attr`).
    pub const fn asc(attr: &'static str) -> SortKey {
        SortKey {
            attr,
            descending: false,
        }
    }

    /// `attr` descending (`sort=-attr`).
    pub const fn desc(attr: &'static str) -> SortKey {
        SortKey { attr, descending: true }
    }
}

/// Reads `sort`: a comma list, `-` prefix for descending, case-sensitive, no trimming
/// (` -id` is unknown). The first known name wins, unknown names are ignored
/// (`Sort::getAttributeOrders`). `None` when absent, not a scalar (`sort[]=x`) or nothing is
/// known: the caller then applies its default order.
pub fn parse_sort(raw: Option<&Param>, sortable: &[&'static str]) -> Option<SortKey> {
    let list = raw?.as_scalar()?;
    list.split(',').find_map(|item| {
        // Only one '-' is a direction: `--id` asks for the unknown name "-id".
        let (descending, name) = match item.strip_prefix('-') {
            Some(name) => (true, name),
            None => (false, item),
        };
        sortable
            .iter()
            .find(|&&known| known == name)
            .map(|&attr| SortKey { attr, descending })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;

    const SORTABLE: &[&str] = &["id", "name", "group_id"];

    fn sort(query: &str) -> Option<SortKey> {
        let params = Params::parse_query(query.as_bytes());
        parse_sort(params.get("sort"), SORTABLE)
    }

    fn key(attr: &'static str, descending: bool) -> Option<SortKey> {
        Some(SortKey { attr, descending })
    }

    #[test]
    fn the_first_known_name_wins() {
        assert_eq!(sort("sort=id"), key("id", false));
        assert_eq!(sort("sort=-id"), key("id", true));
        assert_eq!(sort("sort=bogus,-id"), key("id", true));
        assert_eq!(sort("sort=group_id,-id"), key("group_id", false));
        assert_eq!(sort("sort=-name,id"), key("name", true));
    }

    #[test]
    fn nothing_known_means_default_order() {
        for query in [
            "",
            "sort=",
            "sort=bogus",
            "sort[]=x",
            "sort=ID",
            "sort=+-id",
            "sort=%20-id",
            "sort=--id",
            "sort=-",
            "sort=,",
            "sort=id%20",
        ] {
            assert_eq!(sort(query), None, "{query}");
        }
    }
}

//! A collection declared once: its table, the record type whose fields are the columns it
//! selects, the attributes a filter and a sort may name, the relations a filter may join, its
//! default order and its key. Both the SQL of a page and the record the API shows come from it.

use std::marker::PhantomData;
use std::sync::OnceLock;

use devicecloud_query::{AttrKind, SortKey};
use sea_query::{Expr, ExprTrait, SelectStatement};
use serde::de::DeserializeOwned;

use super::{Column, ListArgs, Listing, Relation, list, output_of};
use crate::database::Result;
use crate::database::db::{Db, Row};

/// The collection of the records `T` of one table.
pub(crate) struct Table<T> {
    name: &'static str,
    columns: &'static [Column],
    relations: &'static [Relation],
    order: SortKey,
    key: &'static [Column],
    output: OnceLock<&'static [&'static str]>,
    row: PhantomData<fn() -> T>,
}

impl<T> Table<T> {
    /// The collection of `name` filtered over `columns` (which may name the fields of
    /// `relations`), in `order` unless sorted otherwise, ties broken by `key`.
    pub(crate) const fn new(
        name: &'static str,
        columns: &'static [Column],
        relations: &'static [Relation],
        order: SortKey,
        key: &'static [Column],
    ) -> Table<T> {
        Table {
            name,
            columns,
            relations,
            order,
            key,
            output: OnceLock::new(),
            row: PhantomData,
        }
    }
}

impl<T: Row + DeserializeOwned> Table<T> {
    /// The columns a page selects: the field names of `T`, in its order (worked out once per
    /// process).
    pub(crate) fn output(&self) -> &'static [&'static str] {
        self.output.get_or_init(output_of::<T>)
    }

    /// `SELECT <every field of T> FROM <table>`.
    pub(crate) fn select(&self) -> SelectStatement {
        let mut select = sea_query::Query::select();
        select
            .columns(self.output().iter().map(|c| (self.name, *c)))
            .from(self.name);
        select
    }

    /// The page `args` asks for of the rows `select` keeps (built on [`Table::select`]); who may
    /// see what is the select's business.
    pub(crate) async fn list(&self, db: &Db, select: SelectStatement, args: &ListArgs<'_>) -> Result<Listing<T>> {
        list(
            db,
            select,
            self.output(),
            self.columns,
            args.request(self.order.clone(), self.key),
        )
        .await
    }

    /// [`Table::list`] of a request without a filter, with the number of rows read by `count`.
    pub(crate) async fn list_counting(
        &self,
        db: &Db,
        select: SelectStatement,
        count: SelectStatement,
        args: &ListArgs<'_>,
    ) -> Result<Listing<T>> {
        debug_assert!(args.filter.is_none(), "a filtered request counts its own select");
        let mut req = args.request(self.order.clone(), self.key);
        req.count = Some(count);
        list(db, select, self.output(), self.columns, req).await
    }

    /// The page `args` asks for of the rows whose `id_group` names a group the caller's scope
    /// allows: the list of every collection a group owns (devices, events, data sessions,
    /// webhooks). Each relation is joined (many to one, so no row is repeated) only when the
    /// filter names one of its columns.
    pub(crate) async fn scoped(&self, db: &Db, args: ListArgs<'_>) -> Result<Listing<T>> {
        let mut select = self.select();
        for relation in self.relations {
            let of_relation = |attr: &str| self.columns.iter().any(|c| c.attr == attr && c.table == relation.alias);
            if args.filter.is_some_and(|f| f.mentions(&of_relation)) {
                select.left_join(
                    sea_query::TableRef::Table(relation.table.into(), Some(relation.alias.into())),
                    Expr::col((relation.alias, relation.key)).equals((self.name, relation.via)),
                );
            }
        }
        if let Some(visible) = args.scope.condition(self.name, "id_group") {
            select.cond_where(visible);
        }
        self.list(db, select, &args).await
    }
}

/// A collection's group, joined when a filter names its label (docs/api.md, "Filters on
/// related records").
pub(crate) const GROUP: Relation = Relation {
    alias: "rel_group",
    table: "groups",
    key: "id_group",
    via: "id_group",
};

/// `group.label`, the label of a collection's [`GROUP`].
pub(crate) const GROUP_LABEL: Column = super::column("group.label", GROUP.alias, "label", AttrKind::String);

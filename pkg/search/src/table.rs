//! Answers as rows and columns: `select name, namespace, labels.app from resources where
//! ...` (a row a matching document), `select namespace, count(*) from resources where ...
//! group by namespace` (a row a value, most documents first) and `select count(*) from
//! resources where ...` (one row). Parsed into the [`Query`] that finds the documents and
//! the [`Shape`] of the answer; `select *` stays [`crate::parse`]'s.

use sqlparser::ast::{
    Expr as SqlExpr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, OrderByKind,
    OrderBySort, SelectItem, Spanned,
};

use crate::parse::{
    at, canonical, fail, field, filter, limits, order, select_from, statement, Table,
};
use crate::tree::{Field, Query};
use crate::SearchError;

/// Columns a projection may name.
pub const MAX_COLUMNS: usize = 32;
/// Groups a grouped answer may have (its LIMIT), and how many it has without one.
pub const MAX_GROUPS: u64 = 1000;
const DEFAULT_GROUPS: u64 = 10;

const SHAPE: &str = "the forms are: select COLUMN, ... from resources [where ...] [order by ...] \
     [limit n] [offset m]; select COLUMN, count(*) from resources [where ...] group by COLUMN \
     [order by count(*) desc] [limit n]; select count(*) from resources [where ...]";

/// A rows-and-columns search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableQuery {
    /// The documents it reads.
    pub query: Query,
    pub shape: Shape,
    /// The columns' titles, as written in the select list.
    pub titles: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// A row a document: its values of these fields, in this order.
    Columns(Vec<Field>),
    /// One row: how many documents match.
    Count,
    /// A row a value of `by` with how many documents have it, most first; `count_first`
    /// when the select list names `count(*)` before the column.
    Groups {
        by: Field,
        limit: u64,
        count_first: bool,
    },
}

enum Item {
    Field(Field),
    Count,
}

fn is_count(e: &SqlExpr) -> bool {
    let SqlExpr::Function(f) = e else {
        return false;
    };
    f.name.to_string().eq_ignore_ascii_case("count")
        && matches!(&f.args, FunctionArguments::List(list)
            if matches!(list.args.as_slice(), [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)])
                && list.duplicate_treatment.is_none() && list.clauses.is_empty())
        && f.filter.is_none()
        && f.over.is_none()
        && f.within_group.is_empty()
}

fn item(item: &SelectItem) -> Result<Item, SearchError> {
    match item {
        SelectItem::UnnamedExpr(e) if is_count(e) => Ok(Item::Count),
        SelectItem::UnnamedExpr(SqlExpr::Function(f)) => fail(format!(
            "`{f}` is not supported{}: the one aggregate is count(*)",
            at(f.span())
        )),
        SelectItem::UnnamedExpr(e) => field(e).map(Item::Field),
        SelectItem::ExprWithAlias { alias, .. } => {
            fail(format!("aliases are not supported{}", at(alias.span)))
        }
        SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => fail(
            "`*` stands alone (select * from resources answers the documents); name columns instead",
        ),
        other => fail(format!("`{other}` is not supported{}", at(other.span()))),
    }
}

/// Parses a rows-and-columns search.
pub fn parse_table(sql: &str) -> Result<TableQuery, SearchError> {
    let statement = statement(sql)?;
    let (select, table) = select_from(&statement)?;
    if table == Table::Changes {
        return fail("`changes` is searched on its own (GET /insight/changes?query=...)");
    }
    if select.having.is_some() {
        return fail("HAVING is not supported");
    }
    let GroupByExpr::Expressions(grouped, modifiers) = &select.group_by else {
        return fail("GROUP BY ALL is not supported");
    };
    if !modifiers.is_empty() {
        return fail("GROUP BY modifiers are not supported");
    }
    if select.projection.len() > MAX_COLUMNS {
        return fail(format!("at most {MAX_COLUMNS} columns"));
    }
    let items = select
        .projection
        .iter()
        .map(item)
        .collect::<Result<Vec<_>, _>>()?;
    let titles = select.projection.iter().map(ToString::to_string).collect();
    let counted = items.iter().filter(|i| matches!(i, Item::Count)).count();
    let shape = match (grouped.as_slice(), items.as_slice()) {
        ([], _) if counted == 0 => Shape::Columns(
            items
                .into_iter()
                .filter_map(|i| match i {
                    Item::Field(f) => Some(f),
                    Item::Count => None,
                })
                .collect(),
        ),
        ([], [Item::Count]) => Shape::Count,
        ([], _) => {
            return fail(format!(
                "count(*) beside a column needs GROUP BY that column; {SHAPE}"
            ))
        }
        ([by], [Item::Field(f), Item::Count] | [Item::Count, Item::Field(f)]) => {
            let by_field = field(by)?;
            if by_field != *f {
                return fail(format!(
                    "the selected column is {}, the grouped one {}{}",
                    f.column(),
                    by_field.column(),
                    at(by.span())
                ));
            }
            if !by_field.groupable() {
                return fail(format!(
                    "cannot group by {}{}: times, deleted and score are not grouped",
                    by_field.column(),
                    at(by.span())
                ));
            }
            Shape::Groups {
                by: by_field,
                limit: DEFAULT_GROUPS,
                count_first: matches!(items[0], Item::Count),
            }
        }
        ([_], _) => {
            return fail(format!(
                "with GROUP BY, select the column and count(*); {SHAPE}"
            ))
        }
        (_, _) => return fail("GROUP BY takes one column"),
    };
    let mut query = Query {
        filter: filter(select)?,
        order_by: Vec::new(),
        limit: None,
        offset: None,
    };
    let shape = match shape {
        Shape::Columns(fields) => {
            query.order_by = order(&statement)?;
            (query.limit, query.offset) = limits(&statement)?;
            Shape::Columns(fields)
        }
        Shape::Count => {
            if statement.order_by.is_some() || statement.limit_clause.is_some() {
                return fail("select count(*) takes no ORDER BY, LIMIT or OFFSET");
            }
            Shape::Count
        }
        Shape::Groups {
            by, count_first, ..
        } => {
            group_order(&statement)?;
            let (limit, offset) = limits(&statement)?;
            if offset.is_some() {
                return fail("OFFSET is not supported with GROUP BY");
            }
            let limit = limit.unwrap_or(DEFAULT_GROUPS);
            if limit == 0 || limit > MAX_GROUPS {
                return fail(format!("a grouped answer has 1 to {MAX_GROUPS} groups"));
            }
            Shape::Groups {
                by,
                limit,
                count_first,
            }
        }
    };
    canonical(&statement, select, SHAPE)?;
    Ok(TableQuery {
        query,
        shape,
        titles,
    })
}

/// Groups come most documents first: ORDER BY, if any, says so.
fn group_order(statement: &sqlparser::ast::Query) -> Result<(), SearchError> {
    let Some(order) = &statement.order_by else {
        return Ok(());
    };
    let ok = matches!(&order.kind, OrderByKind::Expressions(items)
        if matches!(items.as_slice(), [one] if is_count(&one.expr)
            && matches!(one.options.sort, Some(OrderBySort::Desc))
            && one.options.nulls_first.is_none()));
    if ok {
        Ok(())
    } else {
        fail("groups are ordered by count(*) desc only")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(sql: &str) -> Shape {
        parse_table(sql).unwrap().shape
    }

    fn refused(sql: &str) -> String {
        parse_table(sql).unwrap_err().0
    }

    #[test]
    fn columns_groups_and_counts() {
        assert_eq!(
            shape("select name, namespace, labels.app, labels['tier'] from resources where kind = 'Pod' order by name limit 5"),
            Shape::Columns(vec![
                Field::Name,
                Field::Namespace,
                Field::Label("app".into()),
                Field::Label("tier".into())
            ])
        );
        assert_eq!(
            shape("select namespace, count(*) from resources where kind = 'Pod' and severity = 'high' group by namespace order by count(*) desc limit 3"),
            Shape::Groups {
                by: Field::Namespace,
                limit: 3,
                count_first: false
            }
        );
        assert_eq!(
            shape("select count(*), labels.app from resources group by labels.app"),
            Shape::Groups {
                by: Field::Label("app".into()),
                limit: DEFAULT_GROUPS,
                count_first: true
            }
        );
        assert_eq!(
            shape("select count(*) from resources where kind = 'Pod'"),
            Shape::Count
        );
        let parsed = parse_table("select name, count(*) from resources group by name").unwrap();
        assert_eq!(parsed.titles, ["name", "count(*)"]);
        assert!(
            parsed.query.filter.mentions(&Field::Deleted),
            "deleted = false is implied"
        );
    }

    #[test]
    fn what_is_refused_says_why() {
        for (sql, says) in [
            ("select * from resources", "stands alone"),
            ("select name as n from resources", "aliases"),
            ("select sum(score) from resources", "count(*)"),
            ("select name, count(*) from resources", "needs GROUP BY"),
            (
                "select namespace, count(*) from resources group by name",
                "grouped one name",
            ),
            (
                "select name, kind, count(*) from resources group by name",
                "select the column",
            ),
            (
                "select syncAt, count(*) from resources group by syncAt",
                "cannot group",
            ),
            (
                "select name, count(*) from resources group by name having count(*) > 1",
                "HAVING",
            ),
            (
                "select name, count(*) from resources group by name order by name",
                "count(*) desc",
            ),
            (
                "select name, count(*) from resources group by name limit 5000",
                "1 to 1000",
            ),
            (
                "select name, count(*) from resources group by name limit 5 offset 1",
                "OFFSET",
            ),
            ("select count(*) from resources limit 1", "takes no"),
            ("select name from changes", "on its own"),
            ("select content from resources", "contains"),
            (
                "select labels.`a`, namespace from resources group by namespace",
                "select the column",
            ),
        ] {
            let message = refused(sql);
            assert!(message.contains(says), "{sql}: {message}");
        }
    }
}

//! From SQL text to a [`Query`]: `sqlparser` does the grammar; this module accepts the one
//! statement shape of the dialect and refuses everything else, saying what and where.

use std::fmt::Write as _;

use sqlparser::ast::{
    AccessExpr, BinaryOperator, DateTimeField, Expr as SqlExpr, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, Ident, InTarget, Interval, LimitClause, ObjectNamePart,
    OrderByKind, OrderBySort, Select, SelectItem, SetExpr, Spanned, Statement, Subscript,
    TableFactor, UnaryOperator, Value as SqlValue,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Span;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::tree::{Expr, Field, FieldType, Op, Order, Query, Value};

/// Why a search was refused: the message names the construct and where it stands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SearchError(pub String);

type Result<T> = std::result::Result<T, SearchError>;

const SHAPE: &str =
    "the form is: select * from resources [where ...] [order by ...] [limit n] [offset m]";
/// Longest query or keyword accepted: searches are typed by people.
const MAX_LEN: usize = 8 * 1024;

pub(crate) fn fail<T>(message: impl Into<String>) -> Result<T> {
    Err(SearchError(message.into()))
}

/// ` at line L, column C`, when the parser knows.
pub(crate) fn at(span: Span) -> String {
    if span.start.line == 0 {
        String::new()
    } else {
        format!(" at line {}, column {}", span.start.line, span.start.column)
    }
}

/// The table a statement reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Table {
    Resources,
    /// History's changes ([`crate::changes`]).
    Changes,
}

/// The one query statement of `sql`: no more, no other kind, no `WITH`.
pub(crate) fn statement(sql: &str) -> Result<Box<sqlparser::ast::Query>> {
    if sql.len() > MAX_LEN {
        return fail(format!("query is longer than {MAX_LEN} bytes"));
    }
    let mut statements = Parser::parse_sql(&MySqlDialect {}, sql)
        .map_err(|e| SearchError(format!("not valid SQL: {e}")))?;
    match statements.len() {
        0 => return fail("the query is empty"),
        1 => {}
        many => {
            return fail(format!(
                "one statement only: found {many} (stacked statements are refused)"
            ))
        }
    }
    let Some(Statement::Query(query)) = statements.pop() else {
        return fail(format!("only select is supported; {SHAPE}"));
    };
    if query.with.is_some() {
        return fail("WITH is not supported");
    }
    Ok(query)
}

/// `query`'s `select * from TABLE [where ...]`, checked: one table of the dialect, all
/// columns, no grouping.
pub(crate) fn select(query: &sqlparser::ast::Query) -> Result<(&Select, Table)> {
    let (select, table) = select_from(query)?;
    if !matches!(select.projection.as_slice(), [SelectItem::Wildcard(_)]) {
        return fail(format!(
            "only `select *` answers documents{}: columns and counts are answered as rows \
             (GET /rest-api/v1/search/rows, karpor search)",
            at(select
                .projection
                .first()
                .map(Spanned::span)
                .unwrap_or(Span::empty()))
        ));
    }
    if !matches!(&select.group_by, GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty())
        || select.having.is_some()
    {
        return fail("GROUP BY and HAVING are answered as rows (GET /rest-api/v1/search/rows)");
    }
    Ok((select, table))
}

/// `query`'s `select ... from TABLE`, checked: a plain select of one table of the dialect,
/// no DISTINCT, no joins.
pub(crate) fn select_from(query: &sqlparser::ast::Query) -> Result<(&Select, Table)> {
    let select = match query.body.as_ref() {
        SetExpr::Select(select) => select,
        SetExpr::Query(_) => return fail("sub-queries are not supported"),
        SetExpr::SetOperation { op, .. } => return fail(format!("{op} is not supported")),
        other => return fail(format!("`{other}` is not supported; {SHAPE}")),
    };
    if select.distinct.is_some() {
        return fail("DISTINCT is not supported");
    }
    let table = match select.from.as_slice() {
        [one] if !one.joins.is_empty() => {
            return fail(format!(
                "joins are not supported{}",
                at(one.joins[0].span())
            ))
        }
        [one] => &one.relation,
        [] => return fail(format!("the table is missing; {SHAPE}")),
        _ => return fail("one table only: `resources` or `changes`"),
    };
    let named = |wanted: &str| {
        matches!(table, TableFactor::Table { name, .. } if matches!(name.0.as_slice(),
            [ObjectNamePart::Identifier(id)] if id.value.eq_ignore_ascii_case(wanted)))
    };
    let table = match table {
        _ if named("resources") => Table::Resources,
        _ if named("changes") => Table::Changes,
        TableFactor::Derived { .. } => return fail("sub-queries are not supported"),
        other => {
            return fail(format!(
                "unknown table `{other}`{}: the tables are `resources` and `changes`",
                at(other.span())
            ))
        }
    };
    Ok((select, table))
}

/// Fails on whatever the checks did not name (aliases, FETCH, locking, dialect extras):
/// it shows as a difference from the canonical form of what was accepted.
pub(crate) fn canonical(query: &sqlparser::ast::Query, select: &Select, shape: &str) -> Result<()> {
    let projection: Vec<String> = select.projection.iter().map(ToString::to_string).collect();
    let mut canonical = format!("SELECT {} FROM ", projection.join(", "));
    if let [from] = select.from.as_slice() {
        let _ = write!(canonical, "{}", from.relation);
    }
    if let Some(selection) = &select.selection {
        let _ = write!(canonical, " WHERE {selection}");
    }
    if let GroupByExpr::Expressions(grouped, _) = &select.group_by {
        if !grouped.is_empty() {
            let grouped: Vec<String> = grouped.iter().map(ToString::to_string).collect();
            let _ = write!(canonical, " GROUP BY {}", grouped.join(", "));
        }
    }
    if let Some(order) = &query.order_by {
        let _ = write!(canonical, " {order}");
    }
    if let Some(limit) = &query.limit_clause {
        let _ = write!(canonical, "{limit}");
    }
    if canonical != query.to_string() {
        return fail(format!("unsupported clause in `{query}`; {shape}"));
    }
    Ok(())
}

/// Parses `select * from resources where ...`.
pub fn parse(sql: &str) -> Result<Query> {
    let query = statement(sql)?;
    let (select, table) = select(&query)?;
    if table == Table::Changes {
        return fail(
            "`changes` is searched on its own (GET /insight/changes?query=..., karpor changes --query); this search reads `resources`",
        );
    }

    let filter = filter(select)?;
    let order_by = order(&query)?;
    let (limit, offset) = limits(&query)?;
    canonical(&query, select, SHAPE)?;
    Ok(Query {
        filter,
        order_by,
        limit,
        offset,
    })
}

/// The WHERE clause, with the implied `deleted = false` unless it names `deleted`.
pub(crate) fn filter(select: &Select) -> Result<Expr> {
    let filter = match &select.selection {
        Some(e) => convert(e)?,
        None => Expr::All,
    };
    Ok(if filter.mentions(&Field::Deleted) {
        filter
    } else {
        and(filter, not_deleted())
    })
}

/// The ORDER BY keys.
pub(crate) fn order(query: &sqlparser::ast::Query) -> Result<Vec<Order>> {
    let mut order_by = Vec::new();
    if let Some(order) = &query.order_by {
        let OrderByKind::Expressions(items) = &order.kind else {
            return fail("ORDER BY ALL is not supported");
        };
        for item in items {
            let field = field(&item.expr)?;
            if !field.sortable() {
                return fail(format!(
                    "cannot order by {}{}: labels and annotations are not sort keys",
                    field.column(),
                    at(item.expr.span())
                ));
            }
            let descending = match item.options.sort {
                None | Some(OrderBySort::Asc) => false,
                Some(OrderBySort::Desc) => true,
                Some(OrderBySort::Using(_)) => return fail("ORDER BY ... USING is not supported"),
            };
            if item.options.nulls_first.is_some() {
                return fail("NULLS FIRST / NULLS LAST is not supported");
            }
            order_by.push(Order { field, descending });
        }
    }
    Ok(order_by)
}

/// LIMIT and OFFSET.
pub(crate) fn limits(query: &sqlparser::ast::Query) -> Result<(Option<u64>, Option<u64>)> {
    Ok(match &query.limit_clause {
        None => (None, None),
        Some(LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) if limit_by.is_empty() => (
            limit.as_ref().map(count).transpose()?,
            offset.as_ref().map(|o| count(&o.value)).transpose()?,
        ),
        Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
            (Some(count(limit)?), Some(count(offset)?))
        }
        Some(other) => return fail(format!("`{other}` is not supported")),
    })
}

/// The `keyword=` search: the term anywhere in name, namespace, labels or content.
pub fn keyword(term: &str) -> Result<Query> {
    let term = term.trim();
    if term.is_empty() {
        return fail("keyword is empty");
    }
    if term.len() > 256 {
        return fail("keyword is longer than 256 bytes");
    }
    Ok(Query {
        filter: and(Expr::Keyword(term.to_owned()), not_deleted()),
        order_by: Vec::new(),
        limit: None,
        offset: None,
    })
}

/// A LIMIT or OFFSET: a non-negative whole number.
fn count(e: &SqlExpr) -> Result<u64> {
    if let SqlExpr::Value(v) = e {
        if let SqlValue::Number(n, _) = &v.value {
            if let Ok(n) = n.parse::<u64>() {
                return Ok(n);
            }
        }
    }
    fail(format!(
        "LIMIT and OFFSET take a whole number, not `{e}`{}",
        at(e.span())
    ))
}

fn not_deleted() -> Expr {
    Expr::Compare {
        field: Field::Deleted,
        op: Op::Eq,
        value: Value::Bool(false),
    }
}

pub(crate) fn and(left: Expr, right: Expr) -> Expr {
    let mut all = Vec::new();
    for e in [left, right] {
        match e {
            Expr::All => {}
            Expr::And(inner) => all.extend(inner),
            other => all.push(other),
        }
    }
    match all.len() {
        0 => Expr::All,
        1 => all.pop().expect("one"),
        _ => Expr::And(all),
    }
}

fn or(left: Expr, right: Expr) -> Expr {
    let mut all = Vec::new();
    for e in [left, right] {
        match e {
            Expr::Or(inner) => all.extend(inner),
            other => all.push(other),
        }
    }
    Expr::Or(all)
}

pub(crate) fn convert(e: &SqlExpr) -> Result<Expr> {
    match e {
        SqlExpr::Nested(inner) => convert(inner),
        SqlExpr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => Ok(and(convert(left)?, convert(right)?)),
        SqlExpr::BinaryOp {
            left,
            op: BinaryOperator::Or,
            right,
        } => Ok(or(convert(left)?, convert(right)?)),
        SqlExpr::BinaryOp { left, op, right } => compare(left, op, right, e.span()),
        SqlExpr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => Ok(Expr::Not(Box::new(convert(expr)?))),
        SqlExpr::In {
            target: InTarget::Subquery(_),
            ..
        } => fail(format!("sub-queries are not supported{}", at(e.span()))),
        SqlExpr::In {
            expr,
            target: InTarget::List(list),
            negated,
            global: false,
        } => {
            let field = field(expr)?;
            let values = list
                .iter()
                .map(|v| literal(v, &field))
                .collect::<Result<_>>()?;
            Ok(Expr::In {
                field,
                values,
                negated: *negated,
            })
        }
        SqlExpr::Between {
            expr,
            negated,
            low,
            high,
        } => {
            let field = field(expr)?;
            ordered(&field, e.span())?;
            Ok(Expr::Between {
                low: literal(low, &field)?,
                high: literal(high, &field)?,
                field,
                negated: *negated,
            })
        }
        SqlExpr::Like {
            negated,
            any: false,
            expr,
            pattern,
            escape_char: None,
        } => {
            let field = field(expr)?;
            if field.field_type() != FieldType::Text {
                return fail(format!(
                    "LIKE needs a text column, not {}{}",
                    field.column(),
                    at(e.span())
                ));
            }
            let Value::Text(pattern) = literal(pattern, &field)? else {
                unreachable!("a text field's literal is text")
            };
            Ok(Expr::Like {
                field,
                pattern,
                negated: *negated,
            })
        }
        SqlExpr::Function(function) => {
            let name = function.name.to_string();
            if !name.eq_ignore_ascii_case("contains") {
                return fail(format!(
                    "unknown function `{name}`{}: the only function is contains(content, 'text')",
                    at(e.span())
                ));
            }
            contains(&function.args, e.span())
        }
        SqlExpr::Subquery(_) | SqlExpr::Exists { .. } => {
            fail(format!("sub-queries are not supported{}", at(e.span())))
        }
        other => fail(format!("`{other}` is not supported{}", at(e.span()))),
    }
}

fn compare(left: &SqlExpr, op: &BinaryOperator, right: &SqlExpr, span: Span) -> Result<Expr> {
    let op = match op {
        BinaryOperator::Eq => Op::Eq,
        BinaryOperator::NotEq => Op::NotEq,
        BinaryOperator::Lt => Op::Lt,
        BinaryOperator::LtEq => Op::LtEq,
        BinaryOperator::Gt => Op::Gt,
        BinaryOperator::GtEq => Op::GtEq,
        other => return fail(format!("operator `{other}` is not supported{}", at(span))),
    };
    let field = field(left)?;
    if !matches!(op, Op::Eq | Op::NotEq) {
        ordered(&field, span)?;
    }
    Ok(Expr::Compare {
        value: literal(right, &field)?,
        field,
        op,
    })
}

/// `<`, `>` and BETWEEN need an order: not on `deleted`.
fn ordered(field: &Field, span: Span) -> Result<()> {
    if field.field_type() == FieldType::Bool {
        return fail(format!(
            "{} can only be compared with = or !={}",
            field.column(),
            at(span)
        ));
    }
    Ok(())
}

fn contains(args: &FunctionArguments, span: Span) -> Result<Expr> {
    let usage = || format!("contains takes (content, 'text'){}", at(span));
    let FunctionArguments::List(list) = args else {
        return fail(usage());
    };
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(target)), FunctionArg::Unnamed(FunctionArgExpr::Expr(text))] =
        list.args.as_slice()
    else {
        return fail(usage());
    };
    if !matches!(target, SqlExpr::Identifier(id) if id.value.eq_ignore_ascii_case("content")) {
        return fail(usage());
    }
    let SqlExpr::Value(v) = text else {
        return fail(usage());
    };
    let (SqlValue::SingleQuotedString(text) | SqlValue::DoubleQuotedString(text)) = &v.value else {
        return fail(usage());
    };
    let words = words(text);
    if words.is_empty() {
        return fail(format!("contains needs at least one word{}", at(span)));
    }
    Ok(Expr::Contains(words))
}

/// The words of a text as both backends index content: runs of letters and digits,
/// lowercased. Storage indexes documents through the same function.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

pub(crate) fn field(e: &SqlExpr) -> Result<Field> {
    match e {
        SqlExpr::Identifier(id) => column(id, e.span()),
        SqlExpr::CompoundIdentifier(parts) => match parts.as_slice() {
            [map, key] if is_map(map) => {
                if key.value.is_empty() {
                    return fail(format!("empty key{}", at(e.span())));
                }
                Ok(if map.value.eq_ignore_ascii_case("labels") {
                    Field::Label(key.value.clone())
                } else {
                    Field::Annotation(key.value.clone())
                })
            }
            [map, ..] if is_map(map) => fail(format!(
                "a key with dots goes in backquotes, as in labels.`app.kubernetes.io/name`{}",
                at(e.span())
            )),
            _ => fail(format!("unknown column `{e}`{}", at(e.span()))),
        },
        // `labels['app.kubernetes.io/name']`: the key as a string, dots and all.
        SqlExpr::CompoundFieldAccess { root, access_chain } => {
            match (root.as_ref(), access_chain.as_slice()) {
                (
                    SqlExpr::Identifier(map),
                    [AccessExpr::Subscript(Subscript::Index {
                        index: SqlExpr::Value(key),
                    })],
                ) if is_map(map) => match &key.value {
                    SqlValue::SingleQuotedString(key) | SqlValue::DoubleQuotedString(key)
                        if !key.is_empty() =>
                    {
                        Ok(if map.value.eq_ignore_ascii_case("labels") {
                            Field::Label(key.clone())
                        } else {
                            Field::Annotation(key.clone())
                        })
                    }
                    _ => fail(format!(
                        "a key is a non-empty string, as in labels['app']{}",
                        at(e.span())
                    )),
                },
                _ => fail(format!("unknown column `{e}`{}", at(e.span()))),
            }
        }
        SqlExpr::Nested(inner) => field(inner),
        other => fail(format!(
            "expected a column, found `{other}`{}",
            at(other.span())
        )),
    }
}

fn is_map(id: &Ident) -> bool {
    id.value.eq_ignore_ascii_case("labels") || id.value.eq_ignore_ascii_case("annotations")
}

fn column(id: &Ident, span: Span) -> Result<Field> {
    let name = id.value.to_ascii_lowercase();
    if let Some((_, field)) = Field::COLUMNS.iter().find(|(c, _)| *c == name) {
        return Ok(field.clone());
    }
    if name == "content" {
        return fail(format!(
            "content is searched with contains(content, 'text'){}",
            at(span)
        ));
    }
    if name == "labels" || name == "annotations" {
        return fail(format!("name a key: {name}.KEY{}", at(span)));
    }
    fail(format!(
        "unknown column `{}`{}; columns: cluster, apiVersion, kind, namespace, name, uid, \
         resourceVersion, creationTimestamp, deletionTimestamp, syncAt, deleted, labels.KEY, \
         annotations.KEY, issue, severity, score",
        id.value,
        at(span)
    ))
}

/// An audit finding's severities, as storage keeps them.
const SEVERITIES: [&str; 3] = ["High", "Medium", "Low"];

/// A literal for `field`, converted to its type (a severity in its stored spelling).
fn literal(e: &SqlExpr, field: &Field) -> Result<Value> {
    if field.field_type() == FieldType::Time {
        return time_value(e, &field.column()).map(Value::Time);
    }
    let span = e.span();
    let SqlExpr::Value(v) = e else {
        return fail(format!(
            "expected a literal for {}, found `{e}`{}",
            field.column(),
            at(span)
        ));
    };
    let text = match &v.value {
        SqlValue::SingleQuotedString(s) | SqlValue::DoubleQuotedString(s) => s.clone(),
        SqlValue::Number(n, _) => n.to_string(),
        SqlValue::Boolean(b) => b.to_string(),
        SqlValue::Null => {
            return fail(format!("NULL is not supported{}", at(span)));
        }
        other => return fail(format!("literal `{other}` is not supported{}", at(span))),
    };
    match field.field_type() {
        FieldType::Text if *field == Field::Severity => {
            match SEVERITIES.iter().find(|s| s.eq_ignore_ascii_case(&text)) {
                Some(severity) => Ok(Value::Text((*severity).to_owned())),
                None => fail(format!(
                    "severity is High, Medium or Low, not {text:?}{}",
                    at(span)
                )),
            }
        }
        FieldType::Text => Ok(Value::Text(text)),
        FieldType::Bool => match text.to_ascii_lowercase().as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => fail(format!("{} is true or false{}", field.column(), at(span))),
        },
        FieldType::Number => text.parse().map(Value::Number).map_err(|_| {
            SearchError(format!(
                "{} takes a whole number, not {text:?}{}",
                field.column(),
                at(span)
            ))
        }),
        FieldType::Time => time_value(e, &field.column()).map(Value::Time),
    }
}

/// A time: an RFC 3339 string, `now()`, or either with an interval added or taken away
/// (`now() - interval 1 hour`), evaluated as the query is parsed.
pub(crate) fn time_value(e: &SqlExpr, column: &str) -> Result<OffsetDateTime> {
    let expected = || {
        SearchError(format!(
            "{column} takes an RFC 3339 time such as '2026-01-02T15:04:05Z', or now() - interval 1 hour, not `{e}`{}",
            at(e.span())
        ))
    };
    match e {
        SqlExpr::Nested(inner) => time_value(inner, column),
        SqlExpr::Value(v) => match &v.value {
            SqlValue::SingleQuotedString(s) | SqlValue::DoubleQuotedString(s) => {
                OffsetDateTime::parse(s, &Rfc3339).map_err(|_| expected())
            }
            _ => Err(expected()),
        },
        SqlExpr::Function(f) if f.name.to_string().eq_ignore_ascii_case("now") => match &f.args {
            FunctionArguments::None => Ok(OffsetDateTime::now_utc()),
            FunctionArguments::List(list) if list.args.is_empty() => Ok(OffsetDateTime::now_utc()),
            _ => fail(format!("now() takes no arguments{}", at(e.span()))),
        },
        SqlExpr::BinaryOp {
            left,
            op: op @ (BinaryOperator::Minus | BinaryOperator::Plus),
            right,
        } => {
            let base = time_value(left, column)?;
            let SqlExpr::Interval(interval) = right.as_ref() else {
                return Err(expected());
            };
            let span = interval_length(interval, right.span())?;
            match op {
                BinaryOperator::Minus => base.checked_sub(span),
                _ => base.checked_add(span),
            }
            .ok_or_else(|| SearchError(format!("`{e}` is out of range{}", at(e.span()))))
        }
        _ => Err(expected()),
    }
}

/// `interval 90 minute`, `interval '2' hour` (MySQL's form: a count, then second,
/// minute, hour, day or week).
fn interval_length(interval: &Interval, span: Span) -> Result<time::Duration> {
    let usage = || {
        SearchError(format!(
            "an interval is a whole count of second, minute, hour, day or week, as in interval 1 hour{}",
            at(span)
        ))
    };
    if interval.last_field.is_some()
        || interval.leading_precision.is_some()
        || interval.fractional_seconds_precision.is_some()
    {
        return Err(usage());
    }
    let SqlExpr::Value(v) = interval.value.as_ref() else {
        return Err(usage());
    };
    let text = match &v.value {
        SqlValue::SingleQuotedString(s) | SqlValue::DoubleQuotedString(s) => s.trim().to_owned(),
        SqlValue::Number(n, _) => n.to_string(),
        _ => return Err(usage()),
    };
    let unit: i64 = match &interval.leading_field {
        Some(DateTimeField::Second | DateTimeField::Seconds) => 1,
        Some(DateTimeField::Minute | DateTimeField::Minutes) => 60,
        Some(DateTimeField::Hour | DateTimeField::Hours) => 3_600,
        Some(DateTimeField::Day | DateTimeField::Days) => 86_400,
        Some(DateTimeField::Week(None) | DateTimeField::Weeks) => 604_800,
        _ => return Err(usage()),
    };
    text.parse::<i64>()
        .ok()
        .filter(|n| *n >= 0)
        .and_then(|n| n.checked_mul(unit))
        .map(time::Duration::seconds)
        .ok_or_else(usage)
}

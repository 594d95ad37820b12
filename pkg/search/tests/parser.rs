//! Every construct of the dialect, and every refusal, including injection attempts.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use karpor_search::{keyword, parse, Expr, Field, Op, Order, Value};
use time::macros::datetime;

fn filter(sql: &str) -> Expr {
    parse(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).filter
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn live() -> Expr {
    Expr::Compare {
        field: Field::Deleted,
        op: Op::Eq,
        value: Value::Bool(false),
    }
}

fn cmp(field: Field, op: Op, value: Value) -> Expr {
    Expr::Compare { field, op, value }
}

fn refused(sql: &str, says: &str) {
    match parse(sql) {
        Ok(q) => panic!("{sql:?} was accepted: {q:?}"),
        Err(e) => assert!(
            e.to_string().contains(says),
            "{sql:?}: {e:?} does not say {says:?}"
        ),
    }
}

#[test]
fn no_where_matches_every_live_document() {
    let q = parse("select * from resources").unwrap();
    assert_eq!(q.filter, live());
    assert_eq!((q.limit, q.offset), (None, None));
    assert!(q.order_by.is_empty());
    assert_eq!(filter("SELECT * FROM RESOURCES"), live());
}

#[test]
fn every_comparison_operator() {
    for (sql_op, op) in [
        ("=", Op::Eq),
        ("!=", Op::NotEq),
        ("<>", Op::NotEq),
        ("<", Op::Lt),
        ("<=", Op::LtEq),
        (">", Op::Gt),
        (">=", Op::GtEq),
    ] {
        assert_eq!(
            filter(&format!("select * from resources where name {sql_op} 'a'")),
            Expr::And(vec![cmp(Field::Name, op, text("a")), live()]),
            "{sql_op}"
        );
    }
}

#[test]
fn every_column_by_its_name_in_any_case() {
    for (column, field) in [
        ("cluster", Field::Cluster),
        ("apiVersion", Field::ApiVersion),
        ("KIND", Field::Kind),
        ("namespace", Field::Namespace),
        ("name", Field::Name),
        ("uid", Field::Uid),
        ("resourceversion", Field::ResourceVersion),
    ] {
        assert_eq!(
            filter(&format!("select * from resources where {column} = 'x'")),
            Expr::And(vec![cmp(field, Op::Eq, text("x")), live()])
        );
    }
}

#[test]
fn numbers_compare_as_text_on_text_columns() {
    assert_eq!(
        filter("select * from resources where resourceVersion = 123"),
        Expr::And(vec![
            cmp(Field::ResourceVersion, Op::Eq, text("123")),
            live()
        ])
    );
}

#[test]
fn times_are_rfc3339_and_bools_are_bools() {
    assert_eq!(
        filter("select * from resources where creationTimestamp >= '2026-01-02T03:04:05Z'"),
        Expr::And(vec![
            cmp(
                Field::CreationTimestamp,
                Op::GtEq,
                Value::Time(datetime!(2026-01-02 03:04:05 UTC))
            ),
            live()
        ])
    );
    refused(
        "select * from resources where syncAt > 'yesterday'",
        "RFC 3339",
    );
    refused("select * from resources where deleted > false", "= or !=");
    refused(
        "select * from resources where deleted = 'maybe'",
        "true or false",
    );
}

#[test]
fn naming_deleted_drops_the_implied_filter() {
    assert_eq!(
        filter("select * from resources where deleted = true"),
        cmp(Field::Deleted, Op::Eq, Value::Bool(true))
    );
    assert_eq!(
        filter("select * from resources where kind = 'Pod' or deleted = true"),
        Expr::Or(vec![
            cmp(Field::Kind, Op::Eq, text("Pod")),
            cmp(Field::Deleted, Op::Eq, Value::Bool(true))
        ])
    );
}

#[test]
fn between_in_and_not_in() {
    assert_eq!(
        filter("select * from resources where name between 'a' and 'm'"),
        Expr::And(vec![
            Expr::Between {
                field: Field::Name,
                low: text("a"),
                high: text("m"),
                negated: false
            },
            live()
        ])
    );
    assert_eq!(
        filter("select * from resources where namespace not in ('kube-system', 'default')"),
        Expr::And(vec![
            Expr::In {
                field: Field::Namespace,
                values: vec![text("kube-system"), text("default")],
                negated: true
            },
            live()
        ])
    );
    assert!(matches!(
        filter("select * from resources where name not between 'a' and 'b'"),
        Expr::And(v) if matches!(v[0], Expr::Between { negated: true, .. })
    ));
}

#[test]
fn like_and_not_like() {
    assert_eq!(
        filter("select * from resources where name like 'web-%' and name not like '%_x'"),
        Expr::And(vec![
            Expr::Like {
                field: Field::Name,
                pattern: "web-%".into(),
                negated: false
            },
            Expr::Like {
                field: Field::Name,
                pattern: "%_x".into(),
                negated: true
            },
            live()
        ])
    );
    refused(
        "select * from resources where syncAt like '2026%'",
        "text column",
    );
}

#[test]
fn and_or_not_and_parentheses_keep_their_grouping() {
    assert_eq!(
        filter("select * from resources where not (kind = 'Pod' or kind = 'Service') and namespace = 'a'"),
        Expr::And(vec![
            Expr::Not(Box::new(Expr::Or(vec![
                cmp(Field::Kind, Op::Eq, text("Pod")),
                cmp(Field::Kind, Op::Eq, text("Service")),
            ]))),
            cmp(Field::Namespace, Op::Eq, text("a")),
            live()
        ])
    );
    assert_eq!(
        filter(
            "select * from resources where kind = 'Pod' or kind = 'Service' and namespace = 'a'"
        ),
        Expr::And(vec![
            Expr::Or(vec![
                cmp(Field::Kind, Op::Eq, text("Pod")),
                Expr::And(vec![
                    cmp(Field::Kind, Op::Eq, text("Service")),
                    cmp(Field::Namespace, Op::Eq, text("a")),
                ]),
            ]),
            live()
        ]),
        "AND binds tighter than OR"
    );
}

#[test]
fn labels_and_annotations_with_plain_and_backquoted_keys() {
    assert_eq!(
        filter("select * from resources where labels.app = 'web' and annotations.`example.com/owner` = 'team-a' and labels.`app.kubernetes.io/name` != 'db'"),
        Expr::And(vec![
            cmp(Field::Label("app".into()), Op::Eq, text("web")),
            cmp(Field::Annotation("example.com/owner".into()), Op::Eq, text("team-a")),
            cmp(Field::Label("app.kubernetes.io/name".into()), Op::NotEq, text("db")),
            live()
        ])
    );
    refused(
        "select * from resources where labels.app.kubernetes.io = 'x'",
        "backquotes",
    );
    refused("select * from resources where labels = 'x'", "name a key");
}

#[test]
fn contains_splits_words_like_the_index() {
    assert_eq!(
        filter("select * from resources where contains(content, 'Nginx-1.25 ÉTÉ')"),
        Expr::And(vec![
            Expr::Contains(vec!["nginx".into(), "1".into(), "25".into(), "été".into()]),
            live()
        ])
    );
    refused(
        "select * from resources where contains(name, 'x')",
        "contains takes",
    );
    refused(
        "select * from resources where contains(content)",
        "contains takes",
    );
    refused(
        "select * from resources where contains(content, ' -- ')",
        "at least one word",
    );
    refused(
        "select * from resources where content = 'x'",
        "contains(content",
    );
}

#[test]
fn order_by_limit_and_offset() {
    let q = parse("select * from resources order by kind desc, name limit 10 offset 20").unwrap();
    assert_eq!(
        q.order_by,
        vec![
            Order {
                field: Field::Kind,
                descending: true
            },
            Order {
                field: Field::Name,
                descending: false
            }
        ]
    );
    assert_eq!((q.limit, q.offset), (Some(10), Some(20)));
    let q = parse("select * from resources limit 5, 7").unwrap();
    assert_eq!((q.limit, q.offset), (Some(7), Some(5)));
    refused(
        "select * from resources order by labels.app",
        "not sort keys",
    );
    refused("select * from resources limit -1", "whole number");
    refused("select * from resources limit 'ten'", "whole number");
}

#[test]
fn keyword_search_is_its_own_form() {
    assert_eq!(
        keyword("  nginx ").unwrap().filter,
        Expr::And(vec![Expr::Keyword("nginx".into()), live()])
    );
    assert!(keyword("   ").is_err());
    assert!(keyword(&"k".repeat(300)).is_err());
}

#[test]
fn unknown_columns_and_functions_say_what_and_where() {
    refused(
        "select * from resources where colour = 'red'",
        "unknown column `colour` at line 1, column 31",
    );
    refused(
        "select * from resources where lower(name) = 'x'",
        "expected a column",
    );
    refused(
        "select * from resources where upper(name)",
        "unknown function `upper`",
    );
    refused(
        "select * from resources where name = other",
        "expected a literal",
    );
    refused(
        "select * from resources where name is null",
        "is not supported",
    );
    refused(
        "select * from resources where name = null",
        "NULL is not supported",
    );
    refused(
        "select * from resources where name ilike 'x'",
        "is not supported",
    );
    refused(
        "select * from resources where name like 'x' escape '!'",
        "is not supported",
    );
}

#[test]
fn only_the_one_statement_shape_is_accepted() {
    refused("select name from resources", "only `select *`");
    refused("select distinct * from resources", "DISTINCT");
    refused("select * from pods", "unknown table `pods`");
    refused(
        "select * from resources r join clusters c on r.cluster = c.name",
        "joins",
    );
    refused("select * from resources, clusters", "one table only");
    refused("select * from resources group by kind", "GROUP BY");
    refused(
        "select * from resources where name in (select name from resources)",
        "sub-queries",
    );
    refused("select * from (select * from resources) x", "sub-queries");
    refused(
        "select * from resources where exists (select 1)",
        "sub-queries",
    );
    refused(
        "select * from resources union select * from resources",
        "UNION",
    );
    refused("with x as (select 1) select * from resources", "WITH");
    refused("delete from resources", "only select");
    refused("drop table resources", "only select");
    refused("select * from resources for update", "unsupported clause");
    refused("", "empty");
}

#[test]
fn injection_attempts_are_refused_or_stay_literal() {
    // A value holding SQL is only ever a value.
    assert_eq!(
        filter("select * from resources where name = ''' OR 1=1 --'"),
        Expr::And(vec![cmp(Field::Name, Op::Eq, text("' OR 1=1 --")), live()])
    );
    refused("select * from resources where name = '' OR 1=1 --'", "");
    refused(
        "select * from resources where name = 'a'; drop table resources",
        "one statement only",
    );
    refused(
        "select * from resources; select * from resources",
        "stacked statements",
    );
    refused(
        "select * from resources where name = 'a' or 1=1",
        "expected a column",
    );
    refused("select * from resources where name = \u{2018}x\u{2019}", "");
    refused(
        "select * from resources where name = 'x' /* comment */ or deleted = true; --",
        "not valid SQL",
    );
    refused(
        &format!(
            "select * from resources where name = '{}'",
            "x".repeat(9000)
        ),
        "longer than",
    );
}

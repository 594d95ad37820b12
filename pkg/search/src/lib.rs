//! Karpor's search: `select * from resources where ...` parsed with `sqlparser` into a
//! backend-neutral [`Query`], which each storage backend translates (a parameterised SQL
//! statement; an Elasticsearch bool query). Anything outside the dialect is refused with
//! a message that says what and where.

mod dsl;
mod parse;
mod tree;

pub use dsl::{dsl, narrow};
pub use parse::{keyword, parse, words, SearchError};
pub use tree::{Expr, Field, FieldType, Op, Order, Query, Value};

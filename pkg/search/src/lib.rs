//! Karpor's search: `select * from resources where ...` parsed with `sqlparser` into a
//! backend-neutral [`Query`], which each storage backend translates (a parameterised SQL
//! statement; an Elasticsearch bool query), and `select * from changes where ...` over
//! history ([`ChangeSearch`]). Anything outside the dialect is refused with a message
//! that says what and where.

mod changes;
mod dsl;
mod parse;
mod table;
mod tree;

pub use changes::{parse_changes, ChangeSearch, CHANGE_TYPES};
pub use dsl::{dsl, narrow};
pub use parse::{keyword, parse, words, SearchError};
pub use table::{parse_table, Shape, TableQuery, MAX_COLUMNS, MAX_GROUPS};
pub use tree::{Expr, Field, FieldType, Op, Order, Query, Value};

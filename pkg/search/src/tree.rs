//! The query tree both storage backends translate.

use time::OffsetDateTime;

/// A parsed search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// Always holds the implied `deleted = false` unless the query names `deleted`.
    pub filter: Expr,
    /// Then by document id (in the direction of the last key), so every backend returns
    /// the same order.
    pub order_by: Vec<Order>,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// Matches every document.
    All,
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    Compare {
        field: Field,
        op: Op,
        value: Value,
    },
    In {
        field: Field,
        values: Vec<Value>,
        negated: bool,
    },
    Between {
        field: Field,
        low: Value,
        high: Value,
        negated: bool,
    },
    /// SQL `LIKE`: `%` any run, `_` one character; case-sensitive (except `kind`).
    Like {
        field: Field,
        pattern: String,
        negated: bool,
    },
    /// `contains(content, 'words')`: every word appears in the object's text.
    Contains(Vec<String>),
    /// `keyword=`: the term is in the name, the namespace, a label, or the content.
    Keyword(String),
    /// A caller's scope (added by the API, never parsed): it narrows what matches like any
    /// term, but a backend should not choose it to find the rows by, so a scoped query
    /// keeps the unscoped one's plan.
    Scope(Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

/// A document field a query may name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Field {
    Cluster,
    ApiVersion,
    /// Compared case-insensitively.
    Kind,
    Namespace,
    Name,
    Uid,
    ResourceVersion,
    CreationTimestamp,
    DeletionTimestamp,
    SyncAt,
    Deleted,
    Label(String),
    Annotation(String),
    /// The id of one of the object's audit findings (any of them matches).
    Issue,
    /// The severity of one of the object's audit findings (`High`, `Medium`, `Low`).
    Severity,
    /// The object's audit score, 0 to 100.
    Score,
    /// One of the keys the object is indexed under for the topology (`owner:UID`,
    /// `ref:GROUP/KIND/NAMESPACE/NAME`): not a column queries name.
    Ref,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    Text,
    Time,
    Bool,
    Number,
}

impl Field {
    /// The name as written in a query, for messages.
    pub fn column(&self) -> String {
        match self {
            Field::Cluster => "cluster".into(),
            Field::ApiVersion => "apiVersion".into(),
            Field::Kind => "kind".into(),
            Field::Namespace => "namespace".into(),
            Field::Name => "name".into(),
            Field::Uid => "uid".into(),
            Field::ResourceVersion => "resourceVersion".into(),
            Field::CreationTimestamp => "creationTimestamp".into(),
            Field::DeletionTimestamp => "deletionTimestamp".into(),
            Field::SyncAt => "syncAt".into(),
            Field::Deleted => "deleted".into(),
            Field::Label(k) => format!("labels.`{k}`"),
            Field::Annotation(k) => format!("annotations.`{k}`"),
            Field::Issue => "issue".into(),
            Field::Severity => "severity".into(),
            Field::Score => "score".into(),
            Field::Ref => "ref".into(),
        }
    }

    pub fn field_type(&self) -> FieldType {
        match self {
            Field::CreationTimestamp | Field::DeletionTimestamp | Field::SyncAt => FieldType::Time,
            Field::Deleted => FieldType::Bool,
            Field::Score => FieldType::Number,
            _ => FieldType::Text,
        }
    }

    /// Fields a query may sort by (labels and annotations are maps, findings sets: not
    /// sort keys).
    pub fn sortable(&self) -> bool {
        !matches!(
            self,
            Field::Label(_) | Field::Annotation(_) | Field::Issue | Field::Severity | Field::Ref
        )
    }

    /// Fields whose values a grouped answer counts documents by (not times, `deleted` or
    /// `score`).
    pub fn groupable(&self) -> bool {
        matches!(
            self,
            Field::Cluster
                | Field::ApiVersion
                | Field::Kind
                | Field::Namespace
                | Field::Name
                | Field::Label(_)
                | Field::Annotation(_)
                | Field::Issue
                | Field::Severity
        )
    }

    /// The plain columns, by the names a query uses (matched case-insensitively).
    pub const COLUMNS: [(&'static str, Field); 14] = [
        ("cluster", Field::Cluster),
        ("apiversion", Field::ApiVersion),
        ("kind", Field::Kind),
        ("namespace", Field::Namespace),
        ("name", Field::Name),
        ("uid", Field::Uid),
        ("resourceversion", Field::ResourceVersion),
        ("creationtimestamp", Field::CreationTimestamp),
        ("deletiontimestamp", Field::DeletionTimestamp),
        ("syncat", Field::SyncAt),
        ("deleted", Field::Deleted),
        ("issue", Field::Issue),
        ("severity", Field::Severity),
        ("score", Field::Score),
    ];
}

/// A literal, already of its field's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Text(String),
    Time(OffsetDateTime),
    Bool(bool),
    /// A whole number (`score < 80`).
    Number(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub field: Field,
    pub descending: bool,
}

impl Expr {
    /// Whether the expression names the field anywhere.
    pub fn mentions(&self, field: &Field) -> bool {
        match self {
            Expr::All | Expr::Contains(_) | Expr::Keyword(_) => false,
            Expr::And(all) | Expr::Or(all) => all.iter().any(|e| e.mentions(field)),
            Expr::Not(e) | Expr::Scope(e) => e.mentions(field),
            Expr::Compare { field: f, .. }
            | Expr::In { field: f, .. }
            | Expr::Between { field: f, .. }
            | Expr::Like { field: f, .. } => f == field,
        }
    }
}

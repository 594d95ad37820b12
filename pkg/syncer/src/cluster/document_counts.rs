//! Each watched type's documents in storage, for its status: counted from storage's
//! aggregations (by kind; by version and namespace only where a kind alone does not tell
//! two watched types apart), every few seconds while the cluster's documents change.

use std::collections::HashMap;
use std::sync::Arc;

use karpor_search::{Expr, Field, Op, Value};
use karpor_storage::{Storage, StorageError};

use crate::cluster::sweep::{equals, query};
use crate::status::watched_types::TypeProgress;

/// Most distinct values read from storage at once.
const MAX_TERMS: usize = 10_000;

pub(crate) async fn count(
    storage: &dyn Storage,
    cluster: &str,
    types: &[Arc<TypeProgress>],
) -> Result<(), StorageError> {
    let live = vec![
        equals(Field::Cluster, cluster),
        Expr::Compare {
            field: Field::Deleted,
            op: Op::Eq,
            value: Value::Bool(false),
        },
    ];
    let by_kind = terms(storage, Field::Kind, &live).await?;
    let mut of_kind: HashMap<&str, Vec<&Arc<TypeProgress>>> = HashMap::new();
    for t in types {
        of_kind.entry(t.kind()).or_default().push(t);
    }
    for (kind, watched) in of_kind {
        if let [only] = watched.as_slice() {
            if only.id().namespace.is_none() {
                only.counted(by_kind.get(kind).copied().unwrap_or(0));
                continue;
            }
        }
        let mut filter = live.clone();
        filter.push(equals(Field::Kind, kind));
        let by_version = terms(storage, Field::ApiVersion, &filter).await?;
        let mut namespaces: HashMap<&str, HashMap<String, u64>> = HashMap::new();
        for t in watched {
            let Some(namespace) = &t.id().namespace else {
                t.counted(by_version.get(t.api_version()).copied().unwrap_or(0));
                continue;
            };
            if !namespaces.contains_key(t.api_version()) {
                let mut filter = filter.clone();
                filter.push(equals(Field::ApiVersion, t.api_version()));
                let counts = terms(storage, Field::Namespace, &filter).await?;
                namespaces.insert(t.api_version(), counts);
            }
            let counts = &namespaces[t.api_version()];
            t.counted(counts.get(namespace).copied().unwrap_or(0));
        }
    }
    Ok(())
}

async fn terms(
    storage: &dyn Storage,
    field: Field,
    filter: &[Expr],
) -> Result<HashMap<String, u64>, StorageError> {
    Ok(storage
        .terms(&field, &query(filter), MAX_TERMS)
        .await?
        .into_iter()
        .map(|b| (b.key, b.count))
        .collect())
}

//! What karpor made on its own (the built-in records its users' tools expect, such as
//! Karpor's `namespace` resource group rule): one marker per record made, so a record a
//! user deleted is not made again at the next start.

use serde::{Deserialize, Serialize};

use super::{validate_name, Kind, Record};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Seed {
    /// `KIND-NAME` of the record made ([`Seed::of`]).
    pub name: String,
}

impl Seed {
    /// The marker of `record`.
    pub fn of<T: Record>(record: &T) -> Seed {
        Seed {
            name: format!("{}-{}", T::KIND.as_str(), record.name()),
        }
    }
}

impl Record for Seed {
    const KIND: Kind = Kind::Seed;

    fn name(&self) -> &str {
        &self.name
    }

    fn validate(&self) -> Result<(), String> {
        validate_name(&self.name).map_err(|e| e.to_string())
    }
}

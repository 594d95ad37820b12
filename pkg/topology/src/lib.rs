//! How objects relate, as plain functions over their JSON: the built-in relation rules and
//! the rules in force, the reference keys a document is indexed under at ingest (so
//! "who refers to this object" is an index lookup), and the selectors and references the
//! topology reads from an object. No I/O: the syncer and the API bring the objects.

mod builtin;
mod keys;
mod path;
mod selector;

pub use builtin::{builtin_rules, in_force};
pub use keys::{
    owner_key, owner_kind_key, parse_reference_key, reference_key, reference_keys, references,
    selector_key, Target, OWNER_KIND,
};
pub use selector::{selector_at, selects};

//! karpor-audit through its public API, one test binary of modules.

mod fixtures;

mod config;
mod containers;
mod docs;
mod objects;
mod pdb;
mod pod;

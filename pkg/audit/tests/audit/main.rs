//! karpor-audit through its public API, one test binary of modules.

#![allow(clippy::unwrap_used)] // a test fails by panicking

mod fixtures;

mod config;
mod containers;
mod docs;
mod objects;
mod pdb;
mod pod;

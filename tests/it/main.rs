//! The integration tests of the `karpor` binary, as one test binary of modules (one link
//! instead of a dozen): each module runs the real binary against the real services the
//! test script starts. The security and reliability suites are binaries of their own,
//! run alone (they time probes under load). The harness is `karpor-testkit`.

#![allow(clippy::unwrap_used)] // a test fails by panicking

mod agent;
mod agent_live;
mod agent_replicas;
mod agent_resume;
mod ai;
mod api;
mod api_schemathesis;
mod audit;
mod backend_health;
mod cli;
mod cli_daily;
mod cli_history;
mod helm_chart;
mod karpor_contract;
mod logs;
mod mcp;
mod metadata_cli;
mod pod_logs;
mod smoke;
mod split_deployment;
mod sync_rules;
mod syncer_e2e;
mod test_services;
mod topology;
mod ui_browser;
mod upstream;

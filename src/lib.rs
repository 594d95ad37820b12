//! The `karpor` binary's library: the command line, the config, and the [`app::Application`]
//! that assembles the components of `pkg/` from config and runs them until shutdown.

mod agent_role;
mod app;
mod args;
pub mod cli;
mod client;
mod config;
mod health_cmd;
mod metadata_cmd;
mod shutdown;
mod telemetry;

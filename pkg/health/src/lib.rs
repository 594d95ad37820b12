//! The health subsystem of karpor (see `shared/health-spec.md`, the contract).
//!
//! Components implement [`HealthReporter`] and register with a [`HealthChecker`]; the
//! [`routes`] serve `/livez` and `/readyz` from it. This crate depends on no other karpor
//! crate: backends and components depend on it.

mod builtin;
mod checker;
mod config;
mod damping;
mod http;
mod metrics;
mod report;
mod reporter;
mod upstream;

pub use builtin::{Heartbeat, Ping, HEARTBEAT_CHECK, PING_CHECK};
pub use checker::{
    Endpoint, HealthChecker, Membership, ReportRequest, Settings, UnknownCheck, SHUTDOWN_CHECK,
};
pub use config::{CheckConfig, HealthConfig};
pub use damping::Thresholds;
pub use http::{routes, Hidden, LineFilter, PATHS};
pub use metrics::HealthMetrics;
pub use report::{Entry, HealthReport, Status};
pub use reporter::{CheckOutcome, ComponentType, Failure, HealthReporter, Reason};
pub use upstream::{HealthClient, ProbeError, ProbeOptions, ProbeResponse, UpstreamCheck};

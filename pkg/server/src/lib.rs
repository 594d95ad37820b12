//! The HTTP layer shared by `karpor serve` and `karpor syncer`: the router with request
//! ids and tracing on every request, Host and Origin checks, `/metrics`, the placeholder
//! page, and a listener (plain or TLS) that bounds every connection and stops gracefully
//! on one cancellation token.

mod guard;
mod metrics;
mod router;
mod serve;

pub use guard::AllowedHosts;
pub use metrics::{register_process, HttpMetrics};
pub use router::{router, RouterParts};
pub use serve::{serve, ClientCertificate, ConnectionLimits, Tls, TlsConfig};

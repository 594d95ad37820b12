//! The HTTP layer shared by `karpor serve` and `karpor syncer`: the router with request
//! ids and tracing on every request, `/metrics`, the placeholder page, and a listener
//! (plain or TLS) that stops gracefully on one cancellation token.

mod metrics;
mod router;
mod serve;

pub use router::{router, RouterParts};
pub use serve::{serve, TlsFiles};

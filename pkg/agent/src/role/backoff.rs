//! How the agent waits between tries of the hub: doubling from [`FIRST_BACKOFF`] to
//! [`MAX_BACKOFF`], each wait jittered so agents cut off together do not come back
//! together.

use std::time::Duration;

/// The longest wait between two tries of the hub.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// 0 to 1, from the system's random source (0.5 when it has none).
pub(crate) fn unit_random() -> f64 {
    let mut bytes = [0u8; 4];
    match getrandom::fill(&mut bytes) {
        Ok(()) => f64::from(u32::from_le_bytes(bytes)) / f64::from(u32::MAX),
        Err(_) => 0.5,
    }
}

/// Half to all of `wait`.
pub(crate) fn jittered(wait: Duration) -> Duration {
    wait.mul_f64(0.5 + unit_random() / 2.0)
}

//! Storage that was unreachable may come back without what it had acknowledged (a server
//! without a durable log, a restore from a snapshot, a lost volume), and no watch event
//! would ever say so. So storage is pinged on a short interval, and each time it is back
//! after an outage every cluster relists: its objects are written again and whatever the
//! clusters no longer have is purged.

use std::sync::Arc;
use std::time::Duration;

use karpor_storage::Storage;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Counts storage recoveries; a cluster sync relists whenever it changes.
pub type Recoveries = watch::Receiver<u64>;

/// Pings `storage` every `interval` (each ping bounded by it) until `stop`.
pub fn follow(
    storage: Arc<dyn Storage>,
    interval: Duration,
    stop: CancellationToken,
) -> Recoveries {
    let (sender, receiver) = watch::channel(0);
    tokio::spawn(async move {
        let mut down = false;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let reachable = matches!(
                tokio::time::timeout(interval, storage.ping()).await,
                Ok(Ok(()))
            );
            match (down, reachable) {
                (false, false) => {
                    tracing::warn!("storage unreachable; every cluster relists once it is back");
                    down = true;
                }
                (true, true) => {
                    tracing::info!("storage reachable again; every cluster relists");
                    down = false;
                    sender.send_modify(|n| *n += 1);
                }
                _ => {}
            }
        }
    });
    receiver
}

//! Storage that was unreachable may come back without what it had acknowledged (a server
//! without a durable log, a restore from a snapshot, a lost volume), and no watch event
//! would ever say so. So storage is pinged on a short interval, and each time it is back
//! after an outage every cluster relists: its objects are written again and whatever the
//! clusters no longer have is purged.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use karpor_storage::Storage;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::cluster::run::Recoveries;

/// Pings `storage` every `interval` (each ping bounded by it) until `stop`; the count of
/// its recoveries. The hub's agent listener follows it too, to have agents relist.
pub fn follow(
    storage: Arc<dyn Storage>,
    interval: Duration,
    stop: CancellationToken,
) -> watch::Receiver<u64> {
    follow_with(
        move || {
            let storage = storage.clone();
            async move { storage.ping().await.is_ok() }
        },
        interval,
        stop,
    )
}

fn follow_with<F, Fut>(ping: F, interval: Duration, stop: CancellationToken) -> Recoveries
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = bool> + Send,
{
    let (sender, receiver) = watch::channel(0);
    tokio::spawn(async move {
        let mut down = false;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            let reachable = tokio::time::timeout(interval, ping())
                .await
                .unwrap_or(false);
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU8, Ordering};

    use super::*;

    const UP: u8 = 0;
    const DOWN: u8 = 1;
    const HANGS: u8 = 2;

    /// Storage whose answer the test sets: up, refusing, or never answering.
    fn storage(state: Arc<AtomicU8>) -> impl Fn() -> futures::future::BoxFuture<'static, bool> {
        move || {
            let state = state.clone();
            Box::pin(async move {
                match state.load(Ordering::SeqCst) {
                    UP => true,
                    DOWN => false,
                    _ => std::future::pending().await,
                }
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_outage_ends_in_exactly_one_recovery() {
        let state = Arc::new(AtomicU8::new(UP));
        let stop = CancellationToken::new();
        let interval = Duration::from_secs(2);
        let recoveries = follow_with(storage(state.clone()), interval, stop.clone());
        let periods = |n: u32| tokio::time::sleep(interval * n);

        periods(5).await;
        assert_eq!(*recoveries.borrow(), 0, "no outage, no relist");
        state.store(DOWN, Ordering::SeqCst);
        periods(5).await;
        assert_eq!(*recoveries.borrow(), 0, "nothing while it is down");
        state.store(UP, Ordering::SeqCst);
        periods(2).await;
        assert_eq!(*recoveries.borrow(), 1);
        periods(5).await;
        assert_eq!(*recoveries.borrow(), 1, "once per outage");
        // A hang is an outage too.
        state.store(HANGS, Ordering::SeqCst);
        periods(5).await;
        state.store(UP, Ordering::SeqCst);
        periods(3).await;
        assert_eq!(*recoveries.borrow(), 2);
        stop.cancel();
    }
}

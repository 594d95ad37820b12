//! A TCP proxy that can cut the link it carries: between an agent and its hub, so a test
//! can take the network away (every connection dropped, new ones refused) and give it
//! back, as a real network fails.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Forwards `127.0.0.1:PORT` to a target until dropped.
pub struct FaultProxy {
    pub addr: SocketAddr,
    /// `true` while the link is cut.
    cut: Arc<watch::Sender<bool>>,
    stop: CancellationToken,
}

impl FaultProxy {
    /// A proxy to `target`, the link up. Needs a Tokio runtime.
    pub async fn start(target: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(watch::Sender::new(false));
        let stop = CancellationToken::new();
        tokio::spawn(accept(listener, target, cut.clone(), stop.clone()));
        FaultProxy { addr, cut, stop }
    }

    /// Every connection dropped now, and new ones closed as they come, until
    /// [`FaultProxy::restore`].
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept(
    listener: TcpListener,
    target: SocketAddr,
    cut: Arc<watch::Sender<bool>>,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else { continue };
        if *cut.borrow() {
            drop(client);
            continue;
        }
        let (mut cut, stop) = (cut.subscribe(), stop.clone());
        tokio::spawn(async move {
            let Ok(mut server) = TcpStream::connect(target).await else {
                return;
            };
            let mut client = client;
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = cut.wait_for(|cut| *cut) => {}
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
            }
        });
    }
}

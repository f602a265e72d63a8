//! The inbound side's one socket rule: every HTTP listener Switchboard serves (the web
//! app and its sandbox proxy, team mode, the gateway's `--http`, the demo server) is
//! wrapped by [`no_delay`], which sets `TCP_NODELAY` on each accepted connection. An
//! answer is several small writes (headers, then SSE events or a JSON body); with
//! Nagle's algorithm each write after the first waits for the peer's delayed ACK, about
//! 40 ms per request on a kept-alive connection.
//!
//! Must not: bind or accept anything itself (callers bind, axum accepts), or fail a
//! connection because the option could not be set (that is logged at debug).

use axum::serve::{ListenerExt, TapIo};
use tokio::net::{TcpListener, TcpStream};

/// A listener whose accepted connections have `TCP_NODELAY` set.
pub type NoDelayListener = TapIo<TcpListener, fn(&mut TcpStream)>;

fn set_no_delay(tcp: &mut TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!("cannot set TCP_NODELAY on an accepted connection: {e}");
    }
}

/// `listener` for `axum::serve`, setting `TCP_NODELAY` on every accepted connection.
pub fn no_delay(listener: TcpListener) -> NoDelayListener {
    listener.tap_io(set_no_delay as fn(&mut TcpStream))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)]
    use super::*;
    use axum::serve::Listener as _;

    #[tokio::test]
    async fn accepted_connections_have_no_delay_set() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = no_delay(listener);
        let client = tokio::spawn(async move { TcpStream::connect(addr).await.unwrap() });
        let (accepted, _) = listener.accept().await;
        assert!(accepted.nodelay().unwrap());
        // A plain accept does not set it (the wrapper is what does).
        let plain = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = plain.local_addr().unwrap();
        let other = tokio::spawn(async move { TcpStream::connect(addr).await.unwrap() });
        let (raw, _) = plain.accept().await.unwrap();
        assert!(!raw.nodelay().unwrap());
        drop((client.await, other.await));
    }
}

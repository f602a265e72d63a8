//! Extra CA certificates: a local TLS server on 127.0.0.1 with a certificate from a
//! test CA is trusted only when the CA file is configured.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use std::path::PathBuf;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use switchboard_net::{ClientOptions, GuardedClient, NetError, ProxySetting, UrlPolicy};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

async fn tls_server() -> u16 {
    let certs = CertificateDer::pem_file_iter(fixture("localhost.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(fixture("localhost.key")).unwrap();
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(sock).await else {
                    return;
                };
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let _ = tls
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\ntls",
                    )
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    port
}

fn options(ca_file: Option<PathBuf>) -> ClientOptions {
    let mut o = ClientOptions::new(UrlPolicy::Local);
    o.proxy = ProxySetting::Disabled;
    o.use_ssl_cert_file = false;
    o.ca_file = ca_file;
    o.connect_timeout = Duration::from_secs(5);
    o.timeout = Some(Duration::from_secs(20));
    o
}

#[tokio::test]
async fn ca_file_is_trusted() {
    let port = tls_server().await;
    let c = GuardedClient::new(options(Some(fixture("ca-bundle.pem")))).unwrap();
    let resp = c
        .send(c.get(&format!("https://localhost:{port}/")))
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "tls");
}

#[tokio::test]
async fn without_the_ca_the_server_is_not_trusted() {
    let port = tls_server().await;
    // Building may already fail on a machine without system roots; either way, no
    // trusted connection and no guard verdict.
    let result = match GuardedClient::new(options(None)) {
        Ok(c) => c
            .send(c.get(&format!("https://localhost:{port}/")))
            .await
            .map(|_| ()),
        Err(e) => Err(e),
    };
    let err = result.unwrap_err();
    assert!(err.blocked().is_none(), "{err}");
    assert!(
        matches!(err, NetError::Request { .. } | NetError::Build(_)),
        "{err:?}"
    );
}

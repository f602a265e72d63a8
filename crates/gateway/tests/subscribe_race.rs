//! Two clients subscribing at once to a resource whose server refuses the subscription
//! (slowly): the gateway makes one upstream subscription attempt, and both clients are
//! told it failed — the second is not told yes while hearing nothing ever after. And a
//! subscription the client cancels while it is being made is undone upstream.
#![allow(deprecated)] // resources/subscribe: legacy-only in rmcp, current up to 2025-11-25

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{
    ClientRequest, ErrorData, ListResourcesResult, PaginatedRequestParams, ProtocolVersion,
    Resource, ServerCapabilities, ServerConfig, SubscribeRequest, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{PeerRequestOptions, RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};

/// Offers one resource and declares subscriptions; takes 400 ms to subscribe, then
/// refuses (`refuse`) or succeeds. Counts subscribes and unsubscribes.
#[derive(Clone, Default)]
struct Slow {
    refuse: bool,
    asked: Arc<AtomicUsize>,
    unsubscribed: Arc<AtomicUsize>,
}

impl ServerHandler for Slow {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
    }

    /// `resources/subscribe` exists only up to 2025-11-25.
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(
            &ProtocolVersion::LATEST_WITH_INITIALIZE,
        ))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![Resource::new(
            "file:///r",
            "r",
        )]))
    }

    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(400)).await;
        if self.refuse {
            return Err(ErrorData::invalid_params("no updates for this one", None));
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.unsubscribed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_subscriber_is_refused_with_the_first() {
    let server = Slow {
        refuse: true,
        ..Default::default()
    };
    let (gateway, served) = crate::upstream::gateway_over("refusing", server.clone()).await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(().serve(crate::upstream::session(&gateway)).await.unwrap());
    }
    let resources = clients[0].list_all_resources().await.unwrap();
    let uri = resources
        .iter()
        .map(|r| r.uri.clone())
        .find(|u| u.ends_with("file:///r"))
        .unwrap_or_else(|| panic!("{resources:?}"));

    let subscribe = |i: usize| {
        let peer = clients[i].peer().clone();
        let uri = uri.clone();
        async move { peer.subscribe(SubscribeRequestParams::new(uri)).await }
    };
    let (a, b) = tokio::join!(subscribe(0), subscribe(1));
    let a = a.expect_err("the first is refused");
    let b = b.expect_err("the second is refused with it, not told yes");
    assert!(a.to_string().contains("no updates for this one"), "{a}");
    assert!(b.to_string().contains("no updates for this one"), "{b}");
    assert_eq!(
        server.asked.load(Ordering::SeqCst),
        1,
        "one upstream attempt"
    );

    // Nothing is left of either: a third client's subscription is a new attempt.
    let c = subscribe(2).await.expect_err("refused again");
    assert!(c.to_string().contains("no updates for this one"), "{c}");
    assert_eq!(server.asked.load(Ordering::SeqCst), 2);
    gateway.shutdown().await;
    served.abort();
}

/// A client that cancels its `resources/subscribe` while the server is still making it:
/// the subscription goes through upstream, and the gateway then undoes it (rmcp lets
/// the handler run on after a cancellation).
#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_subscribe_is_undone() {
    let server = Slow::default();
    let (gateway, served) = crate::upstream::gateway_over("slow", server.clone()).await;
    let client = ().serve(crate::upstream::session(&gateway)).await.unwrap();
    let resources = client.list_all_resources().await.unwrap();
    let uri = resources[0].uri.clone();
    let request =
        ClientRequest::SubscribeRequest(SubscribeRequest::new(SubscribeRequestParams::new(uri)));
    let handle = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.cancel(Some("changed my mind".into())).await.unwrap();
    let undone = async {
        while server.unsubscribed.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), undone)
        .await
        .expect("the upstream subscription made after the cancel is undone");
    assert_eq!(server.asked.load(Ordering::SeqCst), 1);
    gateway.shutdown().await;
    served.abort();
}

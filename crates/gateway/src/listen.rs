//! `subscriptions/listen` (protocol 2026-07-28), the way a client on that revision hears
//! that the gateway's lists changed: it has no session for `notifications/*/list_changed`
//! to arrive on, so it keeps one request open and the gateway sends the notifications
//! on it. The gateway accepts the three list-changed kinds and sends each change its
//! catalog goes through ([`ListsChanged`], from comparing one catalog with the next);
//! the personal gateway also accepts resource subscriptions and sends their updates
//! (`crate::subscriptions`).
//!
//! Must not: send a kind the client did not ask for (rmcp's sink refuses it), or keep
//! a subscription open after the client cancelled it.

use rmcp::model::{
    ErrorData, PromptListChangedNotification, ResourceListChangedNotification,
    ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerNotification,
    SubscriptionFilter, ToolListChangedNotification,
};
use rmcp::service::SubscriptionContext;
use tokio::sync::{broadcast, mpsc};

use crate::catalog::Catalog;

/// Which of the gateway's lists differ between two catalogs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListsChanged {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
}

impl ListsChanged {
    /// Every list (a listener that missed changes hears all three).
    pub const ALL: Self = Self {
        tools: true,
        prompts: true,
        resources: true,
    };

    /// What differs from `old` to `new` (resources and resource templates together).
    pub fn between(old: &Catalog, new: &Catalog) -> Self {
        fn differs<T: serde::Serialize>(a: &[T], b: &[T]) -> bool {
            a.len() != b.len() || serde_json::to_value(a).ok() != serde_json::to_value(b).ok()
        }
        Self {
            tools: differs(&old.tools, &new.tools),
            prompts: differs(&old.prompts, &new.prompts),
            resources: differs(&old.resources, &new.resources)
                || differs(&old.templates, &new.templates),
        }
    }

    /// Whether anything changed.
    pub fn any(self) -> bool {
        self.tools || self.prompts || self.resources
    }
}

/// The subscription filter the gateway accepts: the three list-changed kinds.
pub fn list_filter() -> SubscriptionFilter {
    SubscriptionFilter::builder()
        .tools_list_changed()
        .prompts_list_changed()
        .resources_list_changed()
        .build()
}

/// Sends `changed` on the subscription (only the kinds it accepted).
pub async fn notify_listener(sub: &SubscriptionContext, changed: ListsChanged) {
    let accepted = sub.accepted();
    let mut out = Vec::new();
    if changed.tools && accepted.tools_list_changed == Some(true) {
        out.push(ServerNotification::ToolListChangedNotification(
            ToolListChangedNotification::default(),
        ));
    }
    if changed.prompts && accepted.prompts_list_changed == Some(true) {
        out.push(ServerNotification::PromptListChangedNotification(
            PromptListChangedNotification::default(),
        ));
    }
    if changed.resources && accepted.resources_list_changed == Some(true) {
        out.push(ServerNotification::ResourceListChangedNotification(
            ResourceListChangedNotification::default(),
        ));
    }
    for n in out {
        if let Err(e) = sub.sink().send(n).await {
            tracing::debug!("subscriptions/listen: {e}");
        }
    }
}

/// Serves one subscription from `changes`, and the URIs of subscribed resources that
/// changed from `updates` (once its senders are gone, only `changes`), until the client
/// cancels it (or the gateway stops).
pub async fn serve_listen(
    sub: SubscriptionContext,
    mut changes: broadcast::Receiver<ListsChanged>,
    mut updates: mpsc::Receiver<String>,
) -> Result<(), ErrorData> {
    loop {
        tokio::select! {
            () = sub.cancelled() => return Ok(()),
            r = changes.recv() => match r {
                Ok(c) => notify_listener(&sub, c).await,
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    notify_listener(&sub, ListsChanged::ALL).await;
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            },
            Some(uri) = updates.recv() => {
                let n = ServerNotification::ResourceUpdatedNotification(
                    ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new(uri)),
                );
                if let Err(e) = sub.sink().send(n).await {
                    tracing::debug!("subscriptions/listen: {e}");
                }
            }
        }
    }
}

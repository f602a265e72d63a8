//! Progress routed in the order the server sent it. rmcp hands each notification to a
//! task of its own but a response straight to the waiting call, so a progress
//! notification sent just before a result could reach the caller after it (or, once
//! the call has removed its sink, not at all). Every transport of a connection is
//! wrapped in a [`ProgressTap`], which routes a progress notification to its call's
//! sink as it is read, before the next message — the result included — is handed on.
//! rmcp queues a request before its caller registers the sink, so a notification read
//! in between is kept by the handler's `ProgressRouter` (the newest 64 at most) and
//! handed to that call first, when it registers.
//!
//! Must not: change, hold back or drop any message (the notification still goes on to
//! rmcp, whose own progress handling — request timeouts reset by progress — needs it).

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use crate::handler::ProgressRouter;

/// A transport whose progress notifications are routed as they are read.
pub(crate) struct ProgressTap<T> {
    inner: T,
    progress: Arc<ProgressRouter>,
}

impl<T> ProgressTap<T> {
    pub(crate) fn new(inner: T, progress: &Arc<ProgressRouter>) -> Self {
        Self {
            inner,
            progress: progress.clone(),
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ProgressTap<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let progress = self.progress.clone();
        let next = self.inner.receive();
        async move {
            let message = next.await?;
            if let JsonRpcMessage::Notification(n) = &message
                && let ServerNotification::ProgressNotification(p) = &n.notification
            {
                progress.route(p.params.clone());
            }
            Some(message)
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

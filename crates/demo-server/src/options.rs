//! Options shared by every way of serving the demo server.

use std::time::Duration;

/// Tunables for the demo server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DemoOptions {
    /// Sleep this long before answering `initialize` (and `server/discover`),
    /// to make latency-bound discovery benchmarks measurable. Zero by default.
    pub startup_delay: Duration,
}

impl DemoOptions {
    /// Options with the given start-up delay.
    pub fn with_startup_delay(mut self, startup_delay: Duration) -> Self {
        self.startup_delay = startup_delay;
        self
    }
}

//! A per-address rate limit for the team server's anonymous endpoints that make work or
//! rows for whoever calls them (dynamic registration, and fetching a client's metadata
//! document): a token bucket per client address, `burst` requests at once and one more
//! every `every`. In memory, per instance: behind a load balancer with N instances an
//! address gets up to N times the rate, which still bounds it; what must hold across
//! instances (the number of stored never-approved clients) is bounded in the store.
//!
//! The address is the TCP peer of the connection (axum's `ConnectInfo`), never a header:
//! `X-Forwarded-For` and `Forwarded` are written by whoever sends the request, so trusting
//! them would let anyone pick a fresh address per request. Behind a reverse proxy every
//! request comes from the proxy's address, so the limit becomes one limit for everyone
//! behind it (the instance is still protected; a flood then delays every client's
//! registration, which is why metadata-document clients, which need none, are preferred).
//! IPv6 addresses are limited per /64 (one host usually holds a whole /64).
//!
//! Must not: grow without bound (at most [`MAX_ADDRESSES`] buckets: full buckets are
//! forgotten first, and past that a new address is refused as limited), or trust a
//! request header for the address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most this many addresses are tracked at once.
pub const MAX_ADDRESSES: usize = 10_000;

/// The key an address is limited under: IPv4 as is, IPv6 by its /64, no address (a
/// router served without connection info) as one shared key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    V4(u32),
    V6Prefix(u64),
    Unknown,
}

fn key(addr: Option<IpAddr>) -> Key {
    match addr {
        Some(IpAddr::V4(v4)) => Key::V4(u32::from(v4)),
        Some(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => Key::V4(u32::from(v4)),
            None => Key::V6Prefix((u128::from(v6) >> 64) as u64),
        },
        None => Key::Unknown,
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Token buckets by client address.
#[derive(Debug)]
pub struct RateLimiter {
    burst: u32,
    every: Duration,
    buckets: Mutex<HashMap<Key, Bucket>>,
}

impl RateLimiter {
    /// `burst` requests at once per address, then one per `every` (`burst` 0 is taken as 1).
    pub fn new(burst: u32, every: Duration) -> Self {
        Self {
            burst: burst.max(1),
            every: every.max(Duration::from_millis(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn refilled(&self, b: Bucket, now: Instant) -> f64 {
        let gained = now.duration_since(b.at).as_secs_f64() / self.every.as_secs_f64();
        (b.tokens + gained).min(f64::from(self.burst))
    }

    /// Take one request for `addr`: `Ok`, or how long until one is allowed.
    pub fn check(&self, addr: Option<IpAddr>) -> Result<(), Duration> {
        let now = Instant::now();
        let Ok(mut buckets) = self.buckets.lock() else {
            // A panicked holder: refuse rather than let everything through.
            return Err(self.every);
        };
        let k = key(addr);
        if !buckets.contains_key(&k) && buckets.len() >= MAX_ADDRESSES {
            let burst = f64::from(self.burst);
            buckets.retain(|_, b| self.refilled(*b, now) < burst);
            if buckets.len() >= MAX_ADDRESSES {
                return Err(self.every);
            }
        }
        let b = buckets.entry(k).or_insert(Bucket {
            tokens: f64::from(self.burst),
            at: now,
        });
        let tokens = self.refilled(*b, now);
        if tokens >= 1.0 {
            *b = Bucket {
                tokens: tokens - 1.0,
                at: now,
            };
            return Ok(());
        }
        *b = Bucket { tokens, at: now };
        Err(self.every.mul_f64(1.0 - tokens))
    }
}

/// Whole seconds to put in `Retry-After` for `wait` (at least 1).
pub fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn a_burst_then_one_per_interval_per_address() {
        let l = RateLimiter::new(3, Duration::from_secs(60));
        let a = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
        let b = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)));
        for _ in 0..3 {
            assert!(l.check(a).is_ok());
        }
        let wait = l.check(a).unwrap_err();
        assert!(wait > Duration::from_secs(50) && wait <= Duration::from_secs(60));
        assert_eq!(retry_after_secs(wait), 60);
        // Another address has its own bucket.
        assert!(l.check(b).is_ok());
        // One /64 is one key; another /64 is not.
        let v6 = |last: u16, net: u16| {
            Some(IpAddr::V6(Ipv6Addr::new(
                0x2001, 0xdb8, 0, net, 0, 0, 0, last,
            )))
        };
        assert!(l.check(v6(1, 1)).is_ok());
        assert!(l.check(v6(2, 1)).is_ok());
        assert!(l.check(v6(3, 1)).is_ok());
        assert!(l.check(v6(4, 1)).is_err());
        assert!(l.check(v6(1, 2)).is_ok());
        // An IPv4-mapped IPv6 address is its IPv4 address.
        let mapped = Some(IpAddr::V6(Ipv4Addr::new(192, 0, 2, 1).to_ipv6_mapped()));
        assert!(l.check(mapped).is_err());
    }

    #[test]
    fn tokens_come_back_with_time() {
        let l = RateLimiter::new(1, Duration::from_millis(20));
        assert!(l.check(None).is_ok());
        assert!(l.check(None).is_err());
        std::thread::sleep(Duration::from_millis(30));
        assert!(l.check(None).is_ok());
    }

    #[test]
    fn the_table_is_bounded() {
        let l = RateLimiter::new(1, Duration::from_secs(3600));
        for i in 0..MAX_ADDRESSES {
            let ip = IpAddr::V4(Ipv4Addr::from(u32::try_from(i).unwrap() + 1));
            assert!(l.check(Some(ip)).is_ok());
        }
        // Every bucket is empty (none can be forgotten): a new address is limited.
        let new = Some(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)));
        assert!(l.check(new).is_err());
        assert!(l.buckets.lock().unwrap().len() <= MAX_ADDRESSES);
    }
}

//! Slowing down guessers: each address may fail a login a few times at once, and after that
//! only at a steady pace, however many connections it spreads its attempts over.
//!
//! Every failure moves the address's "free at" time one interval further into the future
//! (from now, if it lay in the past); an attempt waits until "free at" is no more than the
//! burst allowance ahead of the clock. Only failures count, so a host that logs in
//! correctly a thousand times a second (a pool tool opening many connections) never waits.
//! IPv6 clients are counted by their /64, the block one host is usually given.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures an address may make before it must wait.
const BURST: u32 = 10;

/// After the burst, one attempt per this interval.
const INTERVAL: Duration = Duration::from_millis(100);

/// Addresses remembered before the ones whose penalty has run out are forgotten.
const PRUNE_AT: usize = 4096;

/// The failures of every address, shared by all connections.
#[derive(Debug)]
pub struct Throttle {
    burst: u32,
    interval: Duration,
    free_at: Mutex<HashMap<IpAddr, Instant>>,
}

impl Default for Throttle {
    fn default() -> Throttle {
        Throttle::new(BURST, INTERVAL)
    }
}

impl Throttle {
    /// A throttle allowing `burst` failures at once and one more per `interval`.
    pub fn new(burst: u32, interval: Duration) -> Throttle {
        Throttle {
            burst,
            interval,
            free_at: Mutex::new(HashMap::new()),
        }
    }

    /// Waits until `peer` may make an attempt; false (without waiting) if that would take
    /// longer than `patience`.
    pub fn wait_turn(&self, peer: IpAddr, patience: Duration) -> bool {
        let wait = self.wait_for(peer, Instant::now());
        if wait > patience {
            return false;
        }
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        true
    }

    /// Records a failed attempt from `peer`.
    pub fn failed(&self, peer: IpAddr) {
        self.failed_at(peer, Instant::now());
    }

    fn wait_for(&self, peer: IpAddr, now: Instant) -> Duration {
        let free_at = self.lock().get(&block(peer)).copied();
        let allowance = self.interval * self.burst;
        free_at.map_or(Duration::ZERO, |t| {
            t.saturating_duration_since(now + allowance)
        })
    }

    fn failed_at(&self, peer: IpAddr, now: Instant) {
        let mut map = self.lock();
        if map.len() >= PRUNE_AT {
            map.retain(|_, t| *t > now);
        }
        let free_at = map.entry(block(peer)).or_insert(now);
        *free_at = (*free_at).max(now) + self.interval;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Instant>> {
        self.free_at.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The block an address is counted in: itself for IPv4, its /64 for IPv6.
pub fn block(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_burst_is_free_then_one_per_interval() {
        let t = Throttle::new(3, Duration::from_secs(1));
        let now = Instant::now();
        let a = ip("10.0.0.1");
        for _ in 0..3 {
            assert_eq!(t.wait_for(a, now), Duration::ZERO);
            t.failed_at(a, now);
        }
        assert_eq!(t.wait_for(a, now), Duration::ZERO, "the burst is used up");
        t.failed_at(a, now);
        assert_eq!(t.wait_for(a, now), Duration::from_secs(1));
        // Time pays the debt back.
        assert_eq!(t.wait_for(a, now + Duration::from_secs(1)), Duration::ZERO);
        // Other addresses are not slowed.
        assert_eq!(t.wait_for(ip("10.0.0.2"), now), Duration::ZERO);
    }

    #[test]
    fn ipv6_counts_by_64_and_mapped_ipv4_as_ipv4() {
        assert_eq!(block(ip("2001:db8::1")), block(ip("2001:db8::ffff:2")));
        assert_ne!(block(ip("2001:db8::1")), block(ip("2001:db8:0:1::1")));
        assert_eq!(block(ip("::ffff:10.0.0.1")), ip("10.0.0.1"));
    }

    #[test]
    fn patience_runs_out_without_waiting() {
        let t = Throttle::new(0, Duration::from_secs(60));
        let a = ip("10.0.0.1");
        t.failed(a);
        let started = Instant::now();
        assert!(!t.wait_turn(a, Duration::from_secs(1)));
        assert!(started.elapsed() < Duration::from_millis(500));
    }
}

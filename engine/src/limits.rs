//! Connection limits shared by every shard: `max.connections` and `max.connections.per.ip`.
//!
//! A connection over a limit is closed right after accept, before anything is read, with one
//! (rate-limited) log line — what Kafka does for `max.connections.per.ip`
//! (`TooManyConnectionsException`). Counting is cross-shard (connections land on any shard through
//! SO_REUSEPORT), so the total is an atomic and the per-IP table a mutex taken once per accept and
//! once per close, never per request.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
pub struct ConnectionLimits {
    total: AtomicUsize,
    per_ip: Mutex<hashbrown::HashMap<IpAddr, usize>>,
    /// Connections refused so far (for the log line and metrics).
    refused: AtomicU64,
}

/// A counted connection; dropping it gives its slot back.
#[derive(Debug)]
pub struct Slot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.limits.total.fetch_sub(1, Ordering::AcqRel);
        let mut per_ip = self.limits.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                per_ip.remove(&self.ip);
            }
        }
    }
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Total(usize),
    PerIp(usize),
}

impl ConnectionLimits {
    /// Take a slot for a connection from `ip`, or refuse it.
    pub fn admit(
        self: &Arc<Self>,
        ip: IpAddr,
        max_total: usize,
        max_per_ip: usize,
    ) -> Result<Slot, Refused> {
        let mut per_ip = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        let total = self.total.load(Ordering::Acquire);
        let from_ip = per_ip.get(&ip).copied().unwrap_or(0);
        let refused = if total >= max_total {
            Some(Refused::Total(max_total))
        } else if from_ip >= max_per_ip {
            Some(Refused::PerIp(max_per_ip))
        } else {
            None
        };
        if let Some(r) = refused {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(r);
        }
        *per_ip.entry(ip).or_insert(0) += 1;
        self.total.fetch_add(1, Ordering::AcqRel);
        Ok(Slot {
            limits: self.clone(),
            ip,
        })
    }

    pub fn open(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_count_per_ip_and_in_total_and_give_slots_back() {
        let l = Arc::new(ConnectionLimits::default());
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let s1 = l.admit(a, 3, 2).unwrap();
        let _s2 = l.admit(a, 3, 2).unwrap();
        assert_eq!(l.admit(a, 3, 2).unwrap_err(), Refused::PerIp(2));
        let _s3 = l.admit(b, 3, 2).unwrap();
        assert_eq!(l.admit(b, 3, 2).unwrap_err(), Refused::Total(3));
        drop(s1);
        assert_eq!(l.open(), 2);
        assert!(
            l.admit(a, 3, 2).is_ok(),
            "a closed connection frees its slot"
        );
        assert_eq!(l.refused(), 2);
    }
}

//! Connections per client address (docs/operations.md, "Limits": `connections_per_address`),
//! counted separately for HTTP and MQTT: one address cannot take every connection slot of a
//! listener and shut out every other client. An IPv6 client counts by its /64 (a host usually
//! holds a whole /64 and could otherwise take a fresh address for every connection). Trusted
//! proxies are not counted: every client behind them shares their address, and the proxy is
//! the place to limit each of them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use ipnet::IpNet;

/// The connections each address holds on one listener kind.
#[derive(Debug)]
pub struct AddressSlots {
    max: usize,
    /// Trusted proxies (`DEVICECLOUD_TRUSTED_PROXIES`), not counted.
    trusted: Vec<IpNet>,
    held: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection of an address, given back when dropped.
#[derive(Debug)]
pub struct AddressSlot {
    slots: Arc<AddressSlots>,
    /// `None` for a trusted proxy, which is not counted.
    key: Option<IpAddr>,
}

impl AddressSlots {
    /// At most `max` connections per address, the `trusted` proxies excepted.
    pub fn new(max: usize, trusted: Vec<IpNet>) -> Arc<AddressSlots> {
        Arc::new(AddressSlots {
            max,
            trusted,
            held: Mutex::default(),
        })
    }

    /// A slot for one more connection from `peer`, unless it holds `max` already.
    pub fn take(self: &Arc<Self>, peer: IpAddr) -> Option<AddressSlot> {
        let peer = peer.to_canonical();
        if self.trusted.iter().any(|net| net.contains(&peer)) {
            return Some(AddressSlot {
                slots: Arc::clone(self),
                key: None,
            });
        }
        let key = match peer {
            IpAddr::V4(_) => peer,
            IpAddr::V6(v6) => {
                let s = v6.segments();
                IpAddr::from([s[0], s[1], s[2], s[3], 0, 0, 0, 0])
            }
        };
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.entry(key).or_default();
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            slots: Arc::clone(self),
            key: Some(key),
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let Some(key) = self.key else {
            return;
        };
        let mut held = self.slots.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = held.get_mut(&key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_holds_at_most_max_and_a_trusted_proxy_is_not_counted() {
        let slots = AddressSlots::new(2, vec!["10.0.0.1/32".parse().unwrap()]);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let held: Vec<AddressSlot> = (0..2).map(|_| slots.take(a).unwrap()).collect();
        assert!(slots.take(a).is_none());
        assert!(slots.take("::ffff:192.0.2.1".parse().unwrap()).is_none());
        assert!(slots.take("192.0.2.2".parse().unwrap()).is_some());
        drop(held);
        assert!(slots.take(a).is_some());
        let proxy: Vec<AddressSlot> = (0..5)
            .map(|_| slots.take("10.0.0.1".parse().unwrap()).unwrap())
            .collect();
        assert_eq!(proxy.len(), 5);
        let v6: Vec<AddressSlot> = (0..2)
            .map(|i| slots.take(format!("2001:db8:1:2::{i}").parse().unwrap()).unwrap())
            .collect();
        assert!(slots.take("2001:db8:1:2:ffff::9".parse().unwrap()).is_none());
        drop(v6);
    }
}

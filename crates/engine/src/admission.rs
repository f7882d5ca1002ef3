//! Who may hold a connection to the MQTT listeners (docs/operations.md, "Limits"). A connection first needs a
//! place among the connections not yet authenticated (`mqtt_unauthenticated_max`, each with 5 s
//! to send its CONNECT) and one of its address's places (`connections_per_address`); it takes
//! one of the gateway slots (`mqtt_max_connections`) only once its CONNECT is accepted. So
//! strangers that connect and say nothing can neither take the gateways' slots nor hold a
//! place for long, and one address cannot take every place.

use std::net::IpAddr;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use ipnet::IpNet;

use crate::address_slots::{AddressSlot, AddressSlots};

/// The places of both MQTT listeners (plain and TLS count together).
#[derive(Debug)]
pub struct Admission {
    gateways: Arc<Semaphore>,
    unauthenticated: Arc<Semaphore>,
    addresses: Arc<AddressSlots>,
}

/// What an accepted connection holds: its address's place for as long as it lasts, and a place
/// among the unauthenticated until its CONNECT is answered.
#[derive(Debug)]
pub struct Entry {
    _address: AddressSlot,
    unauthenticated: Option<OwnedSemaphorePermit>,
}

impl Entry {
    /// The CONNECT was answered: the connection leaves the unauthenticated.
    pub fn answered(&mut self) {
        self.unauthenticated = None;
    }
}

/// The sizes of the places (`Limits::mqtt_max_connections`, `mqtt_unauthenticated_max`,
/// `connections_per_address`), and the proxies not counted per address.
pub struct Places {
    pub gateways: usize,
    pub unauthenticated: usize,
    pub per_address: usize,
    pub trusted: Vec<IpNet>,
}

impl Admission {
    pub fn new(places: Places) -> Admission {
        Admission {
            gateways: Arc::new(Semaphore::new(places.gateways)),
            unauthenticated: Arc::new(Semaphore::new(places.unauthenticated)),
            addresses: AddressSlots::new(places.per_address, places.trusted),
        }
    }

    /// The places a new connection from `peer` needs, or `None` when one is full: the
    /// connection is then closed at once, before anything of it is read.
    pub fn enter(&self, peer: IpAddr) -> Option<Entry> {
        let address = self.addresses.take(peer)?;
        let unauthenticated = Arc::clone(&self.unauthenticated).try_acquire_owned().ok()?;
        Some(Entry {
            _address: address,
            unauthenticated: Some(unauthenticated),
        })
    }

    /// A gateway slot for an authenticated connection, held until it ends; `None` when every
    /// slot is taken (CONNACK 3).
    pub fn gateway_slot(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.gateways).try_acquire_owned().ok()
    }
}

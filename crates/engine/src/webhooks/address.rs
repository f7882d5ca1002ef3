//! Webhook URLs: their form, and the rule that they reach only the public internet (docs/api.md,
//! "Webhooks"): every address the host resolves to must be globally reachable by the IANA IPv4
//! and IPv6 special-purpose address registries, or the URL is refused at creation, at every
//! change and at every delivery. `DEVICECLOUD_WEBHOOK_ALLOW_PRIVATE` lifts the rule (tests, labs).
//!
//! The check and the connection use one resolution: [`CheckedResolver`] is the HTTP client's
//! resolver, so the addresses it checked are the very ones connected to, and a name that
//! resolves to a public address for the check and a private one a moment later (DNS
//! rebinding) cannot slip through.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use ipnet::{Ipv4Net, Ipv6Net};
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::Host;

/// Longest URL accepted.
pub const MAX_URL_CHARS: usize = 2048;

/// Why a URL is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("Url must be an absolute http:// or https:// URL with a host.")]
    Malformed,
    #[error("Url host cannot be resolved.")]
    Unresolved,
    #[error(
        "Url must resolve only to public internet addresses (not loopback, private, link-local, shared, reserved or documentation ranges)."
    )]
    NotPublic,
}

/// Parses an http(s) URL with a host and without credentials in it (those belong in the
/// `authorization` field, which is masked, not in a URL that is shown).
pub fn parse(text: &str) -> Result<Url, AddressError> {
    let url = Url::parse(text).map_err(|_| AddressError::Malformed)?;
    let usable = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some_and(|h| !h.is_empty())
        && url.username().is_empty()
        && url.password().is_none();
    if usable { Ok(url) } else { Err(AddressError::Malformed) }
}

const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), prefix)
}

const fn v6(segments: [u16; 8], prefix: u8) -> Ipv6Net {
    let [a, b, c, d, e, f, g, h] = segments;
    Ipv6Net::new_assert(Ipv6Addr::new(a, b, c, d, e, f, g, h), prefix)
}

/// IPv4 ranges that are not globally reachable: the IANA IPv4 special-purpose registry's
/// entries marked so (all of 192.0.0.0/24, including its two anycast exceptions, is refused),
/// the deprecated 6to4 relay anycast, and multicast.
const V4_REFUSED: [Ipv4Net; 17] = [
    v4(0, 0, 0, 0, 8),          // "this network"
    v4(10, 0, 0, 0, 8),         // private
    v4(100, 64, 0, 0, 10),      // shared address space (carrier-grade NAT)
    v4(127, 0, 0, 0, 8),        // loopback
    v4(169, 254, 0, 0, 16),     // link-local
    v4(172, 16, 0, 0, 12),      // private
    v4(192, 0, 0, 0, 24),       // IETF protocol assignments
    v4(192, 0, 2, 0, 24),       // documentation (TEST-NET-1)
    v4(192, 88, 99, 0, 24),     // 6to4 relay anycast (deprecated)
    v4(192, 168, 0, 0, 16),     // private
    v4(198, 18, 0, 0, 15),      // benchmarking
    v4(198, 51, 100, 0, 24),    // documentation (TEST-NET-2)
    v4(203, 0, 113, 0, 24),     // documentation (TEST-NET-3)
    v4(224, 0, 0, 0, 4),        // multicast
    v4(240, 0, 0, 0, 4),        // reserved
    v4(255, 255, 255, 255, 32), // limited broadcast
    v4(0, 0, 0, 0, 32),         // unspecified (inside 0/8; named for the table's readers)
];

/// The IPv6 global unicast space: everything outside it (loopback, unspecified, IPv4-compatible
/// `::/96`, discard-only, unique local `fc00::/7`, link-local, site-local `fec0::/10`,
/// multicast, SRv6 SIDs `5f00::/16`, local-use NAT64 `64:ff9b:1::/48`…) is refused, except the
/// forms below that carry an IPv4 address.
const V6_GLOBAL_UNICAST: Ipv6Net = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3);
/// IPv4-mapped addresses: judged by the IPv4 address they stand for.
const V6_MAPPED: Ipv6Net = v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96);
/// NAT64 well-known prefix: judged by the IPv4 address it translates to.
const V6_NAT64: Ipv6Net = v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96);
/// 6to4: judged by the IPv4 address in bits 16–47.
const V6_6TO4: Ipv6Net = v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16);
/// Teredo: judged by the server's IPv4 address (bits 32–63) and the client's (the last 32 bits,
/// inverted).
const V6_TEREDO: Ipv6Net = v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32);

/// Ranges of the global unicast space that the IPv6 special-purpose registry marks not globally
/// reachable.
const V6_REFUSED: [Ipv6Net; 4] = [
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23), // IETF protocol assignments (exceptions below)
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), // documentation
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), // documentation
    v6([0x2001, 0x2, 0, 0, 0, 0, 0, 0], 48), // benchmarking (inside 2001::/23)
];

/// Entries inside 2001::/23 that the registry marks globally reachable.
const V6_GLOBAL_EXCEPTIONS: [Ipv6Net; 7] = [
    v6([0x2001, 0x1, 0, 0, 0, 0, 0, 0x1], 128),  // Port Control Protocol anycast
    v6([0x2001, 0x1, 0, 0, 0, 0, 0, 0x2], 128),  // TURN anycast
    v6([0x2001, 0x1, 0, 0, 0, 0, 0, 0x3], 128),  // DNS-SD service registration anycast
    v6([0x2001, 0x3, 0, 0, 0, 0, 0, 0], 32),     // AMT
    v6([0x2001, 0x4, 0x112, 0, 0, 0, 0, 0], 48), // AS112-v6
    v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28),    // ORCHIDv2
    v6([0x2001, 0x30, 0, 0, 0, 0, 0, 0], 28),    // drone remote ID (DET)
];

/// Whether an address is globally reachable (see the module documentation).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    !V4_REFUSED.iter().any(|net| net.contains(&ip))
}

/// The 32 bits of `ip` starting at bit `from` (0 is the most significant), as IPv4.
fn embedded_v4(ip: Ipv6Addr, from: u32) -> Ipv4Addr {
    Ipv4Addr::from((u128::from(ip) >> (96 - from)) as u32)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if V6_MAPPED.contains(&ip) || V6_NAT64.contains(&ip) {
        return is_public_v4(embedded_v4(ip, 96));
    }
    if V6_6TO4.contains(&ip) {
        return is_public_v4(embedded_v4(ip, 16));
    }
    if V6_TEREDO.contains(&ip) {
        let client = Ipv4Addr::from(!u32::from(embedded_v4(ip, 96)));
        return is_public_v4(embedded_v4(ip, 32)) && is_public_v4(client);
    }
    if !V6_GLOBAL_UNICAST.contains(&ip) {
        return false;
    }
    V6_GLOBAL_EXCEPTIONS.iter().any(|net| net.contains(&ip)) || !V6_REFUSED.iter().any(|net| net.contains(&ip))
}

/// A future a [`Lookup`] returns.
pub type LookupFuture = Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>>;

/// Where names are resolved: the system's resolver in the service; tests put their own names
/// behind the same [`CheckedResolver`].
pub trait Lookup: Send + Sync + 'static {
    fn lookup(&self, host: String) -> LookupFuture;
}

/// The system's resolver (`getaddrinfo`, through tokio).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: String) -> LookupFuture {
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .map(|a| a.ip())
                .collect())
        })
    }
}

/// The error a refused resolution hands the HTTP client; the delivery worker finds it in the
/// failure's chain of causes and logs the attempt as `dns`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub AddressError);

/// Resolves hosts and refuses them unless every address is public (or private ones are
/// allowed): the check of the API and the resolver of the delivery client, one code.
#[derive(Clone)]
pub struct CheckedResolver {
    lookup: Arc<dyn Lookup>,
    allow_private: bool,
}

impl std::fmt::Debug for CheckedResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedResolver")
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

impl CheckedResolver {
    pub fn new(lookup: Arc<dyn Lookup>, allow_private: bool) -> CheckedResolver {
        CheckedResolver { lookup, allow_private }
    }

    /// Whether private addresses are allowed (`DEVICECLOUD_WEBHOOK_ALLOW_PRIVATE`).
    pub fn allows_private(&self) -> bool {
        self.allow_private
    }

    /// Checks addresses already known.
    pub fn check(&self, addresses: &[IpAddr]) -> Result<(), AddressError> {
        if addresses.is_empty() {
            return Err(AddressError::Unresolved);
        }
        if !self.allow_private && !addresses.iter().all(|ip| is_public(*ip)) {
            return Err(AddressError::NotPublic);
        }
        Ok(())
    }

    /// Resolves a name once and checks every address it has.
    pub async fn resolve_name(&self, name: &str) -> Result<Vec<IpAddr>, AddressError> {
        let addresses = self
            .lookup
            .lookup(name.to_string())
            .await
            .map_err(|_| AddressError::Unresolved)?;
        self.check(&addresses)?;
        Ok(addresses)
    }

    /// The addresses of a URL's host, checked: a literal as it is, a name resolved.
    pub async fn resolve_url(&self, url: &Url) -> Result<Vec<IpAddr>, AddressError> {
        match url.host().ok_or(AddressError::Malformed)? {
            Host::Ipv4(ip) => self.check(&[IpAddr::V4(ip)]).map(|()| vec![IpAddr::V4(ip)]),
            Host::Ipv6(ip) => self.check(&[IpAddr::V6(ip)]).map(|()| vec![IpAddr::V6(ip)]),
            Host::Domain(name) => self.resolve_name(name).await,
        }
    }
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let resolver = self.clone();
        Box::pin(async move {
            let addresses = resolver.resolve_name(name.as_str()).await.map_err(Refused)?;
            // The client sets the URL's port on each address.
            let addrs: Addrs = Box::new(addresses.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One address of each kind the registries name, and whether it may receive webhooks.
    const TABLE: &[(&str, bool)] = &[
        // IPv4 special-purpose registry.
        ("0.0.0.0", false),
        ("0.1.2.3", false),
        ("10.1.2.3", false),
        ("100.64.0.1", false),
        ("100.127.255.254", false),
        ("127.0.0.1", false),
        ("127.8.9.10", false),
        ("169.254.169.254", false),
        ("172.16.0.1", false),
        ("172.31.255.255", false),
        ("192.0.0.1", false),
        ("192.0.0.9", false),
        ("192.0.0.170", false),
        ("192.0.2.1", false),
        ("192.88.99.1", false),
        ("192.168.1.1", false),
        ("198.18.0.1", false),
        ("198.19.255.255", false),
        ("198.51.100.7", false),
        ("203.0.113.9", false),
        ("224.0.0.1", false),
        ("239.255.255.250", false),
        ("240.0.0.1", false),
        ("255.255.255.255", false),
        // Public IPv4, including neighbours of the refused ranges.
        ("8.8.8.8", true),
        ("93.184.216.34", true),
        ("100.63.255.255", true),
        ("100.128.0.1", true),
        ("172.32.0.1", true),
        ("192.0.1.1", true),
        ("192.31.196.1", true),
        ("192.52.193.1", true),
        ("192.175.48.1", true),
        ("198.20.0.1", true),
        ("223.255.255.255", true),
        // IPv6 special-purpose registry.
        ("::", false),
        ("::1", false),
        ("::127.0.0.1", false),
        ("::8.8.8.8", false),
        ("100::1", false),
        ("64:ff9b:1::1", false),
        ("2001:db8::1", false),
        ("2001:2::1", false),
        ("2001:10::1", false),
        ("3fff::1", false),
        ("5f00::1", false),
        ("fc00::1", false),
        ("fd12:3456::1", false),
        ("fe80::1", false),
        ("febf::1", false),
        ("fec0::1", false),
        ("feff::1", false),
        ("ff02::1", false),
        // Forms embedding an IPv4 address: judged by it.
        ("::ffff:127.0.0.1", false),
        ("::ffff:10.0.0.1", false),
        ("::ffff:8.8.8.8", true),
        ("64:ff9b::7f00:1", false),
        ("64:ff9b::a9fe:a9fe", false),
        ("64:ff9b::808:808", true),
        ("2002:7f00:1::1", false),
        ("2002:c0a8:101::1", false),
        ("2002:808:808::1", true),
        // Teredo: server 65.54.227.120, client 127.0.0.1 (inverted: 80ff:fffe).
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", false),
        // Server 10.0.0.1, client 8.8.8.8 (inverted: f7f7:f7f7).
        ("2001:0:a00:1::f7f7:f7f7", false),
        // Server 65.54.227.120, client 8.8.8.8.
        ("2001:0:4136:e378::f7f7:f7f7", true),
        // Globally reachable entries inside 2001::/23.
        ("2001:1::1", true),
        ("2001:1::2", true),
        ("2001:1::3", true),
        ("2001:1::4", false),
        ("2001:3::1", true),
        ("2001:4:112::1", true),
        ("2001:20::1", true),
        ("2001:30::1", true),
        // Public IPv6.
        ("2606:4700::1111", true),
        ("2a00:1450:4001::200e", true),
        ("2620:4f:8000::1", true),
    ];

    #[test]
    fn addresses_follow_the_special_purpose_registries() {
        for (text, public) in TABLE {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(is_public(ip), *public, "{text}");
        }
    }

    #[test]
    fn only_http_urls_with_a_host() {
        assert!(parse("https://example.com/hook?x=1").is_ok());
        assert!(parse("http://127.0.0.1:8080/").is_ok());
        for bad in [
            "ftp://example.com/",
            "example.com/hook",
            "http://",
            "http://user:pw@example.com/",
            "",
        ] {
            assert_eq!(parse(bad), Err(AddressError::Malformed), "{bad}");
        }
    }

    /// A lookup answering from a fixed list.
    struct Fixed(Vec<IpAddr>);

    impl Lookup for Fixed {
        fn lookup(&self, _host: String) -> LookupFuture {
            let answer = self.0.clone();
            Box::pin(async move { Ok(answer) })
        }
    }

    fn resolver(addresses: &[&str], allow_private: bool) -> CheckedResolver {
        let addresses = addresses.iter().map(|a| a.parse().unwrap()).collect();
        CheckedResolver::new(Arc::new(Fixed(addresses)), allow_private)
    }

    #[tokio::test]
    async fn every_address_of_a_name_must_be_public() {
        let url = parse("https://hooks.example.com/in").unwrap();
        let mixed = resolver(&["93.184.216.34", "10.0.0.1"], false);
        assert_eq!(mixed.resolve_url(&url).await, Err(AddressError::NotPublic));
        let public = resolver(&["93.184.216.34", "2606:4700::1111"], false);
        assert_eq!(public.resolve_url(&url).await.unwrap().len(), 2);
        let none = resolver(&[], false);
        assert_eq!(none.resolve_url(&url).await, Err(AddressError::Unresolved));
        let allowed = resolver(&["10.0.0.1"], true);
        assert!(allowed.resolve_url(&url).await.is_ok());
    }

    #[tokio::test]
    async fn literals_are_checked_without_a_lookup() {
        let resolver = resolver(&["93.184.216.34"], false);
        for text in [
            "http://127.0.0.1:9/hook",
            "http://[::1]:9/",
            "http://2130706433/",
            "http://[::ffff:a00:1]/",
        ] {
            let url = parse(text).unwrap();
            assert_eq!(resolver.resolve_url(&url).await, Err(AddressError::NotPublic), "{text}");
        }
    }
}

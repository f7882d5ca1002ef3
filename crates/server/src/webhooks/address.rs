//! Webhook URLs: their form, and the rule that they must not reach the service's own network
//! (docs/operations.md, `DEVICECLOUD_WEBHOOK_ALLOW_PRIVATE`): refused at creation and checked again
//! before every delivery, since a name may resolve elsewhere later.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use reqwest::Url;

/// Longest URL accepted.
pub const MAX_URL_CHARS: usize = 2048;

/// Why a URL is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("Url must be an absolute http:// or https:// URL with a host.")]
    Malformed,
    #[error("Url host cannot be resolved.")]
    Unresolved,
    #[error("Url must not resolve to a loopback, private or link-local address.")]
    Private,
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

/// Resolves the URL's host and refuses it when any of its addresses is not public.
pub async fn check_public(url: &Url) -> Result<(), AddressError> {
    let host = url.host_str().ok_or(AddressError::Malformed)?;
    let port = url.port_or_known_default().unwrap_or(80);
    // An IPv6 literal comes bracketed; lookup_host wants it bare.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<_> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| AddressError::Unresolved)?
        .collect();
    if addrs.is_empty() {
        return Err(AddressError::Unresolved);
    }
    if addrs.iter().any(|a| !is_public(a.ip())) {
        return Err(AddressError::Private);
    }
    Ok(())
}

/// Whether an address is reachable on the public internet: not loopback, private (RFC 1918,
/// unique local), link-local, carrier-grade NAT, unspecified, broadcast or multicast.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)))
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_ranges_are_refused() {
        for text in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(text.parse().unwrap()), "{text} must not be public");
        }
        for text in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "100.128.0.1"] {
            assert!(is_public(text.parse().unwrap()), "{text} is public");
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

    #[tokio::test]
    async fn loopback_literals_fail_the_delivery_check() {
        let url = parse("http://127.0.0.1:9/hook").unwrap();
        assert_eq!(check_public(&url).await, Err(AddressError::Private));
        let url = parse("http://[::1]:9/hook").unwrap();
        assert_eq!(check_public(&url).await, Err(AddressError::Private));
    }
}

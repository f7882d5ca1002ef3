//! Where a request came from and where its absolute links point (docs/operations.md, "Behind
//! a reverse proxy").
//!
//! The client is the TCP peer, unless the peer is one of the trusted proxies: only then are
//! `Forwarded` (RFC 7239) or `X-Forwarded-For` / `-Proto` / `-Host` believed, because anyone
//! can send those headers. Links are built on the configured public URL when there is one (the
//! only answer that is right behind every kind of front end), otherwise on the scheme and host
//! the client used, as far as the trusted proxies tell them.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::state::AppState;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header::HOST;
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap};
use devicecloud_engine::settings::{FrontEnd, Settings};

/// Where one request came from, as far as the service may believe.
#[derive(Clone, Debug, PartialEq)]
pub struct Origin {
    /// The client's address: the peer, or what trusted proxies say the client was.
    pub client: IpAddr,
    /// Whether the client reached the service over HTTPS (the public URL's scheme when set).
    pub https: bool,
    /// `scheme://host[:port][/prefix]`, without a trailing slash.
    base: String,
}

impl Origin {
    /// The absolute URL of a path of this service (`/api/v2/group/…`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Works out the origin of a request from its peer and headers.
    pub fn resolve(front: &FrontEnd, peer: Option<IpAddr>, headers: &HeaderMap) -> Origin {
        let peer = peer.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), canonical);
        let forwarded = if front.trusts(peer) {
            forwarded(front, headers)
        } else {
            Hop::default()
        };
        let client = forwarded.client.unwrap_or(peer);
        let (https, base) = match &front.public_url {
            Some(url) => (url.starts_with("https://"), url.clone()),
            None => {
                let https = forwarded
                    .proto
                    .as_deref()
                    .is_some_and(|p| p.eq_ignore_ascii_case("https"));
                let host = forwarded
                    .host
                    .filter(|h| is_host(h))
                    .or_else(|| {
                        headers
                            .get(HOST)
                            .and_then(|h| h.to_str().ok())
                            .filter(|h| is_host(h))
                            .map(str::to_string)
                    })
                    .unwrap_or_else(|| "localhost".to_string());
                let scheme = if https { "https" } else { "http" };
                (https, format!("{scheme}://{host}"))
            }
        };
        Origin { client, https, base }
    }

    /// The origin of a request given its headers and extensions (the listener puts the peer
    /// address there).
    pub fn of(settings: &Settings, headers: &HeaderMap, extensions: &Extensions) -> Origin {
        let peer = extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        Origin::resolve(&settings.front_end, peer, headers)
    }
}

impl FromRequestParts<AppState> for Origin {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Origin, Self::Rejection> {
        Ok(Origin::of(&state.settings, &parts.headers, &parts.extensions))
    }
}

/// An IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`, how a dual-stack listener reports IPv4
/// peers) is the IPv4 address, so that an IPv4 proxy range matches it.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

/// A host as links may carry it: letters, digits, `.`, `-`, `_`, a port, or an IPv6 literal
/// in brackets. Anything else (a space, `/`, `@`, quotes) would change the meaning of a link.
fn is_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':' | b'[' | b']'))
}

/// What the proxies say about one hop.
#[derive(Debug, Default)]
struct Hop {
    client: Option<IpAddr>,
    proto: Option<String>,
    host: Option<String>,
}

/// The hop of the client, read from the proxies' headers: the list of addresses is walked from
/// the nearest proxy outwards, and the first address that is not a trusted proxy is the client
/// (the leftmost one when all are trusted). Its protocol and host are the values recorded with
/// that address; an address that does not parse ends the walk with no client.
fn forwarded(front: &FrontEnd, headers: &HeaderMap) -> Hop {
    let elements = forwarded_elements(headers);
    if !elements.is_empty() {
        return walk(front, elements);
    }
    let list = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect()
    };
    let (fors, protos, hosts) = (
        list("x-forwarded-for"),
        list("x-forwarded-proto"),
        list("x-forwarded-host"),
    );
    // One value per hop when the lists have the same length; otherwise the last value is the
    // one the nearest proxy set.
    let pick = |values: &[String], index: usize| -> Option<String> {
        if values.len() == fors.len() {
            values.get(index).cloned()
        } else {
            values.last().cloned()
        }
    };
    let elements: Vec<Hop> = if fors.is_empty() {
        vec![Hop {
            client: None,
            proto: protos.last().cloned(),
            host: hosts.last().cloned(),
        }]
    } else {
        (0..fors.len())
            .map(|i| Hop {
                client: parse_node(&fors[i]),
                proto: pick(&protos, i),
                host: pick(&hosts, i),
            })
            .collect()
    };
    walk(front, elements)
}

fn walk(front: &FrontEnd, mut elements: Vec<Hop>) -> Hop {
    while let Some(hop) = elements.pop() {
        match hop.client {
            Some(addr) if front.trusts(addr) && !elements.is_empty() => continue,
            _ => return hop,
        }
    }
    Hop::default()
}

/// The elements of every `Forwarded` header, in order (RFC 7239 §4).
fn forwarded_elements(headers: &HeaderMap) -> Vec<Hop> {
    headers
        .get_all("forwarded")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|element| {
            let mut hop = Hop::default();
            for pair in element.split(';') {
                let Some((key, value)) = pair.trim().split_once('=') else {
                    continue;
                };
                let value = value.trim().trim_matches('"');
                match key.trim().to_ascii_lowercase().as_str() {
                    "for" => hop.client = parse_node(value),
                    "proto" => hop.proto = Some(value.to_string()),
                    "host" => hop.host = Some(value.to_string()),
                    _ => {}
                }
            }
            hop
        })
        .collect()
}

/// An address as proxies write it: `192.0.2.1`, `192.0.2.1:4711`, `[2001:db8::1]:4711` or
/// `2001:db8::1`. Obfuscated identifiers (`_hidden`, `unknown`) are no address.
fn parse_node(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    if let Ok(addr) = text.parse::<IpAddr>() {
        return Some(canonical(addr));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(canonical(addr.ip()));
    }
    let inner = text.strip_prefix('[')?.split(']').next()?;
    inner.parse::<IpAddr>().ok().map(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, v.parse().unwrap());
        }
        map
    }

    fn front(proxies: &[&str], public: Option<&str>) -> FrontEnd {
        FrontEnd {
            public_url: public.map(|u| FrontEnd::public_url(u).unwrap()),
            trusted_proxies: proxies.iter().map(|p| p.parse().unwrap()).collect(),
        }
    }

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    #[test]
    fn an_untrusted_peer_is_the_client_and_its_headers_are_ignored() {
        let h = headers(&[
            ("host", "api.example.com:8080"),
            ("x-forwarded-for", "203.0.113.9"),
            ("x-forwarded-proto", "https"),
            ("forwarded", "for=203.0.113.9;proto=https;host=evil.example"),
        ]);
        let o = Origin::resolve(&front(&[], None), ip("198.51.100.7"), &h);
        assert_eq!(o.client, "198.51.100.7".parse::<IpAddr>().unwrap());
        assert!(!o.https);
        assert_eq!(o.url("/api/v2/group"), "http://api.example.com:8080/api/v2/group");
    }

    #[test]
    fn a_trusted_proxy_tells_the_client_scheme_and_host() {
        let f = front(&["10.0.0.0/8"], None);
        let xff = headers(&[
            ("host", "backend:8080"),
            ("x-forwarded-for", "203.0.113.9, 10.1.2.3"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "iot.example.com"),
        ]);
        let o = Origin::resolve(&f, ip("10.0.0.1"), &xff);
        assert_eq!(o.client, "203.0.113.9".parse::<IpAddr>().unwrap());
        assert!(o.https);
        assert_eq!(o.url("/x"), "https://iot.example.com/x");
        // A client's own made-up entry left of the real one is not believed.
        let spoofed = headers(&[("x-forwarded-for", "1.2.3.4, 203.0.113.9")]);
        let o = Origin::resolve(&f, ip("10.0.0.1"), &spoofed);
        assert_eq!(o.client, "203.0.113.9".parse::<IpAddr>().unwrap());
        let rfc = headers(&[(
            "forwarded",
            "for=\"[2001:db8::17]:4711\";proto=https;host=iot.example.com, for=10.9.9.9",
        )]);
        let o = Origin::resolve(&f, ip("::ffff:10.0.0.1"), &rfc);
        assert_eq!(o.client, "2001:db8::17".parse::<IpAddr>().unwrap());
        assert_eq!(o.url("/x"), "https://iot.example.com/x");
    }

    #[test]
    fn the_public_url_wins_and_bad_hosts_are_not_echoed() {
        let f = front(&["127.0.0.1/32"], Some("https://example.com/devicecloud/"));
        let h = headers(&[("host", "x"), ("x-forwarded-proto", "http")]);
        let o = Origin::resolve(&f, ip("127.0.0.1"), &h);
        assert!(o.https);
        assert_eq!(o.url("/api/v2/group"), "https://example.com/devicecloud/api/v2/group");
        let bad = headers(&[("host", "evil.example/x?")]);
        let o = Origin::resolve(&front(&[], None), ip("127.0.0.1"), &bad);
        assert_eq!(o.url("/a"), "http://localhost/a");
        assert!(FrontEnd::public_url("ftp://x").is_err());
        assert!(FrontEnd::public_url("https://x/?a=1").is_err());
        assert!(FrontEnd::public_url("iot.example.com").is_err());
    }
}

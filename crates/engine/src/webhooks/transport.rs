//! One webhook request on the wire: the HTTP client (the checked resolver, no proxy, no
//! redirects, the timeout), the signed POST, and what an attempt that failed is logged as.
//!
//! A failure is one of six words (docs/api.md, "Deliveries"): `dns`, `connect`, `tls`,
//! `timeout`, `status`, `body`. Never the client's own text: the attempt log is readable by
//! every viewer of the group, and error texts that tell a closed port from a filtered one or
//! quote what a host answered would turn webhooks into a scanner of other people's networks.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, USER_AGENT};
use reqwest::{Client, Url};
use tokio_rustls::rustls;

use super::address::{CheckedResolver, Refused};
use super::signature;

/// Why an attempt failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The host could not be resolved, or resolves to an address that is not allowed.
    Dns,
    /// No TCP connection (refused, unreachable).
    Connect,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
    /// No complete answer within `webhook_timeout`.
    Timeout,
    /// An answer other than 2xx.
    Status(u16),
    /// The connection broke while the request was sent or before a complete answer.
    Body,
}

impl Failure {
    /// The attempt log's `error`.
    pub fn label(self) -> &'static str {
        match self {
            Failure::Dns => "dns",
            Failure::Connect => "connect",
            Failure::Tls => "tls",
            Failure::Timeout => "timeout",
            Failure::Status(_) => "status",
            Failure::Body => "body",
        }
    }

    /// The category of a client error, from its chain of causes.
    fn of(error: &reqwest::Error) -> Failure {
        if caused_by::<Refused>(error) {
            Failure::Dns
        } else if error.is_timeout() {
            Failure::Timeout
        } else if caused_by::<rustls::Error>(error) {
            Failure::Tls
        } else if error.is_connect() {
            Failure::Connect
        } else {
            Failure::Body
        }
    }
}

/// Whether `T` is among the causes of `error`. An `io::Error` hides the error it wraps from
/// `source()` (it hands out that error's own source), so it is unwrapped by hand.
fn caused_by<T: StdError + 'static>(error: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<T>() {
            return true;
        }
        if let Some(inner) = e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref())
            && caused_by::<T>(inner)
        {
            return true;
        }
        next = e.source();
    }
    false
}

/// The delivery client: names resolved (once, and checked) by `resolver`, never through a
/// proxy from the environment (the connection goes to the address checked), redirects not
/// followed, each request bounded by `timeout`.
pub fn client(resolver: Arc<CheckedResolver>, timeout: Duration) -> reqwest::Result<Client> {
    Client::builder()
        .dns_resolver(resolver)
        .no_proxy()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// One batch as it goes out.
pub struct Request<'a> {
    pub url: &'a str,
    pub delivery_id: &'a str,
    pub content_type: &'a str,
    pub body: &'a [u8],
    /// The webhook's signing secret, in clear.
    pub secret: &'a str,
    /// The `Authorization` header, in clear.
    pub authorization: Option<&'a str>,
}

/// Posts a batch; the receiver's 2xx status, or why it was not accepted.
pub async fn send(client: &Client, resolver: &CheckedResolver, request: &Request<'_>) -> Result<u16, Failure> {
    let url = Url::parse(request.url).map_err(|_| Failure::Dns)?;
    // The client resolves names through `resolver`, but connects to a literal address
    // directly: a literal is checked here.
    if !matches!(url.host(), Some(url::Host::Domain(_))) {
        resolver.resolve_url(&url).await.map_err(|_| Failure::Dns)?;
    }
    let content_type = HeaderValue::from_str(request.content_type).map_err(|_| Failure::Body)?;
    let mut builder = client
        .post(url)
        .header(CONTENT_TYPE, content_type)
        .header(USER_AGENT, "devicecloud-webhook")
        .header("X-Devicecloud-Delivery", request.delivery_id)
        .header("X-Devicecloud-Signature", signature::sign(request.secret, request.body))
        .body(request.body.to_vec());
    if let Some(authorization) = request.authorization {
        // Validated as a header value when it was set.
        let value = HeaderValue::from_str(authorization).map_err(|_| Failure::Body)?;
        builder = builder.header(AUTHORIZATION, value);
    }
    let response = builder.send().await.map_err(|e| Failure::of(&e))?;
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        Ok(status)
    } else {
        Err(Failure::Status(status))
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::webhooks::address::{Lookup, LookupFuture};

    /// A name that answers a public address to its first lookup and loopback afterwards: the
    /// rebinding attack on a check made apart from the connection.
    struct Rebinding {
        calls: AtomicUsize,
        answers: Mutex<Vec<IpAddr>>,
    }

    impl Lookup for Rebinding {
        fn lookup(&self, _host: String) -> LookupFuture {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let mut answers = self.answers.lock().unwrap();
            let answer = if answers.len() > 1 {
                answers.remove(0)
            } else {
                answers[0]
            };
            Box::pin(async move { Ok(vec![answer]) })
        }
    }

    /// A loopback listener that counts the connections it accepts.
    async fn listener() -> (u16, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                drop(socket);
            }
        });
        (port, accepted)
    }

    fn request(url: &str) -> Request<'_> {
        Request {
            url,
            delivery_id: "d",
            content_type: "application/json",
            body: b"{}",
            secret: "s",
            authorization: None,
        }
    }

    #[tokio::test]
    async fn the_connection_goes_to_the_address_that_was_checked() {
        let (port, accepted) = listener().await;
        // Public first (TEST-NET addresses are refused, so one that is not routed here), then
        // loopback: one lookup per connection, checked, and connected to.
        let lookup = Arc::new(Rebinding {
            calls: AtomicUsize::new(0),
            answers: Mutex::new(vec!["100.128.0.1".parse().unwrap(), "127.0.0.1".parse().unwrap()]),
        });
        let resolver = Arc::new(CheckedResolver::new(lookup.clone(), false));
        let client = client(resolver.clone(), Duration::from_millis(500)).unwrap();
        let url = format!("http://rebind.example:{port}/hook");
        let first = send(&client, &resolver, &request(&url)).await.unwrap_err();
        assert!(matches!(first, Failure::Connect | Failure::Timeout), "{first:?}");
        assert_eq!(lookup.calls.load(Ordering::SeqCst), 1, "one lookup, the one checked");
        // The name now answers loopback: refused before any connection.
        let second = send(&client, &resolver, &request(&url)).await.unwrap_err();
        assert_eq!(second, Failure::Dns);
        assert_eq!(accepted.load(Ordering::SeqCst), 0, "loopback was never reached");
    }

    #[tokio::test]
    async fn allowed_private_names_connect_to_the_resolved_address() {
        let (port, accepted) = listener().await;
        let lookup = Arc::new(Rebinding {
            calls: AtomicUsize::new(0),
            answers: Mutex::new(vec!["127.0.0.1".parse().unwrap()]),
        });
        let resolver = Arc::new(CheckedResolver::new(lookup, true));
        let client = client(resolver.clone(), Duration::from_secs(5)).unwrap();
        let url = format!("http://lab.example:{port}/hook");
        let failure = send(&client, &resolver, &request(&url)).await.unwrap_err();
        // The listener closes without answering.
        assert_eq!(failure, Failure::Body);
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn refused_literals_are_dns_failures() {
        let lookup = Arc::new(Rebinding {
            calls: AtomicUsize::new(0),
            answers: Mutex::new(vec!["127.0.0.1".parse().unwrap()]),
        });
        let resolver = Arc::new(CheckedResolver::new(lookup.clone(), false));
        let client = client(resolver.clone(), Duration::from_secs(5)).unwrap();
        let failure = send(&client, &resolver, &request("http://127.0.0.1:9/")).await;
        assert_eq!(failure, Err(Failure::Dns));
        assert_eq!(lookup.calls.load(Ordering::SeqCst), 0);
    }
}

//! Where the attackers connect from. Gateways and the probes use 127.0.0.1, as the service's
//! own clients would; each attacker uses loopback addresses of its own (the service limits
//! connections and failed sign-ins per client address), so that the run shows what the limits
//! leave of each attack rather than the attackers crowding out the probes' address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use tokio::net::{TcpSocket, TcpStream};

/// The `index`-th address of attacker block `block` (127.<block>.x.y).
pub fn address(block: u8, index: usize) -> IpAddr {
    let index = index % (254 * 254);
    IpAddr::V4(Ipv4Addr::new(127, block, (index / 254) as u8, (index % 254) as u8 + 1))
}

/// A TCP connection to `to` from `from`.
pub async fn connect(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(to).await
}

/// An HTTP client whose connections leave from `from`.
pub fn http_client(from: IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(from)
        .build()
        .unwrap_or_default()
}

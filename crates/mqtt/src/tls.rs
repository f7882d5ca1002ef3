//! TLS for the gateway endpoint: the acceptor built from a PEM certificate chain and private key,
//! and the bounded handshake every TLS connection goes through before it speaks MQTT.
//!
//! The crypto provider is named here rather than taken from the process default: it is the one
//! reqwest's `rustls` feature already compiles in (aws-lc-rs), so the service carries a single
//! provider, and a second one appearing in the dependency graph could not make start-up fail.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

pub use tokio_rustls::TlsAcceptor;

use crate::connection::CONNECT_TIMEOUT;

/// Why the TLS listener cannot start; each names the file at fault. The underlying error is
/// part of the message (not a `source`), so it is printed once.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {}: {error}", path.display())]
    Read { path: PathBuf, error: std::io::Error },
    #[error("{} is not valid PEM: {error}", path.display())]
    Pem { path: PathBuf, error: pem::Error },
    #[error("no certificate (BEGIN CERTIFICATE) in {}", .0.display())]
    NoCertificate(PathBuf),
    #[error("no private key (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY) in {}", .0.display())]
    NoPrivateKey(PathBuf),
    /// The key does not belong to the certificate, or is of a kind the provider cannot use.
    #[error("the certificate {} and the key {} cannot be used together: {error}", cert.display(), key.display())]
    Unusable {
        cert: PathBuf,
        key: PathBuf,
        error: rustls::Error,
    },
}

/// Builds the acceptor from `cert` (the server certificate first, then any intermediates) and
/// `key`. Read once at start: replacing the files takes a restart.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let chain = certificate_chain(cert)?;
    let private_key = private_key(key)?;
    let unusable = |error| TlsError::Unusable {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        error,
    };
    let config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(unusable)?
        .with_no_client_auth()
        // Also checks that the key is the certificate's.
        .with_single_cert(chain, private_key)
        .map_err(unusable)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read {
        path: path.to_path_buf(),
        error,
    })
}

fn certificate_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(&read(path)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::Pem {
            path: path.to_path_buf(),
            error,
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(path.to_path_buf()));
    }
    Ok(chain)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    match PrivateKeyDer::from_pem_slice(&read(path)?) {
        Ok(key) => Ok(key),
        Err(pem::Error::NoItemsFound) => Err(TlsError::NoPrivateKey(path.to_path_buf())),
        Err(error) => Err(TlsError::Pem {
            path: path.to_path_buf(),
            error,
        }),
    }
}

/// Runs the server side of the handshake, within the time a client has to send CONNECT: a
/// client that opens the port and stays silent, or stalls half-way, holds nothing for longer.
/// `None` when the handshake failed, took too long, or the service is stopping; a failure
/// ends this connection only.
pub(crate) async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    shutdown: &CancellationToken,
) -> Option<TlsStream<TcpStream>> {
    let accepted = tokio::select! {
        _ = shutdown.cancelled() => return None,
        accepted = tokio::time::timeout(CONNECT_TIMEOUT, acceptor.accept(stream)) => accepted,
    };
    let reason = match accepted {
        Ok(Ok(stream)) => return Some(stream),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "mqtt tls handshake failed");
            "failed"
        }
        Err(_) => "timeout",
    };
    metrics::counter!("devicecloud_mqtt_tls_handshake_failures_total", "reason" => reason).increment(1);
    None
}

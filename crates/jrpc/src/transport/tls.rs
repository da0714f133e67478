//! TLS with rustls (the `ring` provider): certificates and keys from PEM
//! files, server and client configurations.

use std::io;
use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::CertificateDer;
#[cfg(feature = "http-server")]
use tokio_rustls::rustls::pki_types::PrivateKeyDer;
#[cfg(feature = "http-client")]
use tokio_rustls::rustls::pki_types::ServerName;
#[cfg(feature = "http-server")]
use tokio_rustls::rustls::ServerConfig;
#[cfg(feature = "http-client")]
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn invalid(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Reads every certificate in a PEM file.
pub fn load_certs(path: impl AsRef<Path>) -> io::Result<Vec<CertificateDer<'static>>> {
    let path = path.as_ref();
    let pem =
        std::fs::read(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let certs = rustls_pemfile::certs(&mut &pem[..]).collect::<Result<Vec<_>, _>>()?;
    if certs.is_empty() {
        return Err(invalid(format!("{}: no PEM certificate found", path.display())));
    }
    Ok(certs)
}

#[cfg(feature = "http-server")]
/// Reads the first private key (PKCS#8, PKCS#1 or SEC1) in a PEM file.
pub fn load_key(path: impl AsRef<Path>) -> io::Result<PrivateKeyDer<'static>> {
    let path = path.as_ref();
    let pem =
        std::fs::read(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    rustls_pemfile::private_key(&mut &pem[..])?
        .ok_or_else(|| invalid(format!("{}: no PEM private key found", path.display())))
}

#[cfg(feature = "http-server")]
/// A server configuration from a certificate chain and key, offering HTTP/2
/// and HTTP/1.1 by ALPN.
pub fn server_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> io::Result<Arc<ServerConfig>> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(invalid)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(invalid)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(feature = "http-server")]
/// A server configuration from PEM files.
pub fn server_config_from_pem(
    cert: impl AsRef<Path>,
    key: impl AsRef<Path>,
) -> io::Result<Arc<ServerConfig>> {
    server_config(load_certs(cert)?, load_key(key)?)
}

#[cfg(feature = "http-client")]
/// A client configuration trusting exactly `roots` (a private CA or a
/// self-signed certificate), with the given ALPN protocols.
pub fn client_config(roots: Vec<CertificateDer<'static>>, alpn: &[&[u8]]) -> io::Result<Arc<ClientConfig>> {
    let mut store = RootCertStore::empty();
    for cert in roots {
        store.add(cert).map_err(invalid)?;
    }
    client_config_trusting(store, alpn)
}

#[cfg(feature = "http-client")]
fn client_config_trusting(store: RootCertStore, alpn: &[&[u8]]) -> io::Result<Arc<ClientConfig>> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(invalid)?
        .with_root_certificates(store)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

#[cfg(feature = "http-client")]
/// A client configuration trusting the operating system's certificate
/// store, with the given ALPN protocols.
pub fn client_config_native(alpn: &[&[u8]]) -> io::Result<Arc<ClientConfig>> {
    let found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        return Err(invalid(format!(
            "no trusted root certificates found on this system ({} errors)",
            found.errors.len()
        )));
    }
    let mut store = RootCertStore::empty();
    let (_added, _ignored) = store.add_parsable_certificates(found.certs);
    client_config_trusting(store, alpn)
}

#[cfg(feature = "http-client")]
/// The server name to verify for `host`.
pub(crate) fn server_name(host: &str) -> io::Result<ServerName<'static>> {
    ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']').to_owned()).map_err(invalid)
}

/// The port of `uri`, or `default` when it names none; a port out of range
/// (`:99999`) is an error naming the URL, not a silent fall back to the
/// default.
#[cfg(feature = "http-client")]
pub(crate) fn port_of(uri: &http::Uri, url: &str, default: u16) -> io::Result<u16> {
    // `Uri::port` drops a port it cannot read, so the text is read here.
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or("");
    let host_end = authority.rfind(']').map_or(0, |i| i + 1);
    let Some((_, port)) = authority[host_end..].rsplit_once(':') else {
        return Ok(default);
    };
    port.parse::<u16>().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{url}: {port:?} is not a port (0 to 65535)"),
        )
    })
}

/// A TLS handshake failure, said in terms of what to do about it.
#[cfg(feature = "http-client")]
pub(crate) fn explain(error: io::Error, host: &str) -> io::Error {
    let text = error.to_string();
    let advice = if text.contains("CaUsedAsEndEntity") {
        "the server's certificate is a CA certificate (openssl req -x509 makes one by default); make it with \
         -addext basicConstraints=critical,CA:FALSE (see docs/guide/transports.md#tls), or trust a CA that signed it"
            .to_owned()
    } else if text.contains("UnknownIssuer") {
        "the server's certificate is not signed by a trusted CA: pass the CA (or the self-signed certificate) \
         with --cacert PEM (ClientBuilder::ca_pem)"
            .to_owned()
    } else if text.contains("NotValidForName") {
        format!("the server's certificate is not valid for {host}: use a name it lists, or make it with a subjectAltName for {host}")
    } else if text.contains("Expired") || text.contains("NotValidYet") {
        "the server's certificate has expired or is not valid yet".to_owned()
    } else if text.contains("invalid peer certificate") {
        "the server's certificate could not be verified against the trusted roots: for a private CA or a \
         self-signed certificate, pass it with --cacert PEM (ClientBuilder::ca_pem)"
            .to_owned()
    } else if text.contains("InvalidContentType")
        || text.contains("corrupt message")
        || text.contains("InvalidMessage")
    {
        "the server does not speak TLS on this port: use http:// or ws:// for a plain server".to_owned()
    } else {
        return error;
    };
    io::Error::new(
        error.kind(),
        format!("TLS handshake with {host} failed: {advice} ({text})"),
    )
}

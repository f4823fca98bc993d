//! TLS (`--tls-ca`, `--tls-cert`, `--tls-key`): rustls on ring, as the broker uses.
//!
//! Every connection is made blocking (TCP connect, then the whole TLS handshake, with a timeout)
//! and only then switched to non-blocking and handed to a worker's event loop, so the loop only
//! ever sees established sessions. The server name checked against the broker's certificate is
//! the bootstrap host (a DNS name or an IP address) for every connection, coordinators included.
//!
//! The event loop is edge-triggered and relies on one rule of `read`: a read shorter than the
//! buffer means the socket is drained. `TlsConn::read` keeps it: it returns short only after the
//! socket said `WouldBlock` (or closed). Plaintext connections stay a bare `mio` stream behind
//! the `Stream` enum.

use anyhow::{anyhow, Context};
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// What every TLS connection is made with.
pub struct TlsClient {
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
}

impl TlsClient {
    /// Trust the CA certificates of `ca` (PEM); present the certificate chain of `cert` and the
    /// private key of `key` (PEM; `key` defaults to `cert`, a PEM keystore with both) when given;
    /// check the broker's certificate against `bootstrap`'s host.
    pub fn from_files(
        ca: &Path,
        cert: Option<&Path>,
        key: Option<&Path>,
        bootstrap: &str,
    ) -> anyhow::Result<TlsClient> {
        let mut roots = RootCertStore::empty();
        let cas = CertificateDer::pem_file_iter(ca)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| anyhow!("--tls-ca {}: {e}", ca.display()))?;
        anyhow::ensure!(
            !cas.is_empty(),
            "--tls-ca {}: no PEM certificate in the file",
            ca.display()
        );
        for c in cas {
            roots
                .add(c)
                .map_err(|e| anyhow!("--tls-ca {}: {e}", ca.display()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_root_certificates(roots);
        let config = match cert {
            None => builder.with_no_client_auth(),
            Some(cert) => {
                let key = key.unwrap_or(cert);
                let chain = CertificateDer::pem_file_iter(cert)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| anyhow!("--tls-cert {}: {e}", cert.display()))?;
                anyhow::ensure!(
                    !chain.is_empty(),
                    "--tls-cert {}: no PEM certificate in the file",
                    cert.display()
                );
                let pk = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| anyhow!("--tls-key {}: {e}", key.display()))?;
                builder
                    .with_client_auth_cert(chain, pk)
                    .map_err(|e| anyhow!("--tls-cert/--tls-key: {e}"))?
            }
        };
        let host = bootstrap_host(bootstrap);
        let server_name = ServerName::try_from(host.to_string())
            .map_err(|e| anyhow!("--bootstrap {bootstrap}: {host:?} is no TLS server name: {e}"))?;
        Ok(TlsClient {
            config: Arc::new(config),
            server_name,
        })
    }

    /// Run the whole handshake on a blocking socket (with its read timeout as set by the caller).
    pub fn handshake(&self, tcp: &mut std::net::TcpStream) -> io::Result<ClientConnection> {
        let mut tls = ClientConnection::new(self.config.clone(), self.server_name.clone())
            .map_err(io::Error::other)?;
        while tls.is_handshaking() {
            if let Err(e) = tls.complete_io(tcp) {
                let what = match e.kind() {
                    io::ErrorKind::UnexpectedEof => {
                        "the peer closed the connection (a plaintext listener?)".to_string()
                    }
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                        "no answer (a plaintext listener?)".to_string()
                    }
                    _ => e.to_string(),
                };
                return Err(io::Error::new(
                    e.kind(),
                    format!("TLS handshake failed: {what}"),
                ));
            }
        }
        Ok(tls)
    }

    /// Connect and handshake, blocking; for the start-up client.
    pub fn connect_blocking(
        &self,
        addr: &SocketAddr,
        timeout: Duration,
    ) -> io::Result<rustls::StreamOwned<ClientConnection, std::net::TcpStream>> {
        let mut tcp = std::net::TcpStream::connect_timeout(addr, timeout)?;
        tcp.set_nodelay(true)?;
        tcp.set_read_timeout(Some(timeout))?;
        let tls = self.handshake(&mut tcp)?;
        Ok(rustls::StreamOwned::new(tls, tcp))
    }
}

/// The host part of `host:port` (brackets of an IPv6 literal removed).
fn bootstrap_host(bootstrap: &str) -> &str {
    let host = match bootstrap.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => bootstrap,
    };
    host.trim_start_matches('[').trim_end_matches(']')
}

/// A blocking connection of the start-up client.
pub enum BlockingStream {
    Plain(std::net::TcpStream),
    Tls(Box<rustls::StreamOwned<ClientConnection, std::net::TcpStream>>),
}

impl Read for BlockingStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            BlockingStream::Plain(s) => s.read(buf),
            BlockingStream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for BlockingStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            BlockingStream::Plain(s) => s.write(buf),
            BlockingStream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            BlockingStream::Plain(s) => s.flush(),
            BlockingStream::Tls(s) => s.flush(),
        }
    }
}

/// A non-blocking connection of a worker.
pub enum Stream {
    Plain(mio::net::TcpStream),
    Tls(Box<TlsConn>),
}

/// A TLS session over a non-blocking socket.
pub struct TlsConn {
    tcp: mio::net::TcpStream,
    tls: ClientConnection,
}

impl Stream {
    /// Wrap an established connection (blocking or not; it is made non-blocking here).
    pub fn new(tcp: std::net::TcpStream, tls: Option<ClientConnection>) -> io::Result<Stream> {
        tcp.set_read_timeout(None)?;
        tcp.set_nonblocking(true)?;
        let tcp = mio::net::TcpStream::from_std(tcp);
        Ok(match tls {
            None => Stream::Plain(tcp),
            Some(tls) => Stream::Tls(Box::new(TlsConn { tcp, tls })),
        })
    }

    /// Encrypted bytes wait for the socket (a `flush` on the next writable edge sends them).
    #[inline]
    pub fn pending_output(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(t) => t.tls.wants_write(),
        }
    }

    fn tcp(&mut self) -> &mut mio::net::TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &mut t.tcp,
        }
    }
}

impl Read for Stream {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Stream {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }
    #[inline]
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(_) => Ok(()),
            Stream::Tls(t) => t.push(),
        }
    }
}

impl mio::event::Source for Stream {
    fn register(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        self.tcp().register(registry, token, interests)
    }
    fn reregister(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        self.tcp().reregister(registry, token, interests)
    }
    fn deregister(&mut self, registry: &mio::Registry) -> io::Result<()> {
        self.tcp().deregister(registry)
    }
}

impl TlsConn {
    /// Send queued TLS records until none is left or the socket would block.
    fn push(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.tcp) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Fill `buf` with plaintext; short only once the socket would block, closed, or failed.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        loop {
            while n < buf.len() {
                match self.tls.reader().read(&mut buf[n..]) {
                    // close_notify: what came before it, then end of stream.
                    Ok(0) => return Ok(n),
                    Ok(k) => n += k,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return if n > 0 { Ok(n) } else { Err(e) },
                }
            }
            if n == buf.len() {
                return Ok(n);
            }
            match self.tls.read_tls(&mut self.tcp) {
                Ok(0) => return Ok(n),
                Ok(_) => {
                    if let Err(e) = self.tls.process_new_packets() {
                        // Tell the broker why (the alert rustls queued), then fail.
                        let _ = self.push();
                        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return if n > 0 { Ok(n) } else { Err(e) },
            }
        }
    }

    /// Take `buf` into the session (encrypted at once) and send what the socket takes. Refuses
    /// (`WouldBlock`) while earlier records are still queued, so at most one buffer's worth
    /// waits in rustls.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.push()?;
        let n = self.tls.writer().write(buf)?;
        match self.push() {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_name_is_the_bootstrap_host() {
        assert_eq!(bootstrap_host("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(bootstrap_host("localhost:9093"), "localhost");
        assert_eq!(bootstrap_host("[::1]:9093"), "::1");
        assert_eq!(bootstrap_host("broker"), "broker");
    }

    #[test]
    fn missing_files_name_the_flag() {
        let e = TlsClient::from_files(
            Path::new("/nonexistent/ca.pem"),
            None,
            None,
            "127.0.0.1:9093",
        )
        .err()
        .expect("fails");
        let msg = format!("{e:#}");
        assert!(msg.contains("--tls-ca /nonexistent/ca.pem"), "{msg}");
    }
}

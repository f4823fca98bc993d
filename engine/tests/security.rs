//! Listeners, TLS and SASL against the real binary: several listeners with their own advertised
//! endpoints, TLS handshakes with rustls as the client (certificates made here with rcgen),
//! client-certificate checks, SASL PLAIN over SASL_PLAINTEXT and SASL_SSL, what is closed before
//! authentication, and KIP-368 session lifetimes and re-authentication.

mod common;

use bytes::{Bytes, BytesMut};
use common::{data_dir, s, Broker};
use kafka_protocol::messages::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wire::codec::{decode_response, encode_request};
use wire::{Request, RequestHeader, Response};

/// A CA, a server certificate for 127.0.0.1 and client certificates it signs.
struct Pki {
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(DnType::CommonName, "ringleader test CA");
        let ca = p.self_signed(&ca_key).unwrap();
        Pki { ca, ca_key }
    }

    /// (certificate PEM, key PEM) signed by the CA.
    fn issue(&self, names: &[&str], dn: &[(DnType, &str)], expired: bool) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        for (t, v) in dn {
            p.distinguished_name.push(t.clone(), *v);
        }
        if expired {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = p.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Writes the broker's PEM keystore (key + chain) and truststore into `dir`.
    fn broker_files(&self, dir: &Path) -> (String, String) {
        let (cert, key) = self.issue(
            &["127.0.0.1", "localhost"],
            &[(DnType::CommonName, "broker")],
            false,
        );
        let keystore = dir.join("broker.pem");
        std::fs::write(&keystore, format!("{key}{cert}")).unwrap();
        let truststore = dir.join("ca.pem");
        std::fs::write(&truststore, self.ca.pem()).unwrap();
        (
            keystore.display().to_string(),
            truststore.display().to_string(),
        )
    }

    fn client_config(&self, client: Option<(String, String)>) -> Arc<rustls::ClientConfig> {
        use rustls_pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let b = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
        Arc::new(match client {
            None => b.with_no_client_auth(),
            Some((cert, key)) => b
                .with_client_auth_cert(
                    vec![
                        rustls_pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).unwrap(),
                    ],
                    rustls_pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
                )
                .unwrap(),
        })
    }
}

/// A blocking Kafka client over any stream (TCP or rustls over TCP).
struct Conn<S: Read + Write> {
    s: S,
    cid: i32,
}

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

fn tcp(addr: SocketAddr) -> TcpStream {
    let t = TcpStream::connect(addr).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    t.set_nodelay(true).unwrap();
    t
}

fn tls(addr: SocketAddr, cfg: Arc<rustls::ClientConfig>) -> Conn<TlsStream> {
    let name = rustls_pki_types::ServerName::IpAddress(addr.ip().into());
    let c = rustls::ClientConnection::new(cfg, name).unwrap();
    Conn {
        s: rustls::StreamOwned::new(c, tcp(addr)),
        cid: 1,
    }
}

fn plain(addr: SocketAddr) -> Conn<TcpStream> {
    Conn {
        s: tcp(addr),
        cid: 1,
    }
}

impl<S: Read + Write> Conn<S> {
    fn try_call(&mut self, version: i16, req: Request) -> Result<Response, String> {
        let cid = self.cid;
        self.cid += 1;
        let header = RequestHeader {
            api_key: req.api_key(),
            api_version: version,
            correlation_id: cid,
            client_id: Some("security-it".into()),
        };
        let mut buf = BytesMut::new();
        encode_request(&header, &req, &mut buf).map_err(|e| e.to_string())?;
        self.s.write_all(&buf).map_err(|e| e.to_string())?;
        self.s.flush().map_err(|e| e.to_string())?;
        let mut len = [0u8; 4];
        self.s.read_exact(&mut len).map_err(|e| e.to_string())?;
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        self.s.read_exact(&mut body).map_err(|e| e.to_string())?;
        let (got, resp) = decode_response(req.api_key(), version, &Bytes::from(body))
            .map_err(|e| e.to_string())?;
        assert_eq!(got, cid, "correlation id");
        Ok(resp)
    }

    fn call(&mut self, version: i16, req: Request) -> Response {
        self.try_call(version, req).expect("response")
    }

    /// The connection is closed by the broker: a read ends (EOF or reset) without a response.
    fn assert_closed(&mut self) {
        let mut b = [0u8; 1];
        match self.s.read(&mut b) {
            Ok(0) | Err(_) => {}
            Ok(_) => panic!("expected the broker to close the connection"),
        }
    }

    fn api_versions(&mut self) -> ApiVersionsResponse {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(s("security-it"))
            .with_client_software_version(s("1.0"));
        match self.call(3, Request::ApiVersions(req)) {
            Response::ApiVersions(r) => r,
            other => panic!("{other:?}"),
        }
    }

    fn metadata_endpoint(&mut self) -> (String, i32) {
        match self.call(12, Request::Metadata(MetadataRequest::default())) {
            Response::Metadata(r) => (r.brokers[0].host.to_string(), r.brokers[0].port),
            other => panic!("{other:?}"),
        }
    }

    fn handshake(&mut self, version: i16, mechanism: &str) -> SaslHandshakeResponse {
        let req = SaslHandshakeRequest::default().with_mechanism(s(mechanism));
        match self.call(version, Request::SaslHandshake(req)) {
            Response::SaslHandshake(r) => r,
            other => panic!("{other:?}"),
        }
    }

    fn authenticate(&mut self, version: i16, token: &[u8]) -> SaslAuthenticateResponse {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
        match self.call(version, Request::SaslAuthenticate(req)) {
            Response::SaslAuthenticate(r) => r,
            other => panic!("{other:?}"),
        }
    }

    fn plain_login(&mut self, user: &str, password: &str) -> SaslAuthenticateResponse {
        let h = self.handshake(1, "PLAIN");
        assert_eq!(h.error_code, 0, "{h:?}");
        self.authenticate(2, format!("\0{user}\0{password}").as_bytes())
    }
}

/// The bound address of listener `name`, from the broker's "listener NAME on ADDR" line.
fn listener_addr(b: &Broker, name: &str) -> SocketAddr {
    let needle = format!("listener {name} on ");
    let lines = b.wait_for_lines(&needle, Duration::from_secs(10));
    let line = lines
        .first()
        .unwrap_or_else(|| panic!("no {needle}:\n{}", b.log_text()));
    let rest = line.split(&needle).nth(1).unwrap();
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

const PLAIN_JAAS: &str = "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\" user_bob=\"bob-secret\";";

#[test]
fn tls_listener_serves_and_each_listener_advertises_its_own_endpoint() {
    let dir = data_dir("sec-tls-basic");
    let pki = Pki::new();
    let (keystore, _) = pki.broker_files(&dir);
    let ks = format!("ssl.keystore.location={keystore}");
    let b = Broker::start(
        &dir,
        &[
            "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "advertised.listeners=SSL://ssl.example:19093",
            "ssl.keystore.type=PEM",
            &ks,
        ],
    );
    let ssl = listener_addr(&b, "SSL");
    let mut t = tls(ssl, pki.client_config(None));
    let v = t.api_versions();
    assert_eq!(v.error_code, 0);
    assert!(v
        .api_keys
        .iter()
        .any(|k| k.api_key == 36 && k.max_version == 2));
    // Each listener answers with its own advertised endpoint (Kafka: the request's listener).
    assert_eq!(t.metadata_endpoint(), ("ssl.example".to_string(), 19093));
    let mut p = plain(b.addr);
    assert_eq!(
        p.metadata_endpoint(),
        ("127.0.0.1".to_string(), i32::from(b.addr.port()))
    );
    match t.call(
        6,
        Request::FindCoordinator(
            FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![s("g")]),
        ),
    ) {
        Response::FindCoordinator(r) => {
            assert_eq!(r.coordinators[0].host.as_str(), "ssl.example");
            assert_eq!(r.coordinators[0].port, 19093);
        }
        other => panic!("{other:?}"),
    }
    match t.call(
        0,
        Request::DescribeCluster(DescribeClusterRequest::default()),
    ) {
        Response::DescribeCluster(r) => assert_eq!(r.brokers[0].port, 19093),
        other => panic!("{other:?}"),
    }
    // SaslHandshake on a listener without SASL: KafkaApis's ILLEGAL_SASL_STATE.
    assert_eq!(p.handshake(1, "PLAIN").error_code, 34);
}

#[test]
fn client_certificates_are_required_verified_and_expired_ones_refused() {
    let dir = data_dir("sec-tls-mtls");
    let pki = Pki::new();
    let (keystore, truststore) = pki.broker_files(&dir);
    let ks = format!("ssl.keystore.location={keystore}");
    let ts = format!("listener.name.ssl.ssl.truststore.location={truststore}");
    let b = Broker::start(
        &dir,
        &[
            "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.type=PEM",
            "listener.name.ssl.ssl.truststore.type=PEM",
            "listener.name.ssl.ssl.client.auth=required",
            &ks,
            &ts,
        ],
    );
    let ssl = listener_addr(&b, "SSL");
    let alice = pki.issue(
        &[],
        &[
            (DnType::OrganizationName, "ringleader"),
            (DnType::OrganizationalUnitName, "eng"),
            (DnType::CommonName, "alice"),
        ],
        false,
    );
    let mut ok = tls(ssl, pki.client_config(Some(alice)));
    assert_eq!(ok.api_versions().error_code, 0);

    // No certificate: the handshake fails (TLS 1.3 reports it at the first read).
    let mut none = tls(ssl, pki.client_config(None));
    assert!(none
        .try_call(3, Request::ApiVersions(ApiVersionsRequest::default()))
        .is_err());

    let expired = pki.issue(&[], &[(DnType::CommonName, "old")], true);
    let mut old = tls(ssl, pki.client_config(Some(expired)));
    assert!(old
        .try_call(3, Request::ApiVersions(ApiVersionsRequest::default()))
        .is_err());
    assert!(!b
        .wait_for_lines("TLS handshake failed", Duration::from_secs(5))
        .is_empty());

    // A certificate of another CA is refused too.
    let other = Pki::new().issue(&[], &[(DnType::CommonName, "mallory")], false);
    let mut m = tls(ssl, pki.client_config(Some(other)));
    assert!(m
        .try_call(3, Request::ApiVersions(ApiVersionsRequest::default()))
        .is_err());
}

#[test]
fn a_stalled_tls_handshake_holds_only_its_own_connection() {
    let dir = data_dir("sec-tls-stall");
    let pki = Pki::new();
    let (keystore, _) = pki.broker_files(&dir);
    let ks = format!("ssl.keystore.location={keystore}");
    let b = Broker::start(
        &dir,
        &[
            "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.type=PEM",
            "connections.max.idle.ms=1000",
            &ks,
        ],
    );
    let ssl = listener_addr(&b, "SSL");
    // Many connections that never start their handshake, on both shards...
    let mut stalled: Vec<TcpStream> = (0..20).map(|_| tcp(ssl)).collect();
    // ...do not stop others from being served meanwhile.
    let mut t = tls(ssl, pki.client_config(None));
    assert_eq!(t.api_versions().error_code, 0);
    let mut p = plain(b.addr);
    assert_eq!(p.api_versions().error_code, 0);
    // And connections.max.idle.ms ends them.
    let started = Instant::now();
    for s in &mut stalled {
        let mut byte = [0u8; 1];
        match s.read(&mut byte) {
            Ok(0) | Err(_) => {}
            Ok(_) => panic!("no bytes expected"),
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "stalled handshakes closed after {:?}",
        started.elapsed()
    );
}

#[test]
fn sasl_plain_authenticates_and_a_failure_is_answered_then_closed() {
    let dir = data_dir("sec-sasl-plain");
    let b = Broker::start(
        &dir,
        &[
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
            PLAIN_JAAS,
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
        ],
    );
    let sasl = listener_addr(&b, "SASL_PLAINTEXT");

    // ApiVersions, then the handshake, then the token; then requests are served.
    let mut c = plain(sasl);
    assert_eq!(c.api_versions().error_code, 0);
    let h = c.handshake(1, "PLAIN");
    assert_eq!(h.error_code, 0);
    let names: Vec<&str> = h.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(names, ["PLAIN", "SCRAM-SHA-256"]);
    let a = c.authenticate(2, b"\0alice\0alice-secret");
    assert_eq!(a.error_code, 0, "{a:?}");
    assert_eq!(a.session_lifetime_ms, 0, "connections.max.reauth.ms is 0");
    assert_eq!(
        c.metadata_endpoint(),
        ("127.0.0.1".to_string(), i32::from(sasl.port()))
    );
    // After authentication KafkaApis answers these with ILLEGAL_SASL_STATE (no re-auth: no
    // session expiry).
    assert_eq!(c.handshake(1, "PLAIN").error_code, 34);

    // A wrong password: SASL_AUTHENTICATION_FAILED with the mechanism's message, then closed.
    let mut bad = plain(sasl);
    let a = bad.plain_login("alice", "nope");
    assert_eq!(a.error_code, 58);
    assert!(a.error_message.is_some());
    bad.assert_closed();
    assert!(!b
        .wait_for_lines("SASL authentication failed", Duration::from_secs(5))
        .is_empty());

    // A mechanism not enabled: UNSUPPORTED_SASL_MECHANISM with the enabled list, then closed.
    let mut m = plain(sasl);
    let h = m.handshake(1, "SCRAM-SHA-512");
    assert_eq!(h.error_code, 33);
    assert_eq!(h.mechanisms.len(), 2);
    m.assert_closed();

    // Anything but ApiVersions / SaslHandshake before authentication closes the connection.
    let mut early = plain(sasl);
    assert!(early
        .try_call(12, Request::Metadata(MetadataRequest::default()))
        .is_err());

    // A v0 handshake: the tokens then go raw, without Kafka headers.
    let mut raw = plain(sasl);
    assert_eq!(raw.handshake(0, "PLAIN").error_code, 0);
    let token = b"\0bob\0bob-secret";
    raw.s
        .write_all(&(token.len() as u32).to_be_bytes())
        .unwrap();
    raw.s.write_all(token).unwrap();
    let mut len = [0u8; 4];
    raw.s.read_exact(&mut len).unwrap();
    assert_eq!(u32::from_be_bytes(len), 0, "PLAIN's empty server token");
    assert_eq!(raw.api_versions().error_code, 0);
}

#[test]
fn sasl_ssl_sessions_expire_and_are_renewed_in_place() {
    let dir = data_dir("sec-sasl-reauth");
    let pki = Pki::new();
    let (keystore, _) = pki.broker_files(&dir);
    let ks = format!("ssl.keystore.location={keystore}");
    let b = Broker::start(
        &dir,
        &[
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.keystore.type=PEM",
            &ks,
            "listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\" user_bob=\"bob-secret\";",
            "connections.max.reauth.ms=1500",
        ],
    );
    let addr = listener_addr(&b, "SASL_SSL");
    let mut c = tls(addr, pki.client_config(None));
    let a = c.plain_login("alice", "alice-secret");
    assert_eq!(a.error_code, 0, "{a:?}");
    assert_eq!(a.session_lifetime_ms, 1500);
    assert_eq!(c.api_versions().error_code, 0);

    // Re-authentication in place, as the same principal, renews the session.
    std::thread::sleep(Duration::from_millis(1100));
    let a = c.plain_login("alice", "alice-secret");
    assert_eq!(a.error_code, 0, "{a:?}");
    assert_eq!(a.session_lifetime_ms, 1500);
    std::thread::sleep(Duration::from_millis(1000));
    // 2.1 s after the first login, 1.0 s into the renewed session: still served.
    assert_eq!(c.api_versions().error_code, 0);

    // Past the session's end, the next request closes the connection.
    std::thread::sleep(Duration::from_millis(700));
    assert!(c
        .try_call(3, Request::ApiVersions(ApiVersionsRequest::default()))
        .is_err());

    // Re-authenticating as someone else fails and closes.
    let mut d = tls(addr, pki.client_config(None));
    assert_eq!(d.plain_login("alice", "alice-secret").error_code, 0);
    std::thread::sleep(Duration::from_millis(1050));
    let a = d.plain_login("bob", "bob-secret");
    assert_eq!(a.error_code, 58);
    assert!(
        a.error_message
            .as_ref()
            .is_some_and(|m| m.as_str().contains("Cannot change principals")),
        "{a:?}"
    );
    d.assert_closed();
}

/// HMAC-SHA-256.
fn hmac256(key: &[u8], data: &[u8]) -> Vec<u8> {
    use hmac::Mac;
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// A SCRAM-SHA-256 client (RFC 5802 / 7677), as Kafka's `ScramSaslClient` speaks it, over
/// SaslHandshake v1 + SaslAuthenticate v2. The last response (the server-final message, or the
/// failure).
fn scram_login<S: Read + Write>(
    c: &mut Conn<S>,
    user: &str,
    password: &str,
) -> SaslAuthenticateResponse {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    assert_eq!(c.handshake(1, "SCRAM-SHA-256").error_code, 0);
    let client_nonce = "rOprNGfwEbeRWgbNEkqO";
    let first_bare = format!("n={user},r={client_nonce}");
    let first = c.authenticate(2, format!("n,,{first_bare}").as_bytes());
    if first.error_code != 0 {
        return first;
    }
    let server_first = String::from_utf8(first.auth_bytes.to_vec()).unwrap();
    let field = |k: &str| {
        server_first
            .split(',')
            .find_map(|f| f.strip_prefix(k))
            .unwrap()
            .to_string()
    };
    let (nonce, salt, iterations) = (field("r="), field("s="), field("i="));
    assert!(nonce.starts_with(client_nonce), "{server_first}");
    let salt = b64.decode(salt).unwrap();
    let salted = security::sasl::salted_password(
        security::sasl::Mechanism::ScramSha256,
        password.as_bytes(),
        &salt,
        iterations.parse().unwrap(),
    )
    .unwrap();
    let client_key = hmac256(&salted, b"Client Key");
    let stored_key: Vec<u8> = {
        use sha2::Digest;
        sha2::Sha256::digest(&client_key).to_vec()
    };
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = format!("{first_bare},{server_first},{without_proof}");
    let signature = hmac256(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(a, b)| a ^ b)
        .collect();
    let last = c.authenticate(
        2,
        format!("{without_proof},p={}", b64.encode(proof)).as_bytes(),
    );
    if last.error_code == 0 {
        // The server proves it knows the credential too.
        let server_key = hmac256(&salted, b"Server Key");
        let want = format!(
            "v={}",
            b64.encode(hmac256(&server_key, auth_message.as_bytes()))
        );
        assert_eq!(String::from_utf8(last.auth_bytes.to_vec()).unwrap(), want);
    }
    last
}

#[test]
fn sasl_ssl_scram_authenticates_against_the_brokers_scram_store() {
    let dir = data_dir("sec-sasl-scram");
    let pki = Pki::new();
    let (keystore, _) = pki.broker_files(&dir);
    let ks = format!("ssl.keystore.location={keystore}");
    let b = Broker::start(
        &dir,
        &[
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.keystore.type=PEM",
            &ks,
            "sasl.enabled.mechanisms=SCRAM-SHA-256",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
        ],
    );
    // alice's credential, set as kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]' does.
    let salt = b"ringleader-salt-1";
    let salted = security::sasl::salted_password(
        security::sasl::Mechanism::ScramSha256,
        b"alice-secret",
        salt,
        4096,
    )
    .unwrap();
    let upsert = alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
        .with_name(s("alice"))
        .with_mechanism(1)
        .with_iterations(4096)
        .with_salt(Bytes::copy_from_slice(salt))
        .with_salted_password(Bytes::from(salted));
    let mut p = plain(b.addr);
    match p.call(
        0,
        Request::AlterUserScramCredentials(
            AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsert]),
        ),
    ) {
        Response::AlterUserScramCredentials(r) => assert_eq!(r.results[0].error_code, 0, "{r:?}"),
        other => panic!("{other:?}"),
    }
    let addr = listener_addr(&b, "SASL_SSL");
    let mut c = tls(addr, pki.client_config(None));
    let last = scram_login(&mut c, "alice", "alice-secret");
    assert_eq!(last.error_code, 0, "{last:?}");
    assert_eq!(c.api_versions().error_code, 0);

    let mut bad = tls(addr, pki.client_config(None));
    let last = scram_login(&mut bad, "alice", "wrong");
    assert_eq!(last.error_code, 58, "{last:?}");
    bad.assert_closed();
}

/// `ringleader serve` with `sets` exits with the configuration error code and this message.
fn refused(sets: &[&str], expect: &str) {
    let dir = data_dir("sec-refused");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ringleader"));
    cmd.args(["serve", "--cores", "1", "--data-dir"]).arg(&dir);
    for s in sets {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(expect), "expected {expect:?} in:\n{err}");
}

#[test]
fn unsupported_security_settings_are_refused_at_start() {
    refused(
        &["listeners=SASL_PLAINTEXT://127.0.0.1:0"],
        "Kafka's default (GSSAPI, Kerberos) is not supported",
    );
    refused(
        &[
            "listeners=SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms=PLAIN",
        ],
        "listener.name.sasl_plaintext.plain.sasl.jaas.config is not set",
    );
    refused(
        &[
            "listeners=SSL://127.0.0.1:0",
            "ssl.keystore.location=/nonexistent.jks",
        ],
        "only PEM keystores are supported",
    );
    refused(&["ssl.key.password=x"], "encrypted PEM private keys");
    refused(
        &["listeners=FOO://127.0.0.1:0"],
        "listener FOO has no security protocol",
    );
}

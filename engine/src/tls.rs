//! TLS for SSL and SASL_SSL listeners: the rustls server configuration built from Kafka's ssl.*
//! keys (PEM keystores and truststores only), and the principal of a client certificate.
//!
//! Kafka builds its `SSLEngine` in `clients/src/main/java/org/apache/kafka/common/security/ssl/
//! DefaultSslEngineFactory.java` (PEM stores: its `PemStore`); the principal of an SSL
//! connection is `User:` + the client certificate's subject as `X500Principal.getName()`
//! prints it (`DefaultKafkaPrincipalBuilder`, with the default `ssl.principal.mapping.rules`).
//! Read at start-up only: the files are read once, a bad one fails the start.

use crate::config::Config;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// The rustls configuration of listener `listener` (its `listener.name.<l>.ssl.*` overrides
/// win over the broker-wide keys), or why it cannot be served.
pub fn server_config(cfg: &Config, listener: &str) -> Result<Arc<rustls::ServerConfig>, String> {
    let v = |key: &str| cfg.listener_value(listener, key);
    let ctx = |e: String| format!("listener {listener}: {e}");
    for (key, what) in [
        ("ssl.keystore.type", "keystore"),
        ("ssl.truststore.type", "truststore"),
    ] {
        let t = v(key);
        // A truststore of the default type (JKS) is fine when no truststore is given.
        let unused = what == "truststore"
            && v("ssl.truststore.location").is_empty()
            && v("ssl.truststore.certificates").is_empty();
        if !t.eq_ignore_ascii_case("PEM") && !unused {
            return Err(ctx(format!(
                "{key}={t}: only PEM {what}s are supported (set {key}=PEM)"
            )));
        }
    }
    if !v("ssl.cipher.suites").trim().is_empty() {
        return Err(ctx(
            "ssl.cipher.suites: only the default (empty: rustls's own suites) is supported".into(),
        ));
    }
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    for p in v("ssl.enabled.protocols")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        match p {
            "TLSv1.3" => versions.push(&rustls::version::TLS13),
            "TLSv1.2" => versions.push(&rustls::version::TLS12),
            other => {
                return Err(ctx(format!(
                    "ssl.enabled.protocols: {other} is not supported (TLSv1.2 and TLSv1.3 are)"
                )))
            }
        }
    }
    if versions.is_empty() {
        return Err(ctx("ssl.enabled.protocols is empty".into()));
    }

    // The keystore: one PEM file with key and chain, or both inline (Kafka's PEM keystore).
    let location = v("ssl.keystore.location");
    let (key_pem, chain_pem) = match (
        location.is_empty(),
        v("ssl.keystore.key"),
        v("ssl.keystore.certificate.chain"),
    ) {
        (false, k, c) if k.is_empty() && c.is_empty() => {
            let text = std::fs::read(&location)
                .map_err(|e| ctx(format!("ssl.keystore.location {location}: {e}")))?;
            (text.clone(), text)
        }
        (true, k, c) if !k.is_empty() && !c.is_empty() => (k.into_bytes(), c.into_bytes()),
        (true, k, c) if k.is_empty() && c.is_empty() => {
            return Err(ctx(
                "TLS needs ssl.keystore.location, or ssl.keystore.key and ssl.keystore.certificate.chain"
                    .into(),
            ))
        }
        _ => {
            return Err(ctx(
                "give either ssl.keystore.location, or both ssl.keystore.key and ssl.keystore.certificate.chain"
                    .into(),
            ))
        }
    };
    if String::from_utf8_lossy(&key_pem).contains("ENCRYPTED PRIVATE KEY") {
        return Err(ctx(
            "the keystore's private key is encrypted; encrypted keys (ssl.key.password) are not \
             supported: give an unencrypted PKCS#8 key"
                .into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| ctx(format!("no usable private key in the keystore: {e}")))?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&chain_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| ctx(format!("bad certificate in the keystore: {e}")))?;
    if chain.is_empty() {
        return Err(ctx("no certificate in the keystore".into()));
    }

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| ctx(format!("TLS versions: {e}")))?;

    let client_auth = v("ssl.client.auth");
    let trust = truststore(cfg, listener).map_err(ctx)?;
    let builder = match (client_auth.as_str(), trust) {
        ("none", _) => builder.with_no_client_auth(),
        (mode, Some(roots)) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let verifier = if mode == "requested" {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| ctx(format!("client certificate verifier: {e}")))?,
            )
        }
        (mode, None) => {
            return Err(ctx(format!(
                "ssl.client.auth={mode} needs CA certificates: set ssl.truststore.type=PEM and \
                 ssl.truststore.location or ssl.truststore.certificates (there is no JVM default \
                 truststore here)"
            )))
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| ctx(format!("keystore: {e}")))?;
    // Kafka clients neither resume sessions across connections nor send ALPN; tickets would only
    // cost a key rotation thread.
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(256);
    Ok(Arc::new(config))
}

/// The listener's CA certificates, if a truststore is configured.
fn truststore(cfg: &Config, listener: &str) -> Result<Option<rustls::RootCertStore>, String> {
    let location = cfg.listener_value(listener, "ssl.truststore.location");
    let inline = cfg.listener_value(listener, "ssl.truststore.certificates");
    let pem = match (location.is_empty(), inline.is_empty()) {
        (true, true) => return Ok(None),
        (false, true) => std::fs::read(&location)
            .map_err(|e| format!("ssl.truststore.location {location}: {e}"))?,
        (true, false) => inline.into_bytes(),
        (false, false) => {
            return Err(
                "give either ssl.truststore.location or ssl.truststore.certificates, not both"
                    .into(),
            )
        }
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("bad certificate in the truststore: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("bad CA certificate in the truststore: {e}"))?;
    }
    if roots.is_empty() {
        return Err("no certificate in the truststore".into());
    }
    Ok(Some(roots))
}

/// The subject of a DER certificate in RFC 2253 form, as Java's `X500Principal.getName()`
/// prints it: RDNs last-first, comma-separated without spaces, the RFC 2253 keywords (CN, C, L,
/// ST, O, OU, STREET, DC, UID) by name and any other attribute as its OID with the `#`-hex of
/// its DER value. `None` for a certificate that does not parse (rustls already verified it).
pub fn subject_rfc2253(cert_der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der).ok()?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter() {
        let mut attrs = Vec::new();
        for atv in rdn.iter() {
            let oid = atv.attr_type().to_id_string();
            let keyword = match oid.as_str() {
                "2.5.4.3" => Some("CN"),
                "2.5.4.6" => Some("C"),
                "2.5.4.7" => Some("L"),
                "2.5.4.8" => Some("ST"),
                "2.5.4.10" => Some("O"),
                "2.5.4.11" => Some("OU"),
                "2.5.4.9" => Some("STREET"),
                "0.9.2342.19200300.100.1.25" => Some("DC"),
                "0.9.2342.19200300.100.1.1" => Some("UID"),
                _ => None,
            };
            let value = atv.attr_value();
            match (keyword, atv.as_str().ok()) {
                (Some(k), Some(text)) => attrs.push(format!("{k}={}", escape_rfc2253(text))),
                _ => {
                    // Java prints the DER encoding of the value: tag, length, contents.
                    let data = value.data;
                    let mut der = vec![value.header.tag().0 as u8];
                    if data.len() < 128 {
                        der.push(data.len() as u8);
                    } else {
                        let len = (data.len() as u64).to_be_bytes();
                        let skip = len.iter().take_while(|b| **b == 0).count();
                        der.push(0x80 | (8 - skip) as u8);
                        der.extend_from_slice(&len[skip..]);
                    }
                    der.extend_from_slice(data);
                    let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
                    attrs.push(format!("{oid}=#{hex}"));
                }
            }
        }
        rdns.push(attrs.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// RFC 2253 §2.4 escaping, as `X500Principal.getName(RFC2253)` does it.
fn escape_rfc2253(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let n = text.chars().count();
    for (i, c) in text.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == n - 1 && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_x500principal() {
        assert_eq!(escape_rfc2253("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape_rfc2253(" #x "), "\\ #x\\ ");
        assert_eq!(escape_rfc2253("#x"), "\\#x");
    }

    #[test]
    fn subject_is_printed_as_x500principal_get_name() {
        use rcgen::{CertificateParams, DnType, KeyPair};
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        // Issued order O, OU, CN: Java prints the last RDN first.
        p.distinguished_name
            .push(DnType::OrganizationName, "ringleader");
        p.distinguished_name
            .push(DnType::OrganizationalUnitName, "eng");
        p.distinguished_name
            .push(DnType::CommonName, "alice, the admin");
        let cert = p.self_signed(&key).unwrap();
        assert_eq!(
            subject_rfc2253(cert.der()).unwrap(),
            "CN=alice\\, the admin,OU=eng,O=ringleader"
        );
    }
}

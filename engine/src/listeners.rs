//! The listeners a broker serves: each one's name, security protocol, advertised endpoint, TLS
//! configuration and SASL settings, built once at start-up from Kafka's keys (`listeners`,
//! `listener.security.protocol.map`, `advertised.listeners`, ssl.*, sasl.*,
//! `connections.max.reauth.ms`, with `listener.name.<l>.` overrides).
//!
//! Every connection keeps the [`Listener`] it was accepted on: Metadata, FindCoordinator and
//! DescribeCluster answer with that listener's advertised endpoint, as Kafka's `KafkaApis` does
//! with `request.context.listenerName`.

use crate::config::{Config, ListenerSpec};
use std::net::SocketAddr;
use std::sync::Arc;

/// Kafka's `SecurityProtocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "PLAINTEXT" => Self::Plaintext,
            "SSL" => Self::Ssl,
            "SASL_PLAINTEXT" => Self::SaslPlaintext,
            "SASL_SSL" => Self::SaslSsl,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// What a SASL listener authenticates with.
#[derive(Debug)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms`, in the configured order (SaslHandshake lists them so).
    pub mechanisms: Vec<security::sasl::Mechanism>,
    /// PLAIN users and OAUTHBEARER validation, from the listener's JAAS entries.
    pub config: security::sasl::SaslConfig,
    /// `connections.max.reauth.ms` (0: sessions do not expire).
    pub reauth_ms: i64,
    /// `sasl.server.max.receive.size`: the largest request before authentication.
    pub max_receive_size: usize,
    /// `connection.failed.authentication.delay.ms` (KIP-306): how long the answer to a failed
    /// authentication is held back before it is written and the connection closed.
    pub failed_auth_delay: std::time::Duration,
}

/// One listener being served.
#[derive(Debug)]
pub struct Listener {
    /// Upper-case, as Kafka's `ListenerName`.
    pub name: String,
    pub protocol: SecurityProtocol,
    /// The address its sockets are bound to (port 0 resolved).
    pub addr: SocketAddr,
    /// What Metadata, FindCoordinator and DescribeCluster tell clients of this listener.
    pub advertised_host: String,
    pub advertised_port: i32,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub sasl: Option<Arc<SaslSettings>>,
}

impl Listener {
    /// A PLAINTEXT listener at `addr` advertising `host:port` (tests, and the default broker).
    pub fn plaintext(addr: SocketAddr, host: String, port: i32) -> Self {
        Listener {
            name: "PLAINTEXT".into(),
            protocol: SecurityProtocol::Plaintext,
            addr,
            advertised_host: host,
            advertised_port: port,
            tls: None,
            sasl: None,
        }
    }
}

/// A listener checked and configured, before its sockets are bound.
#[derive(Debug)]
pub struct ListenerPlan {
    pub spec: ListenerSpec,
    pub protocol: SecurityProtocol,
    /// Where to bind (port 0: any free port).
    pub addr: SocketAddr,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub sasl: Option<Arc<SaslSettings>>,
}

impl ListenerPlan {
    /// The listener once bound to `bound`: advertised as its `advertised.listeners` entry, else
    /// at the bound address (the host name for a wildcard address, as Kafka does).
    pub fn bound(&self, bound: SocketAddr) -> Listener {
        let (host, port) = match &self.spec.advertised {
            Some((h, p)) => (h.clone(), i32::from(*p)),
            None => (advertised_host_for(bound), i32::from(bound.port())),
        };
        Listener {
            name: self.spec.name.clone(),
            protocol: self.protocol,
            addr: bound,
            advertised_host: host,
            advertised_port: port,
            tls: self.tls.clone(),
            sasl: self.sasl.clone(),
        }
    }
}

/// Every listener of `config`, with `listen` (`--listen`) replacing the PLAINTEXT listener's
/// address. Reads the TLS files; any error is a configuration error, reported before binding.
pub fn plan(config: &Config, listen: Option<SocketAddr>) -> Result<Vec<ListenerPlan>, String> {
    let specs = config.listener_specs()?;
    let mut out = Vec::with_capacity(specs.len());
    let mut listen_used = false;
    for spec in specs {
        let protocol = SecurityProtocol::from_name(&spec.protocol)
            .ok_or_else(|| format!("unknown security protocol {}", spec.protocol))?;
        let addr = match listen {
            Some(a) if spec.name == "PLAINTEXT" => {
                listen_used = true;
                a
            }
            _ => resolve(&spec.host, spec.port)?,
        };
        let tls = if protocol.uses_tls() {
            Some(crate::tls::server_config(config, &spec.name)?)
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            Some(Arc::new(sasl_settings(config, &spec.name)?))
        } else {
            None
        };
        out.push(ListenerPlan {
            spec,
            protocol,
            addr,
            tls,
            sasl,
        });
    }
    if let (Some(a), false) = (listen, listen_used) {
        return Err(format!(
            "--listen {a} names the PLAINTEXT listener's address, but listeners has no PLAINTEXT listener"
        ));
    }
    Ok(out)
}

/// The SASL settings of listener `name`, as Kafka's `SaslChannelBuilder` configures them: every
/// enabled mechanism needs a JAAS entry (`JaasContext.loadServerContext` fails the start without
/// one), and GSSAPI, Kafka's default, is not available here.
fn sasl_settings(config: &Config, name: &str) -> Result<SaslSettings, String> {
    use security::sasl::Mechanism;
    let ctx = |e: String| format!("listener {name}: {e}");
    let given = config.listener_key_given(name, "sasl.enabled.mechanisms");
    let mut mechanisms = Vec::new();
    for m in config
        .listener_value(name, "sasl.enabled.mechanisms")
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        match Mechanism::from_name(m) {
            Some(mech) if !mechanisms.contains(&mech) => mechanisms.push(mech),
            Some(_) => {}
            None if m == "GSSAPI" && !given => {
                return Err(ctx(
                    "sasl.enabled.mechanisms is not set, and Kafka's default (GSSAPI, Kerberos) is \
                     not supported: set it to some of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"
                        .into(),
                ))
            }
            None => {
                return Err(ctx(format!(
                    "sasl.enabled.mechanisms: {m} is not supported (PLAIN, SCRAM-SHA-256, \
                     SCRAM-SHA-512 and OAUTHBEARER are)"
                )))
            }
        }
    }
    if mechanisms.is_empty() {
        return Err(ctx("sasl.enabled.mechanisms is empty".into()));
    }
    let mut sasl = security::sasl::SaslConfig::default();
    for m in &mechanisms {
        let key = format!(
            "listener.name.{}.{}.sasl.jaas.config",
            name.to_ascii_lowercase(),
            m.name().to_ascii_lowercase()
        );
        let text = config.listener_jaas(name, m.name()).ok_or_else(|| {
            ctx(format!(
                "{} is enabled but {key} is not set (Kafka needs a JAAS entry for every enabled mechanism)",
                m.name()
            ))
        })?;
        let options = security::jaas::parse(text)
            .map_err(|e| ctx(format!("{key}: {e}")))?
            .options;
        match m {
            Mechanism::Plain => sasl.plain_users = security::jaas::plain_users(&options),
            Mechanism::OAuthBearer => {
                sasl.oauth = security::sasl::OAuthConfig::from_jaas_options(&options)
                    .map_err(|e| ctx(format!("{key}: {e}")))?
            }
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => {}
        }
    }
    let reauth_ms: i64 = config
        .listener_value(name, "connections.max.reauth.ms")
        .parse()
        .map_err(|e| ctx(format!("connections.max.reauth.ms: {e}")))?;
    let max_receive_size: usize = config
        .listener_value(name, "sasl.server.max.receive.size")
        .parse()
        .map_err(|e| ctx(format!("sasl.server.max.receive.size: {e}")))?;
    Ok(SaslSettings {
        mechanisms,
        config: sasl,
        reauth_ms,
        max_receive_size,
        failed_auth_delay: std::time::Duration::from_millis(
            config.connection_failed_authentication_delay_ms as u64,
        ),
    })
}

/// `host:port` of a `listeners` entry; an empty host is every interface, as in Kafka.
fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| format!("listeners: cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("listeners: {host} has no address"))
}

/// Without `advertised.listeners`, tell clients the address we listen on; a wildcard address is
/// not connectable, so use the host name there, as Kafka does for an empty listener host.
pub fn advertised_host_for(addr: SocketAddr) -> String {
    if !addr.ip().is_unspecified() {
        return addr.ip().to_string();
    }
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        if let Ok(h) = std::str::from_utf8(&buf[..end]) {
            if !h.is_empty() {
                return h.to_string();
            }
        }
    }
    "localhost".into()
}

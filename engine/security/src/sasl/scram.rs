//! SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's server runs them:
//! `clients/src/main/java/org/apache/kafka/common/security/scram/internals/ScramSaslServer.java`,
//! its messages (`ScramMessages.java`) and its key derivations (`ScramFormatter.java`).
//!
//! Exchange: client-first `n,[a=authzid],n=user,r=cnonce[,ext]` → server-first
//! `r=cnonce+snonce,s=salt,i=iterations` → client-final `c=b64(gs2 header),r=nonce,p=proof` →
//! server-final `v=server signature`. The broker stores only StoredKey and ServerKey, never the
//! password (RFC 5802 §3), so a leaked store does not let anyone log in.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use super::{Mechanism, SaslFailure, SaslStep, ScramCredentials};
use crate::Principal;

/// `ScramMechanism.minIterations()` (both mechanisms).
pub const SCRAM_MIN_ITERATIONS: u32 = 4096;
/// `ScramMechanism.maxIterations()` (both mechanisms).
pub const SCRAM_MAX_ITERATIONS: u32 = 16384;

/// What the broker keeps for one user and one SCRAM mechanism (Kafka's `ScramCredential`).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

impl std::fmt::Debug for ScramCredential {
    // Keys are secrets: a log line must never carry them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("salt_len", &self.salt.len())
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("{0} is not a SCRAM mechanism")]
    NotScram(Mechanism),
    #[error("iterations {0} out of range 1..={SCRAM_MAX_ITERATIONS}")]
    Iterations(u32),
}

#[derive(Clone, Copy)]
enum Hash {
    Sha256,
    Sha512,
}

impl Hash {
    fn of(mechanism: Mechanism) -> Result<Self, ScramError> {
        match mechanism {
            Mechanism::ScramSha256 => Ok(Hash::Sha256),
            Mechanism::ScramSha512 => Ok(Hash::Sha512),
            m => Err(ScramError::NotScram(m)),
        }
    }

    fn len(self) -> usize {
        match self {
            Hash::Sha256 => 32,
            Hash::Sha512 => 64,
        }
    }

    fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => Sha256::digest(data).to_vec(),
            Hash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        // HMAC accepts keys of any length, so `new_from_slice` cannot fail; the fallback keeps
        // this panic-free all the same.
        match self {
            Hash::Sha256 => {
                let Ok(mut m) = Hmac::<Sha256>::new_from_slice(key) else {
                    return Vec::new();
                };
                parts.iter().for_each(|p| m.update(p));
                m.finalize().into_bytes().to_vec()
            }
            Hash::Sha512 => {
                let Ok(mut m) = Hmac::<Sha512>::new_from_slice(key) else {
                    return Vec::new();
                };
                parts.iter().for_each(|p| m.update(p));
                m.finalize().into_bytes().to_vec()
            }
        }
    }
}

/// SCRAM's `Hi(password, salt, i)`: PBKDF2 with HMAC of the mechanism's hash
/// (`ScramFormatter.hi`). Kafka feeds the password's UTF-8 bytes without SASLprep; so does this.
pub fn salted_password(
    mechanism: Mechanism,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Result<Vec<u8>, ScramError> {
    let hash = Hash::of(mechanism)?;
    // Bounded so that no caller can make this spin for hours.
    if iterations == 0 || iterations > SCRAM_MAX_ITERATIONS {
        return Err(ScramError::Iterations(iterations));
    }
    let mut out = vec![0u8; hash.len()];
    match hash {
        Hash::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out),
        Hash::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out),
    }
    Ok(out)
}

impl ScramCredential {
    /// StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword,
    /// "Server Key") (RFC 5802 §3; `ScramFormatter.generateCredential`).
    pub fn from_salted_password(
        mechanism: Mechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: u32,
    ) -> Result<Self, ScramError> {
        let hash = Hash::of(mechanism)?;
        let client_key = hash.hmac(salted_password, &[b"Client Key"]);
        Ok(Self {
            salt: salt.to_vec(),
            stored_key: hash.digest(&client_key),
            server_key: hash.hmac(salted_password, &[b"Server Key"]),
            iterations,
        })
    }

    /// Convenience for tests and tools: salt and derive in one go.
    pub fn from_password(
        mechanism: Mechanism,
        password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Result<Self, ScramError> {
        let salted = salted_password(mechanism, password, salt, iterations)?;
        Self::from_salted_password(mechanism, salt, &salted, iterations)
    }
}

pub(super) enum ScramState {
    ClientFirst,
    ClientFinal(Box<Pending>),
}

pub(super) struct Pending {
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    username: String,
    credential: ScramCredential,
}

/// Kafka's `SASLNAME`: `([\x01-\x7F] except '=' and ',') | =2C | =3D`, one or more; decoded
/// as `ScramFormatter.username` does.
fn sasl_name(s: &str) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'=' => {
                match b.get(i + 1..i + 3) {
                    Some(b"2C") => out.push(','),
                    Some(b"3D") => out.push('='),
                    _ => return None,
                }
                i += 3;
            }
            b',' | 0 | 0x80.. => return None,
            c => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    Some(out)
}

/// Kafka's `PRINTABLE`: `[\x21-\x7E]` except ','.
fn printable(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| (0x21..=0x7e).contains(&c) && c != b',')
}

/// Kafka's `EXTENSIONS`: `(,ALPHA=VALUE)*`, VALUE = `[\x01-\x7F]` except ','. Returns the pairs.
fn extensions<'a>(parts: &[&'a str]) -> Option<Vec<(&'a str, &'a str)>> {
    parts
        .iter()
        .map(|p| {
            let (k, v) = p.split_once('=')?;
            let key_ok = !k.is_empty() && k.bytes().all(|c| c.is_ascii_alphabetic());
            let value_ok = !v.is_empty() && v.bytes().all(|c| (0x01..=0x7f).contains(&c));
            (key_ok && value_ok).then_some((k, v))
        })
        .collect()
}

struct ClientFirst<'a> {
    gs2_header: &'a str,
    bare: &'a str,
    authzid: Option<String>,
    username: String,
    nonce: &'a str,
    token_auth: bool,
}

fn parse_client_first(msg: &str) -> Result<ClientFirst<'_>, &'static str> {
    // gs2-header = gs2-cbind-flag "," [authzid] ","
    let (flag, rest) = msg.split_once(',').ok_or("missing gs2 header")?;
    match flag {
        "n" => {}
        // The client wants channel binding (p=) or thinks the server supports none (y): Kafka
        // supports none, and its pattern only accepts 'n'.
        "y" | "p" => return Err("channel binding is not supported"),
        _ if flag.starts_with("p=") => return Err("channel binding is not supported"),
        _ => return Err("bad gs2 channel binding flag"),
    }
    let (authz, bare) = rest.split_once(',').ok_or("missing gs2 header")?;
    let authzid = match authz {
        "" => None,
        a => Some(sasl_name(a.strip_prefix("a=").ok_or("bad authzid")?).ok_or("bad authzid")?),
    };
    let gs2_header = &msg[..msg.len() - bare.len()];
    let mut parts: Vec<&str> = bare.split(',').collect();
    // RFC 5802's reserved-mext `m=`: Kafka's pattern accepts it before n= and ignores it.
    if parts.first().is_some_and(|p| p.starts_with("m=")) {
        parts.remove(0);
    }
    let [n, r, ext @ ..] = parts.as_slice() else {
        return Err("missing n= or r=");
    };
    let username = sasl_name(n.strip_prefix("n=").ok_or("missing n=")?).ok_or("bad username")?;
    let nonce = r.strip_prefix("r=").ok_or("missing r=")?;
    if !printable(nonce) {
        return Err("bad nonce");
    }
    let ext = extensions(ext).ok_or("bad extensions")?;
    // `ScramExtensions.tokenAuthenticated`: Boolean.parseBoolean, i.e. case-insensitive "true".
    let token_auth = ext
        .iter()
        .any(|(k, v)| *k == "tokenauth" && v.eq_ignore_ascii_case("true"));
    Ok(ClientFirst {
        gs2_header,
        bare,
        authzid,
        username,
        nonce,
        token_auth,
    })
}

struct ClientFinal<'a> {
    without_proof: &'a str,
    channel: Vec<u8>,
    nonce: &'a str,
    proof: Vec<u8>,
}

fn b64(s: &str) -> Option<Vec<u8>> {
    STANDARD.decode(s).ok()
}

fn parse_client_final(msg: &str) -> Result<ClientFinal<'_>, &'static str> {
    let at = msg.rfind(",p=").ok_or("missing p=")?;
    let without_proof = &msg[..at];
    let proof = b64(&msg[at + 3..]).ok_or("bad proof")?;
    let parts: Vec<&str> = without_proof.split(',').collect();
    let [c, r, ext @ ..] = parts.as_slice() else {
        return Err("missing c= or r=");
    };
    let channel = b64(c.strip_prefix("c=").ok_or("missing c=")?).ok_or("bad c=")?;
    let nonce = r.strip_prefix("r=").ok_or("missing r=")?;
    if !printable(nonce) {
        return Err("bad nonce");
    }
    extensions(ext).ok_or("bad extensions")?;
    Ok(ClientFinal {
        without_proof,
        channel,
        nonce,
        proof,
    })
}

impl ScramState {
    pub(super) fn step(
        self,
        mechanism: Mechanism,
        server_nonce: &str,
        token: &[u8],
        store: &dyn ScramCredentials,
    ) -> (ScramState, SaslStep) {
        let hidden = || SaslStep::Failure(SaslFailure::hidden(mechanism));
        let Ok(hash) = Hash::of(mechanism) else {
            return (self, hidden());
        };
        // Kafka decodes the token as UTF-8 and matches ASCII patterns: non-UTF-8 is a bad format.
        let Ok(msg) = std::str::from_utf8(token) else {
            return (self, hidden());
        };
        match self {
            ScramState::ClientFirst => {
                let Ok(first) = parse_client_first(msg) else {
                    return (self, hidden());
                };
                if first.token_auth {
                    // Delegation tokens (KIP-48) authenticate through SCRAM with tokenauth=true;
                    // Ringleader has no delegation tokens, so say so rather than "bad password".
                    return (
                        self,
                        SaslStep::Failure(SaslFailure::new(
                            "Authentication failed: delegation token authentication (tokenauth=true) is not supported by this broker",
                        )),
                    );
                }
                // Unknown user: ScramSaslServer throws a SaslException, which the broker hides
                // behind its generic message, so an unknown user and a bad password look alike.
                let Some(credential) = store.scram_credential(mechanism, &first.username) else {
                    return (self, hidden());
                };
                if first.authzid.as_ref().is_some_and(|a| *a != first.username) {
                    return (
                        self,
                        SaslStep::Failure(SaslFailure::new(
                            "Authentication failed: Client requested an authorization id that is different from username",
                        )),
                    );
                }
                if credential.iterations < SCRAM_MIN_ITERATIONS
                    || credential.stored_key.len() != hash.len()
                    || credential.server_key.len() != hash.len()
                {
                    return (self, hidden());
                }
                let nonce = format!("{}{server_nonce}", first.nonce);
                let server_first = format!(
                    "r={nonce},s={},i={}",
                    STANDARD.encode(&credential.salt),
                    credential.iterations
                );
                let pending = Pending {
                    gs2_header: first.gs2_header.to_string(),
                    client_first_bare: first.bare.to_string(),
                    server_first: server_first.clone(),
                    nonce,
                    username: first.username,
                    credential,
                };
                (
                    ScramState::ClientFinal(Box::new(pending)),
                    SaslStep::Challenge(server_first.into_bytes()),
                )
            }
            ScramState::ClientFinal(p) => {
                let Ok(fin) = parse_client_final(msg) else {
                    return (ScramState::ClientFirst, hidden());
                };
                if fin.nonce != p.nonce
                    || fin.channel != p.gs2_header.as_bytes()
                    || fin.proof.len() != hash.len()
                {
                    return (ScramState::ClientFirst, hidden());
                }
                let auth_message = [
                    p.client_first_bare.as_bytes(),
                    b",",
                    p.server_first.as_bytes(),
                    b",",
                    fin.without_proof.as_bytes(),
                ];
                let client_signature = hash.hmac(&p.credential.stored_key, &auth_message);
                let client_key: Vec<u8> = fin
                    .proof
                    .iter()
                    .zip(&client_signature)
                    .map(|(a, b)| a ^ b)
                    .collect();
                let computed = hash.digest(&client_key);
                // Constant time, as Kafka's MessageDigest.isEqual.
                if !bool::from(computed.ct_eq(&p.credential.stored_key)) {
                    return (ScramState::ClientFirst, hidden());
                }
                let server_signature = hash.hmac(&p.credential.server_key, &auth_message);
                let server_final = format!("v={}", STANDARD.encode(server_signature));
                (
                    ScramState::ClientFirst,
                    SaslStep::Success {
                        principal: Principal::user(p.username.clone()),
                        token: server_final.into_bytes(),
                        credential_expires_ms: None,
                    },
                )
            }
        }
    }
}

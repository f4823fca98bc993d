//! The durable file format of the broker's SCRAM credentials (Kafka keeps them as
//! `UserScramCredentialRecord`s in its metadata log; Ringleader keeps one small file).
//! Bytes in, bytes out: the broker (`engine/src/scram_store.rs`) owns the file and its fsyncs.
//!
//! Layout, big-endian:
//! ```text
//! magic "RLSCRAM" (7 bytes) | version u8 = 1 | count u32 |
//!   count × { user_len u16 | user UTF-8 | mechanism i8 (1 = SHA-256, 2 = SHA-512) |
//!             iterations u32 | salt_len u16 | salt | stored_key_len u16 | stored_key |
//!             server_key_len u16 | server_key } |
//! crc32c u32 of everything before it
//! ```
//! The checksum covers the whole file, so a torn or bit-flipped file is refused rather than
//! read as a different set of users.

use std::collections::BTreeMap;

use crate::sasl::{Mechanism, ScramCredential};

/// user → mechanism → credential.
pub type ScramCredentialSet = BTreeMap<String, BTreeMap<Mechanism, ScramCredential>>;

const MAGIC: &[u8; 7] = b"RLSCRAM";
const VERSION: u8 = 1;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("not a SCRAM credential file (bad magic)")]
    BadMagic,
    #[error("unsupported SCRAM credential file version {0} (this broker reads version {VERSION})")]
    Version(u8),
    #[error("SCRAM credential file is truncated")]
    Truncated,
    #[error("SCRAM credential file checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the file is corrupt")]
    Checksum { stored: u32, computed: u32 },
    #[error("SCRAM credential file has an unknown mechanism type {0}")]
    Mechanism(i8),
    #[error("SCRAM credential file has a user name that is not UTF-8")]
    UserName,
    #[error("SCRAM credential file has {0} trailing bytes")]
    Trailing(usize),
    #[error("SCRAM credential file lists user {0} with {1} twice")]
    Duplicate(String, Mechanism),
    #[error("a field is too long for the SCRAM credential file ({0} bytes)")]
    TooLong(usize),
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) -> Result<(), StoreError> {
    let len = u16::try_from(b.len()).map_err(|_| StoreError::TooLong(b.len()))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(b);
    Ok(())
}

/// Encode a credential set (users and mechanisms in sorted order, so equal sets give equal files).
pub fn encode(set: &ScramCredentialSet) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    let count: usize = set.values().map(BTreeMap::len).sum();
    let count = u32::try_from(count).map_err(|_| StoreError::TooLong(count))?;
    out.extend_from_slice(&count.to_be_bytes());
    for (user, mechs) in set {
        for (mech, c) in mechs {
            let t = mech.scram_type().ok_or(StoreError::Mechanism(0))?;
            put_bytes(&mut out, user.as_bytes())?;
            out.push(t as u8);
            out.extend_from_slice(&c.iterations.to_be_bytes());
            put_bytes(&mut out, &c.salt)?;
            put_bytes(&mut out, &c.stored_key)?;
            put_bytes(&mut out, &c.server_key)?;
        }
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    Ok(out)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StoreError> {
        if self.0.len() < n {
            return Err(StoreError::Truncated);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, StoreError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, StoreError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, StoreError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn bytes(&mut self) -> Result<&'a [u8], StoreError> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

/// Decode a file written by [`encode`]; any damage is an error, never a partial set.
pub fn decode(file: &[u8]) -> Result<ScramCredentialSet, StoreError> {
    if file.len() < MAGIC.len() + 1 {
        return Err(if file.starts_with(&MAGIC[..file.len().min(MAGIC.len())]) {
            StoreError::Truncated
        } else {
            StoreError::BadMagic
        });
    }
    if &file[..MAGIC.len()] != MAGIC {
        return Err(StoreError::BadMagic);
    }
    if file[MAGIC.len()] != VERSION {
        return Err(StoreError::Version(file[MAGIC.len()]));
    }
    if file.len() < MAGIC.len() + 1 + 4 + 4 {
        return Err(StoreError::Truncated);
    }
    let (body, crc) = file.split_at(file.len() - 4);
    let stored = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let computed = crc32c::crc32c(body);
    if stored != computed {
        return Err(StoreError::Checksum { stored, computed });
    }
    let mut r = Reader(&body[MAGIC.len() + 1..]);
    let count = r.u32()?;
    let mut set = ScramCredentialSet::new();
    for _ in 0..count {
        let user = std::str::from_utf8(r.bytes()?)
            .map_err(|_| StoreError::UserName)?
            .to_string();
        let t = r.u8()? as i8;
        let mech = Mechanism::from_scram_type(t).ok_or(StoreError::Mechanism(t))?;
        let iterations = r.u32()?;
        let salt = r.bytes()?.to_vec();
        let stored_key = r.bytes()?.to_vec();
        let server_key = r.bytes()?.to_vec();
        let cred = ScramCredential {
            salt,
            stored_key,
            server_key,
            iterations,
        };
        if set
            .entry(user.clone())
            .or_default()
            .insert(mech, cred)
            .is_some()
        {
            return Err(StoreError::Duplicate(user, mech));
        }
    }
    if !r.0.is_empty() {
        return Err(StoreError::Trailing(r.0.len()));
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ScramCredentialSet {
        let mut set = ScramCredentialSet::new();
        for (user, mech, pw) in [
            ("alice", Mechanism::ScramSha256, "a"),
            ("alice", Mechanism::ScramSha512, "b"),
            ("bob,=é", Mechanism::ScramSha512, "c"),
        ] {
            let c =
                ScramCredential::from_password(mech, pw.as_bytes(), b"salt-salt", 4096).unwrap();
            set.entry(user.to_string()).or_default().insert(mech, c);
        }
        set
    }

    #[test]
    fn round_trips() {
        let set = sample();
        let file = encode(&set).unwrap();
        assert_eq!(decode(&file).unwrap(), set);
        let empty = encode(&ScramCredentialSet::new()).unwrap();
        assert!(decode(&empty).unwrap().is_empty());
    }

    #[test]
    fn refuses_every_corruption() {
        let file = encode(&sample()).unwrap();
        // Every single-bit flip and every truncation is detected.
        for i in 0..file.len() {
            for bit in 0..8 {
                let mut f = file.clone();
                f[i] ^= 1 << bit;
                assert!(decode(&f).is_err(), "flip byte {i} bit {bit}");
            }
        }
        for n in 0..file.len() {
            assert!(decode(&file[..n]).is_err(), "truncated to {n}");
        }
        assert_eq!(decode(b"garbage!!!!!!!!!!"), Err(StoreError::BadMagic));
        let mut v2 = file.clone();
        v2[7] = 2;
        assert_eq!(decode(&v2), Err(StoreError::Version(2)));
        let mut tail = file[..file.len() - 4].to_vec();
        tail.push(0);
        let crc = crc32c::crc32c(&tail);
        tail.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(decode(&tail), Err(StoreError::Trailing(1)));
    }
}

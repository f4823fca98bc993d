//! The broker's SCRAM credentials (what `kafka-configs --entity-type users --add-config
//! 'SCRAM-SHA-256=[...]'` sets, through AlterUserScramCredentials), shared by every shard.
//!
//! Kafka keeps them as `UserScramCredentialRecord`s in its metadata log
//! (`metadata/src/main/java/org/apache/kafka/controller/ScramControlManager.java`); here they
//! live in `DATA/scram-credentials`, in `security::scram_store`'s checksummed format, written
//! whole through `storage::durable_file` (temporary file, fsync, rename, directory fsync) before
//! an alter is answered — as `group_configs` keeps its registry. Authentications read a lock-free
//! `ArcSwap` snapshot (one per SASL exchange); writers serialise on a mutex and run off the
//! reactor. Only StoredKey and ServerKey are kept, never a password.

use arc_swap::ArcSwap;
use security::sasl::{Mechanism, ScramCredential, ScramCredentials};
use security::scram_store::{self as format, ScramCredentialSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub const FILE_NAME: &str = "scram-credentials";

#[derive(Debug, thiserror::Error)]
pub enum ScramStoreError {
    #[error("could not persist SCRAM credentials at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("SCRAM credentials at {path} are unreadable: {source}")]
    Corrupt {
        path: PathBuf,
        source: format::StoreError,
    },
}

/// One change of an AlterUserScramCredentials request, already validated.
#[derive(Debug, Clone)]
pub enum ScramChange {
    Upsert {
        user: String,
        mechanism: Mechanism,
        credential: ScramCredential,
    },
    Delete {
        user: String,
        mechanism: Mechanism,
    },
}

/// user → mechanism → credential, durable when `path` is set (in memory only for tests).
#[derive(Debug)]
pub struct ScramStore {
    path: Option<PathBuf>,
    current: ArcSwap<ScramCredentialSet>,
    writer: Mutex<()>,
}

impl Default for ScramStore {
    /// An empty store kept in memory only.
    fn default() -> Self {
        Self {
            path: None,
            current: ArcSwap::from_pointee(ScramCredentialSet::new()),
            writer: Mutex::new(()),
        }
    }
}

impl ScramStore {
    /// Open `DATA/scram-credentials` (absent: no users). A damaged file stops the broker rather
    /// than silently forgetting users.
    pub fn open(data_dir: &Path) -> Result<Self, ScramStoreError> {
        let path = data_dir.join(FILE_NAME);
        let set = match storage::durable_file::read(&path).map_err(|source| {
            ScramStoreError::Io {
                path: path.clone(),
                source,
            }
        })? {
            None => ScramCredentialSet::new(),
            Some(bytes) => format::decode(&bytes).map_err(|source| ScramStoreError::Corrupt {
                path: path.clone(),
                source,
            })?,
        };
        Ok(Self {
            path: Some(path),
            current: ArcSwap::from_pointee(set),
            writer: Mutex::new(()),
        })
    }

    /// Every credential; cheap, lock-free.
    pub fn snapshot(&self) -> Arc<ScramCredentialSet> {
        self.current.load_full()
    }

    /// Apply `changes` in order, durably, then publish. All or nothing: if the file cannot be
    /// written, nothing changes. Blocking: call off the reactor.
    pub fn apply(&self, changes: &[ScramChange]) -> Result<(), ScramStoreError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut set = (*self.snapshot()).clone();
        for change in changes {
            match change {
                ScramChange::Upsert {
                    user,
                    mechanism,
                    credential,
                } => {
                    set.entry(user.clone())
                        .or_default()
                        .insert(*mechanism, credential.clone());
                }
                ScramChange::Delete { user, mechanism } => {
                    if let Some(m) = set.get_mut(user) {
                        m.remove(mechanism);
                        if m.is_empty() {
                            set.remove(user);
                        }
                    }
                }
            }
        }
        if let Some(path) = &self.path {
            let bytes = format::encode(&set).map_err(|source| ScramStoreError::Corrupt {
                path: path.clone(),
                source,
            })?;
            storage::durable_file::write_atomic(path, &bytes).map_err(|source| {
                ScramStoreError::Io {
                    path: path.clone(),
                    source,
                }
            })?;
        }
        self.current.store(Arc::new(set));
        Ok(())
    }
}

impl ScramCredentials for ScramStore {
    fn scram_credential(&self, mechanism: Mechanism, user: &str) -> Option<ScramCredential> {
        self.current.load().get(user)?.get(&mechanism).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_survive_a_reopen_and_deletes_remove_them() {
        let dir = std::env::temp_dir().join(format!("rl-scram-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = ScramStore::open(&dir).unwrap();
        let m = Mechanism::ScramSha256;
        let c = ScramCredential::from_password(m, b"pw", b"salt", 4096).unwrap();
        store
            .apply(&[ScramChange::Upsert {
                user: "alice".into(),
                mechanism: m,
                credential: c.clone(),
            }])
            .unwrap();
        let reopened = ScramStore::open(&dir).unwrap();
        assert_eq!(reopened.scram_credential(m, "alice"), Some(c));
        assert_eq!(
            reopened.scram_credential(Mechanism::ScramSha512, "alice"),
            None
        );
        reopened
            .apply(&[ScramChange::Delete {
                user: "alice".into(),
                mechanism: m,
            }])
            .unwrap();
        assert!(ScramStore::open(&dir).unwrap().snapshot().is_empty());
        // A damaged file is refused with the path in the message.
        std::fs::write(dir.join(FILE_NAME), b"RLSCRAM\x01garbage").unwrap();
        let err = ScramStore::open(&dir).unwrap_err().to_string();
        assert!(err.contains("scram-credentials"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

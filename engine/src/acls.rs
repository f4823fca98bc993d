//! The broker's ACL set (`authorizer.class.name=…StandardAuthorizer`): the decisions come from
//! `security::acl::Authorizer`; this module owns where the set lives and how it changes.
//!
//! Kafka keeps ACLs in its metadata log; here they live in `DATA/acls` (the CRC-32C format of
//! `security::acl::encode`), written whole through `storage::durable_file` (temporary file,
//! fsync, rename, directory fsync) before CreateAcls / DeleteAcls is answered. Readers take a
//! lock-free `ArcSwap` snapshot per check, so a change reaches every shard with its next
//! request, without a restart; writers serialise on a mutex and run off the reactor.
//!
//! Without an authorizer the broker has no store at all (`Broker::acls` is `None`) and every
//! check is one branch on that `None`.

use arc_swap::ArcSwap;
use security::acl::{AclBinding, AclBindingFilter, AclOperation, Authorizer, ResourceType};
use security::Principal;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Debug, thiserror::Error)]
pub enum AclsError {
    #[error("could not persist ACLs at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("ACLs at {path} are corrupt: {source}")]
    Corrupt {
        path: PathBuf,
        source: security::acl::AclFileError,
    },
    #[error("super.users: {0}")]
    SuperUsers(String),
}

/// The durable ACL set and the authorizer built from it.
#[derive(Debug)]
pub struct AclStore {
    /// None keeps the ACLs in memory only (tests without a data directory).
    path: Option<PathBuf>,
    current: ArcSwap<Authorizer>,
    writer: Mutex<()>,
}

impl AclStore {
    /// The store when `config` names the standard authorizer, else None.
    pub fn open(
        config: &crate::config::Config,
        data_dir: Option<&Path>,
    ) -> Result<Option<Self>, AclsError> {
        if config.authorizer_class_name.trim().is_empty() {
            return Ok(None);
        }
        let super_users =
            security::acl::parse_super_users(&config.super_users).map_err(AclsError::SuperUsers)?;
        let path = data_dir.map(|d| d.join("acls"));
        let bindings = match &path {
            None => Vec::new(),
            Some(p) => match storage::durable_file::read(p).map_err(|source| AclsError::Io {
                path: p.clone(),
                source,
            })? {
                None => Vec::new(),
                Some(bytes) => {
                    security::acl::decode(&bytes).map_err(|source| AclsError::Corrupt {
                        path: p.clone(),
                        source,
                    })?
                }
            },
        };
        let authorizer =
            Authorizer::new(bindings, super_users, config.allow_everyone_if_no_acl_found);
        Ok(Some(Self {
            path,
            current: ArcSwap::from_pointee(authorizer),
            writer: Mutex::new(()),
        }))
    }

    /// The current authorizer; cheap, lock-free.
    pub fn load(&self) -> arc_swap::Guard<Arc<Authorizer>> {
        self.current.load()
    }

    /// Add `bindings` (already validated); one already present is not added twice, as Kafka's
    /// `AclControlManager.createAcls`. Blocking: call off the reactor.
    pub fn create(&self, bindings: Vec<AclBinding>) -> Result<(), AclsError> {
        self.change(|set| {
            for b in bindings {
                if !set.contains(&b) {
                    set.push(b);
                }
            }
        })
        .map(|_| ())
    }

    /// Remove every ACL each filter matches; returns, per filter, what it removed (an ACL two
    /// filters match is reported by both, as Kafka's `AclControlManager.deleteAcls` does).
    /// Blocking: call off the reactor.
    pub fn delete(&self, filters: &[AclBindingFilter]) -> Result<Vec<Vec<AclBinding>>, AclsError> {
        let mut removed = Vec::new();
        self.change(|set| {
            removed = filters
                .iter()
                .map(|f| set.iter().filter(|b| f.matches(b)).cloned().collect())
                .collect();
            set.retain(|b| !filters.iter().any(|f| f.matches(b)));
        })?;
        Ok(removed)
    }

    fn change(&self, edit: impl FnOnce(&mut Vec<AclBinding>)) -> Result<bool, AclsError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let now = self.current.load_full();
        let mut set = now.bindings().to_vec();
        edit(&mut set);
        if set == now.bindings() {
            return Ok(false);
        }
        if let Some(path) = &self.path {
            storage::durable_file::write_atomic(path, &security::acl::encode(&set)).map_err(
                |source| AclsError::Io {
                    path: path.clone(),
                    source,
                },
            )?;
        }
        self.current.store(Arc::new(Authorizer::new(
            set,
            now.super_users().to_vec(),
            now.allow_if_no_acl(),
        )));
        Ok(true)
    }
}

/// The address ACL hosts name: the caller's `/ip` without its slash.
pub fn host_of(client_host: &str) -> &str {
    client_host.strip_prefix('/').unwrap_or(client_host)
}

/// May `principal` from `client_host` do `op` on the resource? Always, without an authorizer.
#[inline]
pub fn allowed(
    store: Option<&AclStore>,
    principal: &Principal,
    client_host: &str,
    op: AclOperation,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    match store {
        None => true,
        Some(s) => s
            .load()
            .authorize(principal, host_of(client_host), op, resource_type, name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use security::acl::*;

    fn config(pairs: &[(&str, &str)]) -> crate::config::Config {
        let mut c = crate::config::Config::default();
        for (k, v) in pairs {
            c.apply_set(&format!("{k}={v}")).unwrap();
        }
        c
    }

    fn deny_read(group: &str) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::Group,
                name: group.into(),
                pattern_type: PatternType::Literal,
            },
            entry: AccessControlEntry {
                principal: "User:ANONYMOUS".into(),
                host: "*".into(),
                operation: AclOperation::Read,
                permission: AclPermissionType::Deny,
            },
        }
    }

    #[test]
    fn no_authorizer_no_store_and_acls_survive_a_reopen() {
        let dir = std::env::temp_dir().join(format!("rl-acls-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert!(AclStore::open(&config(&[]), Some(&dir)).unwrap().is_none());
        let c = config(&[
            ("authorizer.class.name", crate::config::STANDARD_AUTHORIZER),
            ("allow.everyone.if.no.acl.found", "true"),
        ]);
        let store = AclStore::open(&c, Some(&dir)).unwrap().unwrap();
        let anon = Principal::anonymous();
        let check = |s: &AclStore, g: &str| {
            allowed(
                Some(s),
                &anon,
                "/127.0.0.1",
                AclOperation::Read,
                ResourceType::Group,
                g,
            )
        };
        assert!(check(&store, "g1"));
        store
            .create(vec![deny_read("g1"), deny_read("g1")])
            .unwrap();
        assert!(!check(&store, "g1"));
        assert!(check(&store, "g2"));
        assert_eq!(
            store.load().bindings().len(),
            1,
            "a duplicate is not added twice"
        );
        drop(store);
        let store = AclStore::open(&c, Some(&dir)).unwrap().unwrap();
        assert!(!check(&store, "g1"), "the deny survived the reopen");
        let removed = store.delete(&[AclBindingFilter::any()]).unwrap();
        assert_eq!(removed, vec![vec![deny_read("g1")]]);
        assert!(check(&store, "g1"));
        // Corruption is reported, not ignored.
        std::fs::write(dir.join("acls"), b"garbage").unwrap();
        let err = AclStore::open(&c, Some(&dir)).unwrap_err().to_string();
        assert!(err.contains("corrupt"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

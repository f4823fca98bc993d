//! The topic registry: which topics exist, how many partitions each has, and its stable topic id.
//!
//! Persisted as `DATA/topics.json` through `storage::durable_file` (tmp + fsync + rename + dir
//! fsync), so a topic acknowledged as created survives a crash with the same id. Reads are far
//! more common than writes (every Metadata request reads; only admin calls write), so readers take
//! a lock-free snapshot (`ArcSwap`) from any shard, while writers serialise on a mutex and run on
//! a blocking thread (`spawn_blocking`) so the fsync never stalls a reactor.

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use uuid::Uuid;

pub use coordinator::topics::{
    validate_name, Topic, TopicsSnapshot, CONSUMER_OFFSETS, MAX_NAME_LENGTH,
};

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("Topic '{0}' already exists.")]
    AlreadyExists(String),
    #[error("{0}")]
    InvalidName(String),
    #[error("Topic '{0}' collides with existing topic: {1}")]
    Collides(String, String),
    #[error("This server does not host this topic: {0}")]
    Unknown(String),
    #[error("Cannot delete internal topic {0}")]
    Internal(String),
    /// Kafka's wording (`ReplicationControlManager.createPartitions`).
    #[error("The topic {name} currently has {current} partition(s); {requested} would not be an increase.")]
    NotAnIncrease {
        name: String,
        current: i32,
        requested: i32,
    },
    #[error("could not persist topic registry at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("topic registry at {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

#[derive(Serialize, Deserialize)]
struct OnDisk {
    version: u32,
    topics: Vec<Topic>,
}

#[derive(Debug)]
pub struct TopicRegistry {
    path: PathBuf,
    /// Shared with the shards' caches ([`Self::cache`]).
    current: Arc<ArcSwap<TopicsSnapshot>>,
    /// Serialises writers; the guarded value is the authoritative list written to disk.
    writer: Mutex<()>,
}

impl TopicRegistry {
    /// Load (or create) the registry in `data_dir`, making sure `__consumer_offsets` exists with
    /// `offsets_partitions` partitions.
    pub fn open(data_dir: &Path, offsets_partitions: i32) -> Result<Self, RegistryError> {
        let path = data_dir.join("topics.json");
        let io = |source| RegistryError::Io {
            path: path.clone(),
            source,
        };
        let topics = match storage::durable_file::read(&path).map_err(io)? {
            None => Vec::new(),
            Some(bytes) => {
                let disk: OnDisk =
                    serde_json::from_slice(&bytes).map_err(|e| RegistryError::Corrupt {
                        path: path.clone(),
                        reason: e.to_string(),
                    })?;
                disk.topics
            }
        };
        let reg = Self {
            path: path.clone(),
            current: Arc::new(ArcSwap::from_pointee(TopicsSnapshot::from_topics(topics))),
            writer: Mutex::new(()),
        };
        if reg.snapshot().get(CONSUMER_OFFSETS).is_none() {
            let t = Topic {
                name: CONSUMER_OFFSETS.into(),
                id: new_topic_id(),
                partitions: offsets_partitions,
                internal: true,
                configs: BTreeMap::new(),
            };
            reg.commit(|topics| topics.push(t))?;
        }
        Ok(reg)
    }

    /// The current topics; cheap, lock-free, safe from any thread.
    pub fn snapshot(&self) -> Arc<TopicsSnapshot> {
        self.current.load_full()
    }

    /// A cache of the current snapshot for one thread: its `load` costs one relaxed read of the
    /// shared pointer while nothing changed, where [`Self::snapshot`] takes a reference on the
    /// snapshot every shard shares (an atomic on one cache line for all of them).
    pub fn cache(&self) -> arc_swap::Cache<Arc<ArcSwap<TopicsSnapshot>>, Arc<TopicsSnapshot>> {
        arc_swap::Cache::new(self.current.clone())
    }

    /// Create a topic and make it durable before returning. Blocking: call off the reactor.
    pub fn create(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<Topic>, RegistryError> {
        validate_name(name).map_err(RegistryError::InvalidName)?;
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let snap = self.snapshot();
        if snap.get(name).is_some() {
            return Err(RegistryError::AlreadyExists(name.into()));
        }
        if let Some(other) = snap.colliding(name) {
            return Err(RegistryError::Collides(name.into(), other.name.clone()));
        }
        let topic = Topic {
            name: name.into(),
            id: new_topic_id(),
            partitions,
            internal: false,
            configs,
        };
        self.commit_locked(&snap, |topics| topics.push(topic))?;
        Ok(self.snapshot().get(name).cloned().expect("just created"))
    }

    /// Delete a topic by name. Blocking: call off the reactor.
    pub fn delete(&self, name: &str) -> Result<Arc<Topic>, RegistryError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let snap = self.snapshot();
        let Some(topic) = snap.get(name).cloned() else {
            return Err(RegistryError::Unknown(name.into()));
        };
        if topic.internal {
            return Err(RegistryError::Internal(name.into()));
        }
        self.commit_locked(&snap, |topics| topics.retain(|t| t.name != name))?;
        Ok(topic)
    }

    /// Grow topics to new partition counts, all in one durable write (Kafka adds the partitions
    /// of one CreatePartitions request atomically). Each count must exceed the topic's current
    /// one. Blocking: call off the reactor.
    pub fn add_partitions(&self, changes: &[(String, i32)]) -> Result<(), RegistryError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let snap = self.snapshot();
        for (name, count) in changes {
            let Some(t) = snap.get(name) else {
                return Err(RegistryError::Unknown(name.clone()));
            };
            if *count <= t.partitions {
                return Err(RegistryError::NotAnIncrease {
                    name: name.clone(),
                    current: t.partitions,
                    requested: *count,
                });
            }
        }
        self.commit_locked(&snap, |topics| {
            for t in topics.iter_mut() {
                if let Some((_, count)) = changes.iter().find(|(n, _)| *n == t.name) {
                    t.partitions = *count;
                }
            }
        })
    }

    /// Replace a topic's configs, durably. Blocking: call off the reactor.
    pub fn set_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), RegistryError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let snap = self.snapshot();
        if snap.get(name).is_none() {
            return Err(RegistryError::Unknown(name.into()));
        }
        self.commit_locked(&snap, |topics| {
            if let Some(t) = topics.iter_mut().find(|t| t.name == name) {
                t.configs = configs;
            }
        })
    }

    fn commit(&self, change: impl FnOnce(&mut Vec<Topic>)) -> Result<(), RegistryError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let snap = self.snapshot();
        self.commit_locked(&snap, change)
    }

    /// Write the changed list durably, then publish it. Readers never see a topic that a crash
    /// could take back.
    fn commit_locked(
        &self,
        snap: &TopicsSnapshot,
        change: impl FnOnce(&mut Vec<Topic>),
    ) -> Result<(), RegistryError> {
        let mut topics: Vec<Topic> = snap.iter().map(|t| (**t).clone()).collect();
        change(&mut topics);
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        let bytes = serde_json::to_vec_pretty(&OnDisk {
            version: 1,
            topics: topics.clone(),
        })
        .map_err(|e| RegistryError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        storage::durable_file::write_atomic(&self.path, &bytes).map_err(|source| {
            RegistryError::Io {
                path: self.path.clone(),
                source,
            }
        })?;
        self.current
            .store(Arc::new(TopicsSnapshot::from_topics(topics)));
        Ok(())
    }
}

/// A random topic id. Kafka never hands out the all-zero id (it means "no id" on the wire) nor
/// its reserved metadata topic id (`Uuid.METADATA_TOPIC_ID` = 1); v4 UUIDs are never either.
fn new_topic_id() -> Uuid {
    Uuid::new_v4()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rl-topics-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn names_follow_kafka_rules() {
        assert!(validate_name("orders").is_ok());
        assert!(validate_name("a.b_c-D9").is_ok());
        assert!(validate_name("").is_err());
        assert!(validate_name(".").is_err());
        assert!(validate_name("..").is_err());
        assert!(validate_name("bad name!").is_err());
        assert!(validate_name(&"x".repeat(249)).is_ok());
        assert!(validate_name(&"x".repeat(250)).is_err());
    }

    #[test]
    fn topics_survive_reopen_with_the_same_ids() {
        let d = tmpdir("reopen");
        let reg = TopicRegistry::open(&d, 50).unwrap();
        let offsets = reg.snapshot().get(CONSUMER_OFFSETS).cloned().unwrap();
        assert!(offsets.internal);
        assert_eq!(offsets.partitions, 50);
        let t = reg.create("orders", 6, BTreeMap::new()).unwrap();
        assert!(matches!(
            reg.create("orders", 1, BTreeMap::new()),
            Err(RegistryError::AlreadyExists(_))
        ));
        assert!(matches!(reg.create("ord.ers", 1, BTreeMap::new()), Ok(_)));
        assert!(matches!(
            reg.create("ord_ers", 1, BTreeMap::new()),
            Err(RegistryError::Collides(..))
        ));
        drop(reg);
        let reg = TopicRegistry::open(&d, 50).unwrap();
        let snap = reg.snapshot();
        assert_eq!(snap.get("orders").unwrap().id, t.id);
        assert_eq!(snap.get_by_id(&t.id).unwrap().partitions, 6);
        assert_eq!(snap.get(CONSUMER_OFFSETS).unwrap().id, offsets.id);
        assert!(matches!(
            reg.delete(CONSUMER_OFFSETS),
            Err(RegistryError::Internal(_))
        ));
        reg.delete("orders").unwrap();
        assert!(matches!(
            reg.delete("orders"),
            Err(RegistryError::Unknown(_))
        ));
        drop(reg);
        let reg = TopicRegistry::open(&d, 50).unwrap();
        assert!(reg.snapshot().get("orders").is_none());
        assert_eq!(reg.snapshot().len(), 2);
        std::fs::remove_dir_all(&d).unwrap();
    }
}

//! The topics as the coordinator sees them: an immutable snapshot of names, ids and partition
//! counts, handed in with every request (`RequestContext::topics`). The registry that persists
//! them (`topics.json`) is the broker's (`engine::topics`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;

/// The coordinator's own log topic. It always exists (we are its owner), is internal, and has
/// `offsets.topic.num.partitions` partitions.
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// Kafka's limit on topic name length (`Topic.MAX_NAME_LENGTH`).
pub const MAX_NAME_LENGTH: usize = 249;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topic {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    #[serde(default)]
    pub internal: bool,
    /// Topic-level config overrides given at creation (name → value).
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
    /// How many nodes hold a replica of each partition: 1, or on a cluster every voter (then
    /// Raft replicates each partition). A `topics.json` or metadata entry written before the
    /// field existed reads as 1, what every topic had then. `__consumer_offsets` says 1 too:
    /// its replicas are every voter's on a cluster, reported from the cluster, not from here.
    #[serde(default = "one_replica")]
    pub replication_factor: i16,
}

/// The replication factor of a topic stored without one (see [`Topic::replication_factor`]).
pub fn one_replica() -> i16 {
    1
}

/// An immutable view of all topics, shared by every shard.
#[derive(Debug, Clone, Default)]
pub struct TopicsSnapshot {
    by_name: BTreeMap<String, Arc<Topic>>,
    by_id: BTreeMap<Uuid, Arc<Topic>>,
    /// Names this content: every snapshot built by [`TopicsSnapshot::from_topics`] gets a number
    /// no other has (a clone keeps it, as it keeps the content; the empty default is 0). What a
    /// coordinator derives from a snapshot can be kept under this number without holding the
    /// snapshot alive.
    id: u64,
}

impl TopicsSnapshot {
    /// A view of exactly these topics (the registry builds one per change; tests build their own).
    pub fn from_topics(topics: impl IntoIterator<Item = Topic>) -> Self {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let mut s = Self {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            ..Self::default()
        };
        for t in topics {
            let t = Arc::new(t);
            s.by_id.insert(t.id, t.clone());
            s.by_name.insert(t.name.clone(), t);
        }
        s
    }
    /// This content's number (see the field): equal numbers, equal topics.
    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn get(&self, name: &str) -> Option<&Arc<Topic>> {
        self.by_name.get(name)
    }
    pub fn get_by_id(&self, id: &Uuid) -> Option<&Arc<Topic>> {
        self.by_id.get(id)
    }
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Topic>> {
        self.by_name.values()
    }
    pub fn len(&self) -> usize {
        self.by_name.len()
    }
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
    /// An existing topic whose name collides with `name` once '.' and '_' are treated alike
    /// (Kafka forbids such pairs because metric names cannot tell them apart).
    pub fn colliding(&self, name: &str) -> Option<&Arc<Topic>> {
        let key = unify(name);
        self.by_name
            .values()
            .find(|t| t.name != name && unify(&t.name) == key)
    }
}

fn unify(name: &str) -> String {
    name.replace('.', "_")
}

/// Why a topic name is invalid, in Kafka's words (`org.apache.kafka.common.internals.Topic.validate`).
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > MAX_NAME_LENGTH {
        return Err(format!(
            "Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-')
    {
        return Err(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// An in-memory topic list shaped like the broker's registry (`create`, `snapshot`), for tests of
/// the state machines here; the broker's persisted one is `engine::topics::TopicRegistry`.
#[derive(Debug)]
pub struct MemoryTopics {
    current: std::sync::Mutex<Arc<TopicsSnapshot>>,
}

impl MemoryTopics {
    /// `__consumer_offsets` with `offsets_partitions` partitions, as a fresh registry holds.
    pub fn new(offsets_partitions: i32) -> Self {
        let offsets = Topic {
            name: CONSUMER_OFFSETS.into(),
            id: Uuid::new_v4(),
            partitions: offsets_partitions,
            internal: true,
            configs: BTreeMap::new(),
            replication_factor: 1,
        };
        Self {
            current: std::sync::Mutex::new(Arc::new(TopicsSnapshot::from_topics([offsets]))),
        }
    }

    /// Add a topic with a random id; refused (as the registry refuses) when the name is taken or
    /// invalid.
    pub fn create(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<Topic>, String> {
        validate_name(name)?;
        let mut current = self.current.lock().expect("no poisoned lock");
        if current.get(name).is_some() {
            return Err(format!("Topic '{name}' already exists."));
        }
        let topic = Topic {
            name: name.into(),
            id: Uuid::new_v4(),
            partitions,
            internal: false,
            configs,
            replication_factor: 1,
        };
        let topics: Vec<Topic> = current
            .iter()
            .map(|t| (**t).clone())
            .chain([topic])
            .collect();
        *current = Arc::new(TopicsSnapshot::from_topics(topics));
        Ok(current.get(name).expect("just added").clone())
    }

    pub fn snapshot(&self) -> Arc<TopicsSnapshot> {
        self.current.lock().expect("no poisoned lock").clone()
    }
}

//! Per-group configs (Kafka's `GroupConfig`, KIP-848): the `consumer.*` overrides a GROUP config
//! resource holds, validated as Kafka 4.4 validates them and kept durably.
//!
//! Kafka keeps group configs in its metadata log, not in `__consumer_offsets`; here they live in
//! `DATA/group-configs.json`, written whole through `storage::durable_file` (a temporary file,
//! fsync, rename, directory fsync) before an alter is answered. Readers (every group request carries a snapshot to
//! its partition's coordinator) take a lock-free `ArcSwap` snapshot; writers serialise on a mutex
//! and run off the reactor. A group need not exist to have configs, as in Kafka.
//!
//! Only the consumer-group keys are served. The `share.*`, `streams.*` and `errors.*` keys Kafka
//! also accepts configure share and streams groups, which this broker does not serve; they are
//! refused with a message rather than stored and ignored.

use arc_swap::ArcSwap;
use coordinator::group::{GroupOverrides, GroupOverridesMap};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub const SESSION_TIMEOUT: &str = "consumer.session.timeout.ms";
pub const HEARTBEAT_INTERVAL: &str = "consumer.heartbeat.interval.ms";
pub const ASSIGNMENT_INTERVAL: &str = "consumer.assignment.interval.ms";

/// The keys a GROUP resource has here, in DescribeConfigs' (alphabetical) order.
pub const KEYS: [&str; 3] = [ASSIGNMENT_INTERVAL, HEARTBEAT_INTERVAL, SESSION_TIMEOUT];

/// The broker settings that bound and default the group keys.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub session: (i32, i32, i32),
    pub heartbeat: (i32, i32, i32),
    pub assignment: (i32, i32, i32),
}

impl Bounds {
    pub fn of(c: &crate::config::Config) -> Self {
        Self {
            session: (
                c.group_consumer_min_session_timeout_ms,
                c.group_consumer_session_timeout_ms,
                c.group_consumer_max_session_timeout_ms,
            ),
            heartbeat: (
                c.group_consumer_min_heartbeat_interval_ms,
                c.group_consumer_heartbeat_interval_ms,
                c.group_consumer_max_heartbeat_interval_ms,
            ),
            assignment: (
                c.group_consumer_min_assignment_interval_ms,
                c.group_consumer_assignment_interval_ms,
                c.group_consumer_max_assignment_interval_ms,
            ),
        }
    }

    /// The broker key a group key defaults to, and its value (DescribeConfigs' synonym).
    pub fn default_of(&self, key: &str) -> (&'static str, i32) {
        match key {
            SESSION_TIMEOUT => ("group.consumer.session.timeout.ms", self.session.1),
            HEARTBEAT_INTERVAL => ("group.consumer.heartbeat.interval.ms", self.heartbeat.1),
            _ => ("group.consumer.assignment.interval.ms", self.assignment.1),
        }
    }
}

/// A group's configs as key → value strings (what the alter APIs edit).
pub fn to_strings(o: &GroupOverrides) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for (k, v) in [
        (SESSION_TIMEOUT, o.session_timeout_ms),
        (HEARTBEAT_INTERVAL, o.heartbeat_interval_ms),
        (ASSIGNMENT_INTERVAL, o.assignment_interval_ms),
    ] {
        if let Some(v) = v {
            m.insert(k.to_string(), v.to_string());
        }
    }
    m
}

/// Validate a group's complete new config set (`GroupConfig.validate`, in its order: names, then
/// types, then each key's broker bounds, then session > heartbeat with the broker's values for
/// keys not set) and parse it. Errors are Kafka's messages (INVALID_CONFIG).
pub fn validate(configs: &BTreeMap<String, String>, b: &Bounds) -> Result<GroupOverrides, String> {
    for name in configs.keys() {
        if KEYS.contains(&name.as_str()) {
            continue;
        }
        let family = ["share.", "streams.", "errors."]
            .iter()
            .find(|p| name.starts_with(*p));
        return Err(match (family, name.as_str()) {
            (_, "consumer.assignor.offload.enable") => format!(
                "{name} is not supported: assignments are computed on the shard that owns the group."
            ),
            (Some(_), _) if kafka_group_key(name) => format!(
                "{name} is not supported: this broker serves consumer groups only (no share or streams groups)."
            ),
            _ => format!("Unknown group config name: {name}"),
        });
    }
    let int = |key: &str| -> Result<Option<i32>, String> {
        configs
            .get(key)
            .map(|v| {
                v.trim().parse::<i32>().map_err(|_| {
                    format!("Invalid value {v} for configuration {key}: Not a number of type INT")
                })
            })
            .transpose()
    };
    let o = GroupOverrides {
        heartbeat_interval_ms: int(HEARTBEAT_INTERVAL)?,
        session_timeout_ms: int(SESSION_TIMEOUT)?,
        assignment_interval_ms: int(ASSIGNMENT_INTERVAL)?,
    };
    // `ConfigDef` ranges first (at least 1, 1 and 0), then the broker's bounds.
    for (key, v, least) in [
        (SESSION_TIMEOUT, o.session_timeout_ms, 1),
        (HEARTBEAT_INTERVAL, o.heartbeat_interval_ms, 1),
        (ASSIGNMENT_INTERVAL, o.assignment_interval_ms, 0),
    ] {
        if let Some(v) = v {
            if v < least {
                return Err(format!(
                    "Invalid value {v} for configuration {key}: Value must be at least {least}"
                ));
            }
        }
    }
    for (key, v, (min, _, max)) in [
        (HEARTBEAT_INTERVAL, o.heartbeat_interval_ms, b.heartbeat),
        (SESSION_TIMEOUT, o.session_timeout_ms, b.session),
        (ASSIGNMENT_INTERVAL, o.assignment_interval_ms, b.assignment),
    ] {
        if let Some(v) = v {
            if v < min || v > max {
                return Err(format!(
                    "{key} must be in the range {min} to {max} inclusive."
                ));
            }
        }
    }
    if o.session_timeout_ms.is_some() || o.heartbeat_interval_ms.is_some() {
        let session = o.session_timeout_ms.unwrap_or(b.session.1);
        let heartbeat = o.heartbeat_interval_ms.unwrap_or(b.heartbeat.1);
        if session <= heartbeat {
            return Err(format!(
                "{SESSION_TIMEOUT} must be greater than {HEARTBEAT_INTERVAL}"
            ));
        }
    }
    Ok(o)
}

/// Keys of Kafka 4.4's `GroupConfig` for share and streams groups (and share groups' DLQ).
fn kafka_group_key(name: &str) -> bool {
    const OTHERS: &[&str] = &[
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms",
        "share.delivery.count.limit",
        "share.partition.max.record.locks",
        "share.auto.offset.reset",
        "share.isolation.level",
        "share.renew.acknowledge.enable",
        "share.assignment.interval.ms",
        "share.assignor.offload.enable",
        "streams.session.timeout.ms",
        "streams.heartbeat.interval.ms",
        "streams.num.standby.replicas",
        "streams.initial.rebalance.delay.ms",
        "streams.assignment.interval.ms",
        "streams.rack.aware.assignment.tags",
        "streams.assignor.offload.enable",
        "streams.task.offset.interval.ms",
        "streams.num.warmup.replicas",
        "streams.acceptable.recovery.lag",
        "streams.assignor.name",
        "errors.deadletterqueue.topic.name",
        "errors.deadletterqueue.copy.record.enable",
    ];
    OTHERS.contains(&name)
}

#[derive(Debug, thiserror::Error)]
pub enum GroupConfigsError {
    #[error("could not persist group configs at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("group configs at {path} are corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

#[derive(Serialize, Deserialize)]
struct OnDisk {
    version: u32,
    groups: GroupOverridesMap,
}

/// The durable map of group id → overrides.
#[derive(Debug)]
pub struct GroupConfigRegistry {
    path: PathBuf,
    /// Shared with the shards' caches ([`Self::cache`]).
    current: Arc<ArcSwap<GroupOverridesMap>>,
    writer: Mutex<()>,
}

impl GroupConfigRegistry {
    pub fn open(data_dir: &Path) -> Result<Self, GroupConfigsError> {
        let path = data_dir.join("group-configs.json");
        let groups =
            match storage::durable_file::read(&path).map_err(|source| GroupConfigsError::Io {
                path: path.clone(),
                source,
            })? {
                None => GroupOverridesMap::new(),
                Some(bytes) => {
                    let disk: OnDisk =
                        serde_json::from_slice(&bytes).map_err(|e| GroupConfigsError::Corrupt {
                            path: path.clone(),
                            reason: e.to_string(),
                        })?;
                    disk.groups
                }
            };
        Ok(Self {
            path,
            current: Arc::new(ArcSwap::from_pointee(groups)),
            writer: Mutex::new(()),
        })
    }

    /// Every group's overrides; cheap, lock-free.
    pub fn snapshot(&self) -> Arc<GroupOverridesMap> {
        self.current.load_full()
    }

    /// A cache of the current snapshot for one thread: its `load` costs one relaxed read of the
    /// shared pointer while nothing changed, where [`Self::snapshot`] takes a reference on the
    /// snapshot every shard shares (an atomic on one cache line for all of them).
    pub fn cache(
        &self,
    ) -> arc_swap::Cache<Arc<ArcSwap<GroupOverridesMap>>, Arc<GroupOverridesMap>> {
        arc_swap::Cache::new(self.current.clone())
    }

    /// Replace one group's overrides (none set removes the entry), durably, then publish.
    /// Blocking: call off the reactor.
    pub fn set(&self, group: &str, o: GroupOverrides) -> Result<(), GroupConfigsError> {
        let _guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut groups = (*self.snapshot()).clone();
        if o == GroupOverrides::default() {
            groups.remove(group);
        } else {
            groups.insert(group.to_string(), o);
        }
        let bytes = serde_json::to_vec_pretty(&OnDisk {
            version: 1,
            groups: groups.clone(),
        })
        .map_err(|e| GroupConfigsError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        storage::durable_file::write_atomic(&self.path, &bytes).map_err(|source| {
            GroupConfigsError::Io {
                path: self.path.clone(),
                source,
            }
        })?;
        self.current.store(Arc::new(groups));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> Bounds {
        Bounds::of(&crate::config::Config::default())
    }

    fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn validation_gives_kafkas_messages() {
        let b = bounds();
        // Read off Kafka 4.4 (kafka-configs --entity-type groups --alter) with default bounds.
        for (pairs, want) in [
            (
                vec![(SESSION_TIMEOUT, "5000")],
                "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
            ),
            (vec![("foo.bar", "1")], "Unknown group config name: foo.bar"),
            (
                vec![(SESSION_TIMEOUT, "abc")],
                "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT",
            ),
            (
                vec![(HEARTBEAT_INTERVAL, "15000"), (SESSION_TIMEOUT, "15000")],
                "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
            ),
            (
                vec![(ASSIGNMENT_INTERVAL, "20000")],
                "consumer.assignment.interval.ms must be in the range 0 to 15000 inclusive.",
            ),
        ] {
            assert_eq!(validate(&set(&pairs), &b).unwrap_err(), want);
        }
        assert!(validate(&set(&[("streams.num.standby.replicas", "1")]), &b)
            .unwrap_err()
            .contains("consumer groups only"));
        let o = validate(
            &set(&[(HEARTBEAT_INTERVAL, "6000"), (SESSION_TIMEOUT, "46000")]),
            &b,
        )
        .unwrap();
        assert_eq!(
            (
                o.heartbeat_interval_ms,
                o.session_timeout_ms,
                o.assignment_interval_ms
            ),
            (Some(6000), Some(46000), None)
        );
        // Session must exceed the heartbeat, the broker's value standing in for an unset key.
        let mut tight = b;
        tight.session = (1, 45_000, 60_000);
        assert_eq!(
            validate(&set(&[(SESSION_TIMEOUT, "5000")]), &tight).unwrap_err(),
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
        );
    }

    #[test]
    fn overrides_survive_a_reopen_and_an_empty_set_removes_them() {
        let dir = std::env::temp_dir().join(format!("rl-gcfg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let reg = GroupConfigRegistry::open(&dir).unwrap();
        let o = GroupOverrides {
            session_timeout_ms: Some(50_000),
            ..Default::default()
        };
        reg.set("g", o.clone()).unwrap();
        assert_eq!(GroupConfigRegistry::open(&dir).unwrap().snapshot()["g"], o);
        reg.set("g", GroupOverrides::default()).unwrap();
        assert!(GroupConfigRegistry::open(&dir)
            .unwrap()
            .snapshot()
            .is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

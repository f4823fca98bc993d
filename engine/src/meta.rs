//! `DATA/meta.properties`: the identity of this data directory (cluster id, node id, and a
//! random incarnation id), written once and checked at every start, as Kafka's `meta.properties`
//! is. Starting a broker with a different node id on an existing data dir is refused: its records
//! belong to another node.
//!
//! `DATA/peer-incarnations.properties`: on a node of a cluster, each peer node's incarnation id
//! ([`PeerIncarnations`]), so a peer that comes back under the same node id with another data
//! directory (a lost disk, wiped and restarted) is refused: a Raft voter that forgot its log and
//! its votes must not vote (docs/replication.md, "A voter that lost its disk").

use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub cluster_id: String,
    pub node_id: i32,
    /// Random, made with the directory: tells this data directory from any earlier or later one
    /// started under the same node id (KIP-853's `directory.id` serves this in Kafka; ours is
    /// derived from the node id, `Cluster::directory_id`, so this is a separate key).
    pub incarnation: uuid::Uuid,
}

/// The key of [`Meta::incarnation`] in `meta.properties`.
const INCARNATION_KEY: &str = "incarnation.id";

/// A Kafka-style cluster id: a random UUID as 22 characters of URL-safe base64 without padding
/// (`Uuid.randomUuid().toString()` in Kafka's `org.apache.kafka.common.Uuid`).
pub fn new_cluster_id() -> String {
    coordinator::random_base64_uuid()
}

/// Load `meta.properties`, or create it. `configured_cluster_id` (config `cluster.id`) wins when
/// creating; on an existing dir it must match.
pub fn load_or_create(
    data_dir: &Path,
    node_id: i32,
    configured_cluster_id: &str,
) -> anyhow::Result<Meta> {
    let path = data_dir.join("meta.properties");
    if let Some(bytes) = storage::durable_file::read(&path)? {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let get = |k: &str| value_of(&text, k);
        let cluster_id = get("cluster.id")
            .ok_or_else(|| anyhow::anyhow!("{}: no cluster.id", path.display()))?;
        let stored_node: i32 = get("node.id")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("{}: no valid node.id", path.display()))?;
        anyhow::ensure!(
            stored_node == node_id,
            "{} belongs to node.id {stored_node}, but this broker is configured as node.id {node_id}",
            path.display()
        );
        anyhow::ensure!(
            configured_cluster_id.is_empty() || configured_cluster_id == cluster_id,
            "{} belongs to cluster {cluster_id}, but cluster.id is configured as {configured_cluster_id}",
            path.display()
        );
        let incarnation = match get(INCARNATION_KEY) {
            Some(v) => parse_base64_uuid(&v).ok_or_else(|| {
                anyhow::anyhow!("{}: {INCARNATION_KEY} {v:?} is not an id", path.display())
            })?,
            None => {
                // Written by a version without it. The file exists, so this is the directory
                // the node ran on before (not a new one): it gets its id now, and peers that
                // never saw one record it on first contact.
                let id = uuid::Uuid::new_v4();
                append_key(&path, text, INCARNATION_KEY, &coordinator::base64_uuid(id))?;
                id
            }
        };
        return Ok(Meta {
            cluster_id,
            node_id,
            incarnation,
        });
    }
    let cluster_id = if configured_cluster_id.is_empty() {
        new_cluster_id()
    } else {
        configured_cluster_id.to_string()
    };
    let incarnation = uuid::Uuid::new_v4();
    let text = format!(
        "# Written by ringleader; identifies this data directory.\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\n{INCARNATION_KEY}={}\n",
        coordinator::base64_uuid(incarnation)
    );
    storage::durable_file::write_atomic(&path, text.as_bytes())?;
    Ok(Meta {
        cluster_id,
        node_id,
        incarnation,
    })
}

/// The value of `key` in a `meta.properties` text (`key=value` lines, trimmed).
fn value_of(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
}

/// Add the line `key=value` to `meta.properties` (at `path`, whose text is `text`), durably: a
/// key a directory written by an older version lacks.
fn append_key(path: &Path, mut text: String, key: &str, value: &str) -> std::io::Result<()> {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("{key}={value}\n"));
    storage::durable_file::write_atomic(path, text.as_bytes())
}

/// Kafka's URL-safe base64 form of a UUID without padding (22 characters), read back
/// (`coordinator::base64_uuid` writes it). None: not such a string (the decoder also refuses
/// padding and set trailing bits, so each id has one form).
pub fn parse_base64_uuid(s: &str) -> Option<uuid::Uuid> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .ok()?;
    uuid::Uuid::from_slice(&bytes).ok()
}

/// Each peer node's incarnation id as this node knows it, persisted in
/// `DATA/peer-incarnations.properties` (one `node.<id>=<id>` line per peer): the metadata log's
/// record of it (`Command::Incarnation`, written through by `Cluster::set_incarnations`), else
/// the one its first hello said once this node's metadata log was current (trust on first
/// contact, `runtime::peers::judge`). Later hellos must match. It lets a restarted node refuse
/// another directory before it replayed its metadata log. Bounded by the address book: only
/// nodes the metadata log made peers are recorded.
///
/// Kafka's KIP-853 keeps each voter's directory id in the replicated voter set; the metadata
/// log's record is that, and this file is each node's durable copy of it.
#[derive(Debug)]
pub struct PeerIncarnations {
    path: std::path::PathBuf,
    known: std::collections::BTreeMap<u64, uuid::Uuid>,
}

/// Why [`PeerIncarnations::check`] refused a peer.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The peer's incarnation is not the one recorded: its data directory is another one.
    Another { known: uuid::Uuid },
    /// The record could not be written: the peer is refused for now (it connects again).
    Io(String),
}

impl PeerIncarnations {
    pub fn open(data_dir: &Path) -> anyhow::Result<Self> {
        let path = data_dir.join("peer-incarnations.properties");
        let mut known = std::collections::BTreeMap::new();
        if let Some(bytes) = storage::durable_file::read(&path)? {
            let text = String::from_utf8_lossy(&bytes);
            for line in text
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            {
                let parsed = line.split_once('=').and_then(|(k, v)| {
                    let node = k.trim().strip_prefix("node.")?.parse::<u64>().ok()?;
                    Some((node, parse_base64_uuid(v.trim())?))
                });
                let (node, id) = parsed.ok_or_else(|| {
                    anyhow::anyhow!("{}: cannot read the line {line:?}", path.display())
                })?;
                known.insert(node, id);
            }
        }
        Ok(Self { path, known })
    }

    /// The incarnation recorded for `node`, if any.
    pub fn get(&self, node: u64) -> Option<uuid::Uuid> {
        self.known.get(&node).copied()
    }

    /// Accept `node` saying it is incarnation `id`: the recorded one, or (none recorded) record
    /// it durably first, so a restart of this node still knows it. Blocking file I/O, once per
    /// peer node over the cluster's life.
    pub fn check(&mut self, node: u64, id: uuid::Uuid) -> Result<(), Refused> {
        match self.known.get(&node) {
            Some(&known) if known == id => Ok(()),
            Some(&known) => Err(Refused::Another { known }),
            None => self.record(node, id),
        }
    }

    /// Make `node`'s record `id` whatever it was: the metadata log's record
    /// (`Command::Incarnation`) overrides this node's own, which may have been taken from a
    /// hello that came before this node replayed that record. Durable before it returns.
    pub fn record(&mut self, node: u64, id: uuid::Uuid) -> Result<(), Refused> {
        if self.known.get(&node) == Some(&id) {
            return Ok(());
        }
        let mut next = self.known.clone();
        next.insert(node, id);
        let mut text = String::from(
            "# Written by ringleader: the data directory (incarnation id) each peer node first \
             connected with.\n",
        );
        for (n, i) in &next {
            text.push_str(&format!("node.{n}={}\n", coordinator::base64_uuid(*i)));
        }
        storage::durable_file::write_atomic(&self.path, text.as_bytes())
            .map_err(|e| Refused::Io(format!("{}: {e}", self.path.display())))?;
        self.known = next;
        Ok(())
    }
}

/// On a node of a cluster: make `meta.properties` name the directory id the cluster knows this
/// node by (`Cluster::directory_id`), as Kafka's KRaft `meta.properties` names its
/// `directory.id` (Kafka's base64 form), so `kafka-metadata-quorum add-controller
/// --command-config <this node's properties>` reads it from the data directory (its
/// `log.dirs`) as it reads a controller's. Added once (an older directory lacks it); a different
/// one stops the start (the directory belongs to another node or cluster).
pub fn ensure_directory_id(data_dir: &Path, id: uuid::Uuid) -> anyhow::Result<()> {
    let path = data_dir.join("meta.properties");
    let want = coordinator::base64_uuid(id);
    let bytes = storage::durable_file::read(&path)?
        .ok_or_else(|| anyhow::anyhow!("{}: missing", path.display()))?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    match value_of(&text, "directory.id") {
        Some(h) if h == want => Ok(()),
        Some(h) => anyhow::bail!(
            "{} names directory.id {h}; this node of this cluster is {want}",
            path.display()
        ),
        None => Ok(append_key(&path, text, "directory.id", &want)?),
    }
}

/// The file listing the Raft logs this data directory holds for good (a node of a cluster):
/// each `__consumer_offsets` partition's and the metadata log's, written once they all exist.
pub const RAFT_LOGS_FILE: &str = "raft-logs.properties";

/// Refuse to start a node of a cluster whose data directory lost one of the Raft logs it held
/// (listed in [`RAFT_LOGS_FILE`]): that replica would come back empty under the same id, vote
/// without its log (an empty log grants any candidate its vote) and, once a leader tells it a
/// commit index its lost log had acknowledged, stop on raft-rs's "to_commit … out of range"
/// panic at every start. The whole directory lost is the peers' to refuse (a new
/// `incarnation.id`); a part of it lost is this check's. No file (a new directory, or one from
/// before the file existed): nothing to check.
pub fn check_raft_logs(data_dir: &Path) -> anyhow::Result<()> {
    let path = data_dir.join(RAFT_LOGS_FILE);
    for name in listed_raft_logs(&path)? {
        let state = data_dir.join(&name).join(storage::raft_log::STATE_FILE);
        anyhow::ensure!(
            state.is_file(),
            "{} is missing, but this data directory held that Raft log ({}): the replica's log and \
             votes are lost, and a Raft voter must not take part again under the same node id \
             without them. Restore the directory; or remove the node from the cluster \
             (RemoveRaftVoter) and start the machine under a new node.id on an empty data \
             directory (docs/replication.md, \"A voter that lost its disk\")",
            state.display(),
            path.display()
        );
    }
    Ok(())
}

/// The log directory names [`RAFT_LOGS_FILE`] at `path` lists (none without the file). A line
/// that does not read, or a name with a `/`, is an error.
fn listed_raft_logs(path: &Path) -> anyhow::Result<std::collections::BTreeSet<String>> {
    let Some(bytes) = storage::durable_file::read(path)? else {
        return Ok(Default::default());
    };
    let mut names = std::collections::BTreeSet::new();
    for line in String::from_utf8_lossy(&bytes).lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name = line.strip_prefix("log=").ok_or_else(|| {
            anyhow::anyhow!("{}: a line that does not read: {line:?}", path.display())
        })?;
        anyhow::ensure!(
            !name.is_empty() && !name.contains('/') && name != "." && name != "..",
            "{}: not a log directory name: {name:?}",
            path.display()
        );
        names.insert(name.to_string());
    }
    Ok(names)
}

/// Once a node of a cluster opened its Raft logs: list those of `logs` (directory names under
/// `data_dir`; the caller names the ones a node keeps for good) that exist in [`RAFT_LOGS_FILE`]
/// (rewritten only when the list grew), for [`check_raft_logs`] at the next start. Written after
/// the logs' own files were made durable, and `write_atomic` syncs the data directory, so every
/// listed log's directory entry is durable too.
pub fn record_raft_logs(
    data_dir: &Path,
    logs: impl IntoIterator<Item = String>,
) -> anyhow::Result<()> {
    let path = data_dir.join(RAFT_LOGS_FILE);
    let held: Vec<String> = logs
        .into_iter()
        .filter(|name| {
            data_dir
                .join(name)
                .join(storage::raft_log::STATE_FILE)
                .is_file()
        })
        .collect();
    let mut names = listed_raft_logs(&path)?;
    if held.iter().all(|n| names.contains(n)) {
        return Ok(());
    }
    names.extend(held);
    let mut text = String::from(
        "# Written by ringleader: the Raft logs this data directory holds; a start without one stops.\n",
    );
    for n in &names {
        text.push_str("log=");
        text.push_str(n);
        text.push('\n');
    }
    storage::durable_file::write_atomic(&path, text.as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raft_log_gone_from_the_list_stops_the_start() {
        let dir = std::env::temp_dir().join(format!("rl-meta-raft-logs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fixed = |partitions: i32| {
            std::iter::once("__cluster_metadata-0".to_string())
                .chain((0..partitions).map(|p| format!("__consumer_offsets-{p}")))
        };
        let make = |name: &str| {
            std::fs::create_dir_all(dir.join(name)).unwrap();
            std::fs::write(dir.join(name).join(storage::raft_log::STATE_FILE), b"").unwrap();
        };
        // No list yet (a new directory): nothing to check, and nothing listed while none exist.
        check_raft_logs(&dir).unwrap();
        record_raft_logs(&dir, fixed(3)).unwrap();
        check_raft_logs(&dir).unwrap();
        for name in [
            "__cluster_metadata-0",
            "__consumer_offsets-0",
            "__consumer_offsets-1",
        ] {
            make(name);
        }
        record_raft_logs(&dir, fixed(3)).unwrap();
        let text = std::fs::read_to_string(dir.join(RAFT_LOGS_FILE)).unwrap();
        assert!(
            text.contains("log=__consumer_offsets-1\n") && !text.contains("offsets-2"),
            "{text}"
        );
        check_raft_logs(&dir).unwrap();
        // A later log joins the list; none leaves it.
        make("__consumer_offsets-2");
        record_raft_logs(&dir, fixed(3)).unwrap();
        check_raft_logs(&dir).unwrap();
        std::fs::remove_dir_all(dir.join("__consumer_offsets-1")).unwrap();
        let err = check_raft_logs(&dir).unwrap_err().to_string();
        assert!(
            err.contains("__consumer_offsets-1") && err.contains("RemoveRaftVoter"),
            "{err}"
        );
        record_raft_logs(&dir, fixed(3)).unwrap();
        assert!(
            check_raft_logs(&dir).is_err(),
            "the list keeps what is gone"
        );
        // A list that does not read stops the start too.
        std::fs::write(dir.join(RAFT_LOGS_FILE), "log=../x\n").unwrap();
        assert!(check_raft_logs(&dir).is_err());
        std::fs::write(dir.join(RAFT_LOGS_FILE), "garbage\n").unwrap();
        assert!(check_raft_logs(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cluster_node_names_its_directory_id_once() {
        let dir = std::env::temp_dir().join(format!("rl-meta-dir-id-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        load_or_create(&dir, 4, "c1").unwrap();
        let id = uuid::Uuid::from_u128(0x1234_5678_9abc_4def_8123_456789abcdef);
        ensure_directory_id(&dir, id).unwrap();
        ensure_directory_id(&dir, id).unwrap();
        let text = std::fs::read_to_string(dir.join("meta.properties")).unwrap();
        assert_eq!(text.matches("directory.id=").count(), 1, "{text}");
        assert!(text.contains(&format!("directory.id={}", coordinator::base64_uuid(id))));
        assert!(ensure_directory_id(&dir, uuid::Uuid::from_u128(9)).is_err());
        assert_eq!(
            load_or_create(&dir, 4, "c1").unwrap().node_id,
            4,
            "still read"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_incarnation_id_is_made_once_and_an_older_directory_gets_one() {
        let dir = std::env::temp_dir().join(format!("rl-meta-inc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let first = load_or_create(&dir, 2, "c1").unwrap();
        assert_eq!(load_or_create(&dir, 2, "c1").unwrap(), first, "kept");
        // A directory written before the key existed gets one, once.
        std::fs::write(
            dir.join("meta.properties"),
            "version=1\ncluster.id=c1\nnode.id=2\n",
        )
        .unwrap();
        let upgraded = load_or_create(&dir, 2, "c1").unwrap();
        assert_ne!(upgraded.incarnation, first.incarnation);
        assert_eq!(load_or_create(&dir, 2, "c1").unwrap(), upgraded);
        std::fs::write(
            dir.join("meta.properties"),
            "version=1\ncluster.id=c1\nnode.id=2\nincarnation.id=nope\n",
        )
        .unwrap();
        assert!(
            load_or_create(&dir, 2, "c1").is_err(),
            "a bad id is refused"
        );
        // Another directory under the same node id is another incarnation.
        let other = dir.join("other");
        std::fs::create_dir_all(&other).unwrap();
        assert_ne!(
            load_or_create(&other, 2, "c1").unwrap().incarnation,
            upgraded.incarnation
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn base64_ids_read_back() {
        for id in [
            uuid::Uuid::nil(),
            uuid::Uuid::max(),
            uuid::Uuid::from_u128(0x1234_5678_9abc_4def_8123_4567_89ab_cdef),
            uuid::Uuid::new_v4(),
        ] {
            assert_eq!(
                parse_base64_uuid(&coordinator::base64_uuid(id)),
                Some(id),
                "{id}"
            );
        }
        assert_eq!(
            parse_base64_uuid("AAAAAAAAAAAAAAAAAAAAAB"),
            None,
            "padding bits set"
        );
        assert_eq!(parse_base64_uuid("AAAAAAAAAAAAAAAAAAAAA"), None, "short");
        assert_eq!(
            parse_base64_uuid("AAAAAAAAAAAAAAAAAAAA+A"),
            None,
            "not URL-safe"
        );
    }

    #[test]
    fn a_peer_is_known_by_its_first_incarnation_across_restarts() {
        let dir = std::env::temp_dir().join(format!("rl-meta-peers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        let mut p = PeerIncarnations::open(&dir).unwrap();
        assert_eq!(p.get(3), None);
        p.check(3, a).unwrap();
        p.check(3, a).unwrap();
        p.check(5, b).unwrap();
        assert_eq!(p.check(3, b), Err(Refused::Another { known: a }));
        let mut again = PeerIncarnations::open(&dir).unwrap();
        assert_eq!(
            (again.get(3), again.get(5)),
            (Some(a), Some(b)),
            "persisted"
        );
        assert_eq!(again.check(5, a), Err(Refused::Another { known: b }));
        again.check(3, a).unwrap();
        // The metadata log's record overrides this node's own, durably.
        again.record(5, a).unwrap();
        again.check(5, a).unwrap();
        assert_eq!(PeerIncarnations::open(&dir).unwrap().get(5), Some(a));
        std::fs::write(dir.join("peer-incarnations.properties"), "node.x=1\n").unwrap();
        assert!(
            PeerIncarnations::open(&dir).is_err(),
            "a bad file stops the start"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cluster_id_shape() {
        let id = new_cluster_id();
        assert_eq!(id.len(), 22);
        assert!(id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert_ne!(id, new_cluster_id());
    }

    #[test]
    fn persisted_and_checked() {
        let d = std::env::temp_dir().join(format!("rl-meta-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let m = load_or_create(&d, 1, "").unwrap();
        assert_eq!(load_or_create(&d, 1, "").unwrap(), m);
        assert!(load_or_create(&d, 2, "").is_err());
        assert!(load_or_create(&d, 1, "other").is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}

//! `DATA/meta.properties`: the identity of this data directory (cluster id, node id), written
//! once and checked at every start, as Kafka's `meta.properties` is. Starting a broker with a
//! different node id on an existing data dir is refused: its records belong to another node.

use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub cluster_id: String,
    pub node_id: i32,
}

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
        let text = String::from_utf8_lossy(&bytes);
        let get = |k: &str| {
            text.lines()
                .filter_map(|l| l.split_once('='))
                .find(|(key, _)| key.trim() == k)
                .map(|(_, v)| v.trim().to_string())
        };
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
        return Ok(Meta {
            cluster_id,
            node_id,
        });
    }
    let cluster_id = if configured_cluster_id.is_empty() {
        new_cluster_id()
    } else {
        configured_cluster_id.to_string()
    };
    let text = format!("# Written by ringleader; identifies this data directory.\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\n");
    storage::durable_file::write_atomic(&path, text.as_bytes())?;
    Ok(Meta {
        cluster_id,
        node_id,
    })
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
    let have = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == "directory.id")
        .map(|(_, v)| v.trim().to_string());
    match have {
        Some(h) if h == want => Ok(()),
        Some(h) => anyhow::bail!(
            "{} names directory.id {h}; this node of this cluster is {want}",
            path.display()
        ),
        None => {
            let mut text = text;
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("directory.id={want}\n"));
            storage::durable_file::write_atomic(&path, text.as_bytes())?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

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

#[cfg(test)]
mod tests {
    use super::*;

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

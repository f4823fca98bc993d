//! Producer ids for InitProducerId, unique across restarts, and on a cluster across its nodes.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Producer ids for InitProducerId, unique across restarts: ids are handed out from blocks whose
/// end is made durable (`DATA/producer-id-block`) before any id of the block is used.
///
/// On a cluster each node hands out its own lane of ids: the `n`-th id it draws is
/// `n * MAX_NODES + lane` (`lane` = its position in `controller.quorum.voters`), so two nodes never
/// give one producer id to two producers, which a partition would otherwise take for one
/// producer's retries. (Kafka's controller hands each broker blocks of ids through its metadata
/// log, `ProducerIdControlManager`; lanes need no round trip.)
#[derive(Debug)]
pub struct ProducerIds {
    path: Option<PathBuf>,
    state: Mutex<(i64, i64)>, // (next, end of the reserved block), in draws
    lane: Option<i64>,
}

const PRODUCER_ID_BLOCK: i64 = 1000;
/// The most nodes a cluster may have (`controller.quorum.voters` is refused past it): the number
/// of producer id lanes.
pub const MAX_NODES: usize = 1024;

impl ProducerIds {
    /// `lane`: this node's position among the voters of its cluster, None for a single node.
    pub fn open(data_dir: Option<&Path>, lane: Option<usize>) -> std::io::Result<Self> {
        assert!(
            lane.is_none_or(|l| l < MAX_NODES),
            "lane {lane:?} past {MAX_NODES}"
        );
        let path = data_dir.map(|d| d.join("producer-id-block"));
        let start = match &path {
            Some(p) => storage::durable_file::read(p)?
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|s| s.trim().parse::<i64>().ok())
                .unwrap_or(0),
            None => 0,
        };
        Ok(Self {
            path,
            state: Mutex::new((start, start)),
            lane: lane.map(|l| l as i64),
        })
    }

    /// The next producer id. Blocking when a new block must be reserved: call off the reactor.
    pub fn next(&self) -> std::io::Result<i64> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.0 >= st.1 {
            let end = st.1 + PRODUCER_ID_BLOCK;
            if let Some(p) = &self.path {
                storage::durable_file::write_atomic(p, end.to_string().as_bytes())?;
            }
            st.1 = end;
        }
        let draw = st.0;
        st.0 += 1;
        Ok(match self.lane {
            None => draw,
            Some(lane) => draw
                .checked_mul(MAX_NODES as i64)
                .and_then(|d| d.checked_add(lane))
                .ok_or_else(|| std::io::Error::other("producer ids are exhausted"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_ids_survive_a_restart_without_reuse() {
        let dir = std::env::temp_dir().join(format!("rl-pid-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let a = ProducerIds::open(Some(&dir), None).unwrap();
        let first: Vec<i64> = (0..3).map(|_| a.next().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(a);
        let b = ProducerIds::open(Some(&dir), None).unwrap();
        assert_eq!(
            b.next().unwrap(),
            PRODUCER_ID_BLOCK,
            "a restart skips the rest of the block"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_nodes_of_a_cluster_never_hand_out_the_same_id() {
        let ids: Vec<Vec<i64>> = (0..3)
            .map(|lane| {
                let p = ProducerIds::open(None, Some(lane)).unwrap();
                (0..2000).map(|_| p.next().unwrap()).collect()
            })
            .collect();
        let all: std::collections::HashSet<i64> = ids.iter().flatten().copied().collect();
        assert_eq!(all.len(), 6000, "ids collide across nodes");
        assert_eq!(&ids[2][..2], &[2, MAX_NODES as i64 + 2]);
    }
}

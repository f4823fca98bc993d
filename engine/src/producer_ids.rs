//! Producer ids for InitProducerId, unique across restarts.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Producer ids for InitProducerId, unique across restarts: ids are handed out from blocks whose
/// end is made durable (`DATA/producer-id-block`) before any id of the block is used.
#[derive(Debug)]
pub struct ProducerIds {
    path: Option<PathBuf>,
    state: Mutex<(i64, i64)>, // (next, end of the reserved block)
}

const PRODUCER_ID_BLOCK: i64 = 1000;

impl ProducerIds {
    pub fn open(data_dir: Option<&Path>) -> std::io::Result<Self> {
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
        let id = st.0;
        st.0 += 1;
        Ok(id)
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
        let a = ProducerIds::open(Some(&dir)).unwrap();
        let first: Vec<i64> = (0..3).map(|_| a.next().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(a);
        let b = ProducerIds::open(Some(&dir)).unwrap();
        assert_eq!(
            b.next().unwrap(),
            PRODUCER_ID_BLOCK,
            "a restart skips the rest of the block"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

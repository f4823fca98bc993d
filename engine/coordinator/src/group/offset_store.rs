//! The committed offsets of one `__consumer_offsets` partition, interned by (group, topic).
//!
//! A load replays millions of OffsetCommit records over a few thousand keys, so the store is
//! shaped for finding a key from a record's raw key bytes: one hash of the group and topic
//! bytes, one probe of a table of (group, topic) pairs, then the partition in the pair's sorted
//! vector. Group and topic names are stored once each (a topic name once per partition of the
//! coordinator, not once per group), and a pair holds only their indexes. The bytes are
//! validated as UTF-8 only when a pair is created: bytes equal to a stored name are valid.
//!
//! Iteration is by name, never by hash or slot: groups sorted (`group_ids`), a group's topics
//! sorted, partitions sorted — what callers that write records per group (expiry, deletion,
//! snapshots) need for the same input to give the same log on every run.

use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::{BuildHasher, Hasher};
use uuid::Uuid;
use wire::records::{OffsetCommitValue, OffsetCommitValueRef};

/// One committed offset as the store keeps it: an `OffsetCommitValue` with its partition, in
/// 64 bytes (the value and its partition took 80; offsets are most of a large coordinator's
/// memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredOffset {
    pub offset: i64,
    pub commit_timestamp: i64,
    /// -1 = no explicit expiry (see `OffsetCommitValue::expire_timestamp`).
    pub expire_timestamp: i64,
    pub topic_id: Uuid,
    pub leader_epoch: i32,
    pub partition: i32,
    /// Never null; "" allocates nothing.
    pub metadata: Box<str>,
}

impl StoredOffset {
    pub fn new(partition: i32, v: OffsetCommitValue) -> Self {
        Self {
            offset: v.offset,
            commit_timestamp: v.commit_timestamp,
            expire_timestamp: v.expire_timestamp,
            topic_id: v.topic_id,
            leader_epoch: v.leader_epoch,
            partition,
            metadata: v.metadata.into_boxed_str(),
        }
    }

    fn from_ref(partition: i32, v: &OffsetCommitValueRef) -> Self {
        Self {
            offset: v.offset,
            commit_timestamp: v.commit_timestamp,
            expire_timestamp: v.expire_timestamp,
            topic_id: v.topic_id,
            leader_epoch: v.leader_epoch,
            partition,
            metadata: v.metadata.into(),
        }
    }

    /// Overwrite with a newer commit, keeping the metadata's allocation when the text is the
    /// same (a client usually commits the same metadata every time).
    fn set_from_ref(&mut self, v: &OffsetCommitValueRef) {
        self.offset = v.offset;
        self.commit_timestamp = v.commit_timestamp;
        self.expire_timestamp = v.expire_timestamp;
        self.topic_id = v.topic_id;
        self.leader_epoch = v.leader_epoch;
        if !same_bytes(self.metadata.as_bytes(), v.metadata.as_bytes()) {
            self.metadata = v.metadata.into();
        }
    }

    /// The record value this offset was committed with.
    pub fn to_value(&self) -> OffsetCommitValue {
        OffsetCommitValue {
            offset: self.offset,
            leader_epoch: self.leader_epoch,
            metadata: self.metadata.to_string(),
            commit_timestamp: self.commit_timestamp,
            expire_timestamp: self.expire_timestamp,
            topic_id: self.topic_id,
        }
    }
}

/// A (group, topic) pair of the store, as [`OffsetStore::find_pair`] finds it. Valid until the
/// pair's last offset is removed (its slot may then be reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairId(u32);

#[derive(Debug, Clone)]
struct Pair {
    group: u32,
    topic: u32,
    /// Sorted by partition; empty only while the slot is free.
    parts: Vec<StoredOffset>,
}

#[derive(Debug, Clone)]
struct GroupSlot {
    name: Box<str>,
    /// The group's pairs, sorted by topic name; empty only while the slot is free.
    pairs: Vec<u32>,
    /// Free for the caller's use while the group is stored (the coordinator keeps the load
    /// epoch at which it last found the group existing here); 0 for a new group.
    mark: u64,
}

#[derive(Debug, Clone)]
struct TopicSlot {
    name: Box<str>,
    /// Pairs naming this topic; 0 while the slot is free.
    pairs: u32,
}

/// group → topic → partition → committed offset, interned (module docs).
#[derive(Debug, Clone, Default)]
pub struct OffsetStore {
    pairs: Vec<Pair>,
    free_pairs: Vec<u32>,
    groups: Vec<GroupSlot>,
    free_groups: Vec<u32>,
    topics: Vec<TopicSlot>,
    free_topics: Vec<u32>,
    /// Pair slots by hash of (group, topic).
    pair_index: HashTable<u32>,
    /// Group slots by hash of the name.
    group_index: HashTable<u32>,
    /// Topic slots by hash of the name.
    topic_index: HashTable<u32>,
    hasher: DefaultHashBuilder,
}

fn hash1(h: &DefaultHashBuilder, a: &[u8]) -> u64 {
    let mut s = h.build_hasher();
    s.write(a);
    s.finish()
}

#[inline(always)]
fn hash2(h: &DefaultHashBuilder, a: &[u8], b: &[u8]) -> u64 {
    let mut s = h.build_hasher();
    s.write(a);
    s.write(b);
    s.finish()
}

/// `a == b` for the short strings group ids and topics are, without a call to `memcmp` (it was
/// a tenth of replay's instructions): up to 16 bytes compare as two overlapping words.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], i: usize| u64::from_ne_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let half = |s: &[u8], i: usize| u32::from_ne_bytes(s[i..i + 4].try_into().expect("4 bytes"));
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

/// Index of `partition` in `parts` (sorted by partition), or where it would go. Partitions of a
/// topic are usually 0..n, all present, so the first guess is the partition number itself.
#[inline]
fn search(parts: &[StoredOffset], partition: i32) -> Result<usize, usize> {
    if let Some(e) = parts.get(partition as usize) {
        if e.partition == partition {
            return Ok(partition as usize);
        }
    }
    parts.binary_search_by_key(&partition, |e| e.partition)
}

/// Insert into a vector that is written once per key and then only updated: grow by an eighth,
/// not double, so spare capacity stays small.
fn insert_at(parts: &mut Vec<StoredOffset>, i: usize, e: StoredOffset) {
    if parts.len() == parts.capacity() {
        parts.reserve_exact((parts.len() / 8).max(1));
    }
    parts.insert(i, e);
}

impl OffsetStore {
    // ------------------------------------------------------------------ by (group, topic) name

    /// The pair (group, topic), given as raw bytes (a record key's strings, not yet checked as
    /// UTF-8: bytes equal to a stored name are valid).
    #[inline]
    pub fn find_pair(&self, group: &[u8], topic: &[u8]) -> Option<PairId> {
        let hash = hash2(&self.hasher, group, topic);
        let (pairs, groups, topics) = (&self.pairs, &self.groups, &self.topics);
        self.pair_index
            .find(hash, |&p| {
                let pair = &pairs[p as usize];
                same_bytes(groups[pair.group as usize].name.as_bytes(), group)
                    && same_bytes(topics[pair.topic as usize].name.as_bytes(), topic)
            })
            .map(|&p| PairId(p))
    }

    /// The pair (group, topic), created (with no offsets yet) if absent. A caller that creates
    /// one must put an offset in it before anything else reads the store: an empty pair would
    /// make `has_group` say yes.
    pub fn find_or_insert_pair(&mut self, group: &str, topic: &str) -> PairId {
        if let Some(p) = self.find_pair(group.as_bytes(), topic.as_bytes()) {
            return p;
        }
        let g = self.intern_group(group);
        let t = self.intern_topic(topic);
        let slot = match self.free_pairs.pop() {
            Some(s) => {
                self.pairs[s as usize].group = g;
                self.pairs[s as usize].topic = t;
                s
            }
            None => {
                self.pairs.push(Pair {
                    group: g,
                    topic: t,
                    parts: Vec::new(),
                });
                u32::try_from(self.pairs.len() - 1).expect("fewer than 2^32 pairs")
            }
        };
        self.topics[t as usize].pairs += 1;
        // The group's pairs stay sorted by topic name.
        let (pairs, topics) = (&self.pairs, &self.topics);
        let list = &self.groups[g as usize].pairs;
        let at = list
            .binary_search_by(|&q| {
                topics[pairs[q as usize].topic as usize]
                    .name
                    .as_ref()
                    .cmp(topic)
            })
            .expect_err("the pair was not stored");
        self.groups[g as usize].pairs.insert(at, slot);
        let hash = hash2(&self.hasher, group.as_bytes(), topic.as_bytes());
        let (pairs, groups, topics, hasher) =
            (&self.pairs, &self.groups, &self.topics, &self.hasher);
        self.pair_index.insert_unique(hash, slot, |&p| {
            let pair = &pairs[p as usize];
            hash2(
                hasher,
                groups[pair.group as usize].name.as_bytes(),
                topics[pair.topic as usize].name.as_bytes(),
            )
        });
        PairId(slot)
    }

    fn intern_group(&mut self, group: &str) -> u32 {
        let hash = hash1(&self.hasher, group.as_bytes());
        let groups = &self.groups;
        if let Some(&g) = self
            .group_index
            .find(hash, |&g| *groups[g as usize].name == *group)
        {
            return g;
        }
        let slot = match self.free_groups.pop() {
            Some(s) => {
                let gs = &mut self.groups[s as usize];
                gs.name = group.into();
                gs.mark = 0;
                s
            }
            None => {
                self.groups.push(GroupSlot {
                    name: group.into(),
                    pairs: Vec::new(),
                    mark: 0,
                });
                u32::try_from(self.groups.len() - 1).expect("fewer than 2^32 groups")
            }
        };
        let (groups, hasher) = (&self.groups, &self.hasher);
        self.group_index.insert_unique(hash, slot, |&g| {
            hash1(hasher, groups[g as usize].name.as_bytes())
        });
        slot
    }

    fn intern_topic(&mut self, topic: &str) -> u32 {
        let hash = hash1(&self.hasher, topic.as_bytes());
        let topics = &self.topics;
        if let Some(&t) = self
            .topic_index
            .find(hash, |&t| *topics[t as usize].name == *topic)
        {
            return t;
        }
        let slot = match self.free_topics.pop() {
            Some(s) => {
                self.topics[s as usize].name = topic.into();
                s
            }
            None => {
                self.topics.push(TopicSlot {
                    name: topic.into(),
                    pairs: 0,
                });
                u32::try_from(self.topics.len() - 1).expect("fewer than 2^32 topics")
            }
        };
        let (topics, hasher) = (&self.topics, &self.hasher);
        self.topic_index.insert_unique(hash, slot, |&t| {
            hash1(hasher, topics[t as usize].name.as_bytes())
        });
        slot
    }

    /// Drop an emptied pair, and its group and topic when no other pair names them.
    fn release_pair(&mut self, slot: u32) {
        let Pair { group, topic, .. } = self.pairs[slot as usize];
        debug_assert!(self.pairs[slot as usize].parts.is_empty());
        self.pairs[slot as usize].parts = Vec::new();
        let hash = hash2(
            &self.hasher,
            self.groups[group as usize].name.as_bytes(),
            self.topics[topic as usize].name.as_bytes(),
        );
        self.pair_index
            .find_entry(hash, |&p| p == slot)
            .expect("an indexed pair")
            .remove();
        self.free_pairs.push(slot);

        let t = &mut self.topics[topic as usize];
        t.pairs -= 1;
        if t.pairs == 0 {
            let name = std::mem::take(&mut t.name);
            let hash = hash1(&self.hasher, name.as_bytes());
            self.topic_index
                .find_entry(hash, |&x| x == topic)
                .expect("an indexed topic")
                .remove();
            self.free_topics.push(topic);
        }

        let g = &mut self.groups[group as usize];
        let at = g
            .pairs
            .iter()
            .position(|&p| p == slot)
            .expect("listed under its group");
        g.pairs.remove(at);
        if g.pairs.is_empty() {
            g.pairs = Vec::new();
            let name = std::mem::take(&mut g.name);
            let hash = hash1(&self.hasher, name.as_bytes());
            self.group_index
                .find_entry(hash, |&x| x == group)
                .expect("an indexed group")
                .remove();
            self.free_groups.push(group);
        }
    }

    /// The name of the pair's group.
    pub fn pair_group(&self, pair: PairId) -> &str {
        &self.groups[self.pairs[pair.0 as usize].group as usize].name
    }

    /// The caller's mark on the pair's group (see `GroupSlot::mark`).
    #[inline]
    pub fn group_mark(&self, pair: PairId) -> u64 {
        self.groups[self.pairs[pair.0 as usize].group as usize].mark
    }

    pub fn set_group_mark(&mut self, pair: PairId, mark: u64) {
        let g = self.pairs[pair.0 as usize].group;
        self.groups[g as usize].mark = mark;
    }

    /// Store a commit of `partition` in `pair` (the replay fast path: no owned value built).
    #[inline]
    pub fn put_ref(&mut self, pair: PairId, partition: i32, v: &OffsetCommitValueRef) {
        let parts = &mut self.pairs[pair.0 as usize].parts;
        match search(parts, partition) {
            Ok(i) => parts[i].set_from_ref(v),
            Err(i) => insert_at(parts, i, StoredOffset::from_ref(partition, v)),
        }
    }

    /// Remove the offset of `partition` from `pair`, releasing the pair when it empties.
    pub fn remove_in(&mut self, pair: PairId, partition: i32) {
        let parts = &mut self.pairs[pair.0 as usize].parts;
        let Ok(i) = search(parts, partition) else {
            return;
        };
        parts.remove(i);
        if parts.is_empty() {
            self.release_pair(pair.0);
        } else if parts.capacity() > 2 * parts.len() + 4 {
            parts.shrink_to_fit();
        }
    }

    // ------------------------------------------------------------------ the general API

    pub fn put(&mut self, group: &str, topic: &str, partition: i32, v: OffsetCommitValue) {
        let pair = self.find_or_insert_pair(group, topic);
        let parts = &mut self.pairs[pair.0 as usize].parts;
        let e = StoredOffset::new(partition, v);
        match search(parts, partition) {
            Ok(i) => parts[i] = e,
            Err(i) => insert_at(parts, i, e),
        }
    }

    pub fn remove(&mut self, group: &str, topic: &str, partition: i32) {
        if let Some(pair) = self.find_pair(group.as_bytes(), topic.as_bytes()) {
            self.remove_in(pair, partition);
        }
    }

    pub fn get(&self, group: &str, topic: &str, partition: i32) -> Option<&StoredOffset> {
        let pair = self.find_pair(group.as_bytes(), topic.as_bytes())?;
        let parts = &self.pairs[pair.0 as usize].parts;
        search(parts, partition).ok().map(|i| &parts[i])
    }

    fn group_slot(&self, group: &str) -> Option<&GroupSlot> {
        let hash = hash1(&self.hasher, group.as_bytes());
        let groups = &self.groups;
        self.group_index
            .find(hash, |&g| *groups[g as usize].name == *group)
            .map(|&g| &self.groups[g as usize])
    }

    /// Whether `group` has any committed offset.
    pub fn has_group(&self, group: &str) -> bool {
        self.group_slot(group).is_some()
    }

    pub fn keys_of(&self, group: &str) -> Vec<(String, i32)> {
        self.of_group(group)
            .map(|(t, p, _)| (t.to_string(), p))
            .collect()
    }

    /// A group's offsets in (topic, partition) order.
    pub fn of_group(&self, group: &str) -> impl Iterator<Item = (&str, i32, &StoredOffset)> {
        self.group_slot(group)
            .into_iter()
            .flat_map(|g| g.pairs.iter())
            .flat_map(|&p| {
                let pair = &self.pairs[p as usize];
                let topic: &str = &self.topics[pair.topic as usize].name;
                pair.parts.iter().map(move |e| (topic, e.partition, e))
            })
    }

    /// The groups holding offsets, sorted: callers that write records per group (expiry) or
    /// walk groups in slices (`snapshot_build`) must not depend on hash or slot order, or the
    /// same input would give different logs from run to run (and the simulator would not
    /// replay).
    pub fn group_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .groups
            .iter()
            .filter(|g| !g.pairs.is_empty())
            .map(|g| g.name.to_string())
            .collect();
        ids.sort_unstable();
        ids
    }

    /// How many offsets are stored.
    pub fn len(&self) -> usize {
        self.pairs.iter().map(|p| p.parts.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.group_index.is_empty()
    }

    /// Every offset, sorted, for state comparisons.
    pub fn all(&self) -> Vec<(String, String, i32, OffsetCommitValue)> {
        self.group_ids()
            .into_iter()
            .flat_map(|g| {
                self.of_group(&g)
                    .map(|(t, p, o)| (g.clone(), t.to_string(), p, o.to_value()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Check the indexes against the slots (tests): every live slot indexed once and found by
    /// its names, counts consistent, lists sorted, no empty live pair.
    #[cfg(test)]
    pub(crate) fn check(&self) {
        let live_pairs: Vec<u32> = (0..self.pairs.len() as u32)
            .filter(|&p| !self.pairs[p as usize].parts.is_empty())
            .collect();
        assert_eq!(live_pairs.len(), self.pair_index.len());
        assert_eq!(live_pairs.len() + self.free_pairs.len(), self.pairs.len());
        for &p in &live_pairs {
            let pair = &self.pairs[p as usize];
            let g = &self.groups[pair.group as usize];
            let t = &self.topics[pair.topic as usize];
            assert_eq!(
                self.find_pair(g.name.as_bytes(), t.name.as_bytes()),
                Some(PairId(p))
            );
            assert!(g.pairs.contains(&p));
            assert!(pair
                .parts
                .windows(2)
                .all(|w| w[0].partition < w[1].partition));
        }
        let live_groups = self.groups.iter().filter(|g| !g.pairs.is_empty()).count();
        assert_eq!(live_groups, self.group_index.len());
        assert_eq!(live_groups + self.free_groups.len(), self.groups.len());
        for g in self.groups.iter().filter(|g| !g.pairs.is_empty()) {
            assert!(self.has_group(&g.name));
            let names: Vec<&str> = g
                .pairs
                .iter()
                .map(|&p| &*self.topics[self.pairs[p as usize].topic as usize].name)
                .collect();
            assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        }
        let live_topics = self.topics.iter().filter(|t| t.pairs > 0).count();
        assert_eq!(live_topics, self.topic_index.len());
        assert_eq!(live_topics + self.free_topics.len(), self.topics.len());
        for (i, t) in self.topics.iter().enumerate() {
            let users = live_pairs
                .iter()
                .filter(|&&p| self.pairs[p as usize].topic == i as u32)
                .count();
            assert_eq!(users as u32, t.pairs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::same_bytes;

    #[test]
    fn same_bytes_is_slice_equality() {
        // Every length around the word-compare cases, equal and differing at each position
        // (the overlapping loads must not miss a byte in the middle).
        for n in 0..40usize {
            let a: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
            assert!(same_bytes(&a, &a.clone()), "len {n}");
            for i in 0..n {
                let mut b = a.clone();
                b[i] ^= 0x01;
                assert!(!same_bytes(&a, &b), "len {n}, byte {i}");
            }
            let mut longer = a.clone();
            longer.push(0);
            assert!(!same_bytes(&a, &longer) && !same_bytes(&longer, &a));
        }
    }
}

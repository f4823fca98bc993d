//! The API versions Ringleader advertises in ApiVersions and accepts on the wire.
//!
//! This table is ours, never `ApiKey::valid_versions()`: the `kafka-protocol` crate builds that
//! from the untrimmed request specs, so it claims versions (OffsetCommit 10, OffsetFetch 10,
//! InitProducerId 6) its structs cannot encode (reference §7). A key is listed here only when the
//! broker really serves it; anything else is closed like Kafka closes an unsupported version.

/// An inclusive range of versions of one API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRange {
    pub api_key: i16,
    pub min: i16,
    pub max: i16,
}

const fn r(api_key: i16, min: i16, max: i16) -> ApiRange {
    ApiRange { api_key, min, max }
}

/// Versions served by this build. Each line cites the trunk range (reference §1.1/§7) it follows.
pub const SERVED: &[ApiRange] = &[
    r(0, 3, 13), // Produce: trunk 3-13 (advertised with min 0, see api_versions)
    r(1, 4, 18), // Fetch: trunk 4-18
    r(2, 1, 10), // ListOffsets: trunk 1-11; the crate stops at 10
    r(3, 0, 13), // Metadata: trunk 0-13
    r(8, 2, 9),  // OffsetCommit: trunk 2-10; the crate's request struct stops at 9
    r(9, 1, 9),  // OffsetFetch: trunk 1-10; the crate's request struct stops at 9
    r(10, 0, 6), // FindCoordinator: trunk 0-6
    r(11, 0, 9), // JoinGroup: trunk 0-9 (v0-1 restored in 4.1 for old librdkafka)
    r(12, 0, 4), // Heartbeat: trunk 0-4
    r(13, 0, 5), // LeaveGroup: trunk 0-5
    r(14, 0, 5), // SyncGroup: trunk 0-5
    r(15, 0, 6), // DescribeGroups: trunk 0-6
    r(16, 0, 5), // ListGroups: trunk 0-5
    r(18, 0, 4), // ApiVersions: trunk 0-5; the crate stops at 4 (v5 is 4.4+ KIP-1242)
    r(19, 2, 7), // CreateTopics: trunk 2-7
    r(20, 1, 6), // DeleteTopics: trunk 1-6
    r(21, 0, 2), // DeleteRecords: trunk 0-2
    r(22, 0, 5), // InitProducerId: trunk 0-6; v6 (KIP-939 2PC) is unstable and the crate stops at 5
    r(24, 0, 5), // AddPartitionsToTxn: trunk 0-5 (v4+ are brokers' batched and verify-only form)
    r(25, 0, 4), // AddOffsetsToTxn: trunk 0-4
    r(26, 0, 5), // EndTxn: trunk 0-5
    r(28, 0, 5), // TxnOffsetCommit: trunk 0-5
    r(32, 1, 4), // DescribeConfigs: trunk 1-4
    r(33, 0, 2), // AlterConfigs: trunk 0-2
    r(37, 0, 3), // CreatePartitions: trunk 0-3
    r(42, 0, 2), // DeleteGroups: trunk 0-3; the crate stops at 2
    r(44, 0, 1), // IncrementalAlterConfigs: trunk 0-1
    r(47, 0, 0), // OffsetDelete: trunk 0
    r(60, 0, 2), // DescribeCluster: trunk 0-2
    r(65, 0, 0), // DescribeTransactions: trunk 0
    r(66, 0, 2), // ListTransactions: trunk 0-2
    r(68, 0, 1), // ConsumerGroupHeartbeat: trunk 0-1 (librdkafka needs v1)
    r(69, 0, 1), // ConsumerGroupDescribe: trunk 0-1
    // Keys added after this line go at the end rather than in key order: the fuzz targets pick
    // an API by its index here (`fuzz/src/served.rs`), so appending keeps every committed seed
    // of the keys above pointing at the same decoder. `Versions` sorts for ApiVersions.
    r(61, 0, 0), // DescribeProducers: trunk 0
    r(57, 0, 2), // UpdateFeatures: trunk 0-2 (transaction.version only, `engine::features`)
    r(50, 0, 0), // DescribeUserScramCredentials: trunk 0 (`engine::scram_store`)
    r(51, 0, 0), // AlterUserScramCredentials: trunk 0
    r(17, 0, 1), // SaslHandshake: trunk 0-1 (v0, raw tokens without Kafka headers, deprecated but served)
    r(36, 0, 2), // SaslAuthenticate: trunk 0-2
    r(29, 1, 3), // DescribeAcls: 4.x 1-3 (v0 removed by KIP-896)
    r(30, 1, 3), // CreateAcls: 4.x 1-3 (v0 removed by KIP-896)
    r(31, 1, 3), // DeleteAcls: 4.x 1-3 (v0 removed by KIP-896)
    r(48, 0, 1), // DescribeClientQuotas: trunk 0-1 (always no entries: no quotas are enforced)
    r(55, 0, 2), // DescribeQuorum: trunk 0-2 (a cluster's metadata log, `engine::api::describe_quorum`)
    r(81, 0, 0), // RemoveRaftVoter: trunk 0 (a cluster node's removal, `engine::api::remove_raft_voter`)
    r(80, 0, 0), // AddRaftVoter: trunk 0-1 (v1, 4.2, adds AckWhenCommitted); the crate stops at 0 (a node joining a cluster, `engine::api::add_raft_voter`)
    r(43, 0, 2), // ElectLeaders: trunk 0-2 (preferred leaders on a cluster, `engine::api::elect_leaders`)
    r(35, 1, 4), // DescribeLogDirs: 4.x 1-4 (v0 removed by KIP-896; the one data directory, `engine::api::describe_log_dirs`)
    r(45, 0, 1), // AlterPartitionReassignments: 4.x 0-1 (v1, 4.1 KIP-860, adds AllowReplicationFactorChange; the engine's handler follows)
    r(46, 0, 0), // ListPartitionReassignments: 4.x 0 (the engine's handler follows)
];

/// A lookup table of served versions, indexed by api key for O(1) checks on the hot path.
#[derive(Debug, Clone)]
pub struct Versions {
    by_key: Vec<Option<ApiRange>>,
    list: Vec<ApiRange>,
}

impl Default for Versions {
    fn default() -> Self {
        Self::new(SERVED)
    }
}

impl Versions {
    pub fn new(ranges: &[ApiRange]) -> Self {
        let top = ranges.iter().map(|r| r.api_key).max().unwrap_or(0).max(0) as usize;
        let mut by_key = vec![None; top + 1];
        for r in ranges {
            assert!(
                r.api_key >= 0 && r.min <= r.max,
                "bad version table entry {r:?}"
            );
            by_key[r.api_key as usize] = Some(*r);
        }
        let mut list = ranges.to_vec();
        list.sort_by_key(|r| r.api_key);
        Self { by_key, list }
    }

    pub fn get(&self, api_key: i16) -> Option<ApiRange> {
        usize::try_from(api_key)
            .ok()
            .and_then(|k| self.by_key.get(k).copied().flatten())
    }

    pub fn supports(&self, api_key: i16, version: i16) -> bool {
        self.get(api_key)
            .is_some_and(|r| (r.min..=r.max).contains(&version))
    }

    /// Every served range, sorted by key: the body of an ApiVersions response.
    pub fn list(&self) -> &[ApiRange] {
        &self.list
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ApiKey;

    #[test]
    fn served_versions_are_within_what_the_crate_can_encode() {
        // Guard against advertising a version the message structs would refuse (reference §7).
        for r in SERVED {
            let key = ApiKey::try_from(r.api_key).expect("known key");
            let crate_range = key.valid_versions();
            assert!(
                r.min >= crate_range.min && r.max <= crate_range.max,
                "{key:?}: {r:?} vs {crate_range:?}"
            );
        }
    }

    #[test]
    fn lookup() {
        let v = Versions::default();
        assert!(v.supports(18, 0));
        assert!(v.supports(3, 13));
        assert!(!v.supports(3, 14));
        assert!(!v.supports(-1, 0));
        assert!(!v.supports(9999, 0));
        assert!(
            !v.supports(0, 2),
            "Produce v0-2 are closed even though min 0 is advertised"
        );
        assert_eq!(v.list().first().map(|r| r.api_key), Some(0));
    }
}

//! The APIs loadgen sends, the versions it implements, and version negotiation with a broker.

use kafka_protocol::messages::ApiVersionsResponse;
use serde::Serialize;
use std::collections::BTreeMap;

/// An API loadgen sends and measures. The discriminant indexes per-API statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[repr(u8)]
pub enum Api {
    Heartbeat = 0,
    JoinGroup = 1,
    SyncGroup = 2,
    OffsetCommit = 3,
    OffsetFetch = 4,
    LeaveGroup = 5,
    ConsumerGroupHeartbeat = 6,
    FindCoordinator = 7,
    Metadata = 8,
    CreateTopics = 9,
    ApiVersions = 10,
}

/// How many `Api` values exist (array sizes).
pub const API_COUNT: usize = 11;

impl Api {
    pub const ALL: [Api; API_COUNT] = [
        Api::Heartbeat,
        Api::JoinGroup,
        Api::SyncGroup,
        Api::OffsetCommit,
        Api::OffsetFetch,
        Api::LeaveGroup,
        Api::ConsumerGroupHeartbeat,
        Api::FindCoordinator,
        Api::Metadata,
        Api::CreateTopics,
        Api::ApiVersions,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Api::Heartbeat => "Heartbeat",
            Api::JoinGroup => "JoinGroup",
            Api::SyncGroup => "SyncGroup",
            Api::OffsetCommit => "OffsetCommit",
            Api::OffsetFetch => "OffsetFetch",
            Api::LeaveGroup => "LeaveGroup",
            Api::ConsumerGroupHeartbeat => "ConsumerGroupHeartbeat",
            Api::FindCoordinator => "FindCoordinator",
            Api::Metadata => "Metadata",
            Api::CreateTopics => "CreateTopics",
            Api::ApiVersions => "ApiVersions",
        }
    }

    pub fn from_name(name: &str) -> Option<Api> {
        Api::ALL
            .iter()
            .copied()
            .find(|a| a.name().eq_ignore_ascii_case(name))
    }

    /// The Kafka api key.
    pub fn key(self) -> i16 {
        match self {
            Api::Heartbeat => 12,
            Api::JoinGroup => 11,
            Api::SyncGroup => 14,
            Api::OffsetCommit => 8,
            Api::OffsetFetch => 9,
            Api::LeaveGroup => 13,
            Api::ConsumerGroupHeartbeat => 68,
            Api::FindCoordinator => 10,
            Api::Metadata => 3,
            Api::CreateTopics => 19,
            Api::ApiVersions => 18,
        }
    }

    pub fn from_key(key: i16) -> Option<Api> {
        Api::ALL.iter().copied().find(|a| a.key() == key)
    }

    /// The versions loadgen can build requests for (min, max). The maxima stay within what the
    /// `kafka-protocol` 0.18 request structs encode (reference §7).
    pub fn implemented(self) -> (i16, i16) {
        match self {
            Api::Heartbeat => (0, 4),
            Api::JoinGroup => (0, 9),
            Api::SyncGroup => (0, 5),
            Api::OffsetCommit => (2, 9),
            Api::OffsetFetch => (1, 9),
            Api::LeaveGroup => (0, 5),
            Api::ConsumerGroupHeartbeat => (0, 1),
            Api::FindCoordinator => (0, 6),
            Api::Metadata => (1, 12),
            Api::CreateTopics => (2, 7),
            Api::ApiVersions => (0, 3),
        }
    }

    /// The file-name stem of this API's `.hgrm` report.
    pub fn file_stem(self) -> String {
        self.name().to_ascii_lowercase()
    }
}

/// The version chosen for each API: the highest that both loadgen and the broker support,
/// optionally capped by the user. `None` = the broker does not serve a version we implement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    by_api: [Option<i16>; API_COUNT],
}

impl Versions {
    /// Every API at its highest implemented version (for tests and for brokers that are not
    /// asked).
    pub fn max_implemented() -> Self {
        let mut by_api = [None; API_COUNT];
        for a in Api::ALL {
            by_api[a.index()] = Some(a.implemented().1);
        }
        Versions { by_api }
    }

    /// All APIs at fixed versions (tests).
    pub fn with(mut self, api: Api, version: i16) -> Self {
        self.by_api[api.index()] = Some(version);
        self
    }

    /// Intersect our ranges with the broker's ApiVersions answer and the user's caps.
    pub fn negotiate(broker: &ApiVersionsResponse, caps: &[(String, i16)]) -> Self {
        let mut by_api = [None; API_COUNT];
        for a in Api::ALL {
            let (our_min, our_max) = a.implemented();
            let Some(b) = broker.api_keys.iter().find(|k| k.api_key == a.key()) else {
                continue;
            };
            let mut max = our_max.min(b.max_version);
            for (name, cap) in caps {
                if Api::from_name(name) == Some(a) {
                    max = max.min(*cap);
                }
            }
            let min = our_min.max(b.min_version);
            if min <= max {
                by_api[a.index()] = Some(max);
            }
        }
        Versions { by_api }
    }

    pub fn get(&self, api: Api) -> Option<i16> {
        self.by_api[api.index()]
    }

    /// The version for an API the caller has already checked is available.
    pub fn v(&self, api: Api) -> i16 {
        self.by_api[api.index()].unwrap_or(api.implemented().1)
    }

    /// For the summary: API name → version used.
    pub fn table(&self) -> BTreeMap<&'static str, i16> {
        Api::ALL
            .iter()
            .filter_map(|a| self.get(*a).map(|v| (a.name(), v)))
            .collect()
    }

    /// The APIs a classic member needs; returns the first missing one.
    pub fn check_classic(&self) -> Result<(), Api> {
        for a in [
            Api::FindCoordinator,
            Api::JoinGroup,
            Api::SyncGroup,
            Api::Heartbeat,
            Api::LeaveGroup,
            Api::OffsetCommit,
            Api::OffsetFetch,
            Api::Metadata,
        ] {
            if self.get(a).is_none() {
                return Err(a);
            }
        }
        Ok(())
    }
}

impl Versions {
    /// The APIs (and minimum versions) a KIP-848 member needs; returns what is missing.
    /// ConsumerGroupHeartbeat names topics by id, so Metadata must be v10+ to learn them;
    /// a consumer-protocol member's OffsetCommit/OffsetFetch carry its epoch (v9+).
    pub fn check_consumer(&self) -> Result<(), String> {
        for (a, min) in [
            (Api::FindCoordinator, 0),
            (Api::ConsumerGroupHeartbeat, 0),
            (Api::Metadata, 10),
            (Api::OffsetCommit, 9),
            (Api::OffsetFetch, 9),
        ] {
            match self.get(a) {
                Some(v) if v >= min => {}
                Some(v) => {
                    return Err(format!(
                        "{} v{v} is the highest usable version; --protocol consumer needs v{min}+",
                        a.name()
                    ))
                }
                None => {
                    return Err(format!(
                        "the broker serves no {} version loadgen implements ({}-{})",
                        a.name(),
                        a.implemented().0,
                        a.implemented().1
                    ))
                }
            }
        }
        Ok(())
    }
}

/// A readable name for an error code, e.g. `REBALANCE_IN_PROGRESS(27)`.
pub fn error_name(code: i16) -> String {
    match code {
        0 => "NONE(0)".to_string(),
        c if c < 0 => format!("CLIENT_{}", client_error_name(c)),
        c => match kafka_protocol::error::ResponseError::try_from_code(c) {
            Some(kafka_protocol::error::ResponseError::Unknown(_)) | None => {
                format!("UNKNOWN({c})")
            }
            Some(e) => format!("{}({c})", screaming_snake(&format!("{e:?}"))),
        },
    }
}

/// Negative codes are loadgen's own failure kinds (never sent by a broker). They are not Kafka
/// error codes: they sit below Kafka's range (whose only negative code is UNKNOWN_SERVER_ERROR,
/// -1), so `kafka_protocol::ResponseError` has no variant for any of them and
/// `ResponseError::try_from_code` would call them `Unknown`.
pub mod client_error {
    /// The connection closed (or failed) with the request in flight.
    pub const DISCONNECTED: i16 = -100;
    /// The request waited longer than its timeout; the connection was closed.
    pub const TIMEOUT: i16 = -101;
    /// The response could not be decoded, or its correlation id was unknown.
    pub const BAD_RESPONSE: i16 = -102;
    /// The request could not be encoded at the negotiated version.
    pub const ENCODE: i16 = -103;
}

fn client_error_name(code: i16) -> String {
    match code {
        client_error::DISCONNECTED => "DISCONNECTED".into(),
        client_error::TIMEOUT => "TIMEOUT".into(),
        client_error::BAD_RESPONSE => "BAD_RESPONSE".into(),
        client_error::ENCODE => "ENCODE".into(),
        c => format!("ERROR({c})"),
    }
}

fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::ResponseError;

    fn broker(ranges: &[(i16, i16, i16)]) -> ApiVersionsResponse {
        let mut r = ApiVersionsResponse::default();
        for &(k, min, max) in ranges {
            r.api_keys.push(
                ApiVersion::default()
                    .with_api_key(k)
                    .with_min_version(min)
                    .with_max_version(max),
            );
        }
        r
    }

    #[test]
    fn negotiates_the_highest_common_version() {
        let b = broker(&[(11, 0, 9), (12, 0, 3), (8, 2, 10), (9, 0, 10), (13, 6, 7)]);
        let v = Versions::negotiate(&b, &[("JoinGroup".into(), 5)]);
        assert_eq!(v.get(Api::JoinGroup), Some(5)); // capped by the user
        assert_eq!(v.get(Api::Heartbeat), Some(3)); // broker max
        assert_eq!(v.get(Api::OffsetCommit), Some(9)); // our max (crate stops at 9)
        assert_eq!(v.get(Api::OffsetFetch), Some(9));
        assert_eq!(v.get(Api::LeaveGroup), None); // no overlap
        assert_eq!(v.get(Api::SyncGroup), None); // not advertised
        assert_eq!(v.check_classic(), Err(Api::FindCoordinator));
    }

    #[test]
    fn error_names() {
        assert_eq!(
            error_name(ResponseError::RebalanceInProgress.code()),
            "REBALANCE_IN_PROGRESS(27)"
        );
        assert_eq!(
            error_name(ResponseError::MemberIdRequired.code()),
            "MEMBER_ID_REQUIRED(79)"
        );
        assert_eq!(error_name(0), "NONE(0)");
        assert_eq!(error_name(client_error::TIMEOUT), "CLIENT_TIMEOUT");
        assert_eq!(error_name(9999), "UNKNOWN(9999)");
    }

    #[test]
    fn api_names_and_keys_round_trip() {
        for a in Api::ALL {
            assert_eq!(Api::from_name(a.name()), Some(a));
            assert_eq!(Api::from_key(a.key()), Some(a));
            assert_eq!(Api::ALL[a.index()], a);
        }
    }
}

//! Micro and macro benchmarks for Ringleader (see the `benches/` targets).
//!
//! This library holds what the targets share: request/response fixtures for the codec benchmarks,
//! an allocation-counting global allocator, and the OffsetCommit records the storage benchmarks
//! replay.

pub mod counting_alloc {
    //! A `GlobalAlloc` that counts calls, so a benchmark can report allocations per operation.
    //! Install it with `#[global_allocator] static A: CountingAlloc = CountingAlloc;`.

    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    static ALLOCS: AtomicU64 = AtomicU64::new(0);
    static BYTES: AtomicU64 = AtomicU64::new(0);

    /// Counts `alloc`, `alloc_zeroed` and `realloc` calls (and the bytes they ask for), then
    /// forwards to the system allocator.
    #[derive(Debug, Default)]
    pub struct CountingAlloc;

    // SAFETY: every call is forwarded unchanged to `System`, which upholds the GlobalAlloc
    // contract; the counters have no effect on the memory handed out.
    unsafe impl GlobalAlloc for CountingAlloc {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            ALLOCS.fetch_add(1, Relaxed);
            BYTES.fetch_add(layout.size() as u64, Relaxed);
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            ALLOCS.fetch_add(1, Relaxed);
            BYTES.fetch_add(layout.size() as u64, Relaxed);
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from `System` with this layout (every path above forwards).
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            ALLOCS.fetch_add(1, Relaxed);
            BYTES.fetch_add(new_size as u64, Relaxed);
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    /// (allocation calls, bytes requested) so far, process-wide.
    pub fn snapshot() -> (u64, u64) {
        (ALLOCS.load(Relaxed), BYTES.load(Relaxed))
    }

    /// Run `f` `iters` times and return (allocations, bytes) per call. Only meaningful when
    /// `CountingAlloc` is the global allocator and no other thread is allocating.
    pub fn per_op(iters: u64, mut f: impl FnMut()) -> (f64, f64) {
        f(); // warm up: lazily initialised state is not a per-op cost
        let (a0, b0) = snapshot();
        for _ in 0..iters {
            f();
        }
        let (a1, b1) = snapshot();
        (
            (a1 - a0) as f64 / iters as f64,
            (b1 - b0) as f64 / iters as f64,
        )
    }
}

pub mod codec_fixtures {
    //! The group-coordinator requests that dominate a steady consumer group's traffic, as real
    //! clients send them, with the responses a broker would write back.

    use bytes::{Bytes, BytesMut};
    use wire::codec::encode_request;
    use wire::kafka_protocol::messages::*;
    use wire::kafka_protocol::protocol::StrBytes;
    use wire::{ApiRange, Request, RequestHeader, Response, Versions};

    /// One benchmark subject.
    #[derive(Debug)]
    pub struct Case {
        pub name: &'static str,
        pub api_key: i16,
        pub version: i16,
        pub correlation_id: i32,
        /// The request frame as read off the socket (length prefix already removed).
        pub frame: Bytes,
        /// What `frame` decodes to.
        pub request: Request,
        /// The response a broker would send (what `respond(&request)` builds).
        pub response: Response,
        /// Build the response from a decoded request, as a handler would.
        pub respond: fn(&Request) -> Response,
    }

    /// The versions the benchmarks decode with: the served table plus the group APIs.
    pub fn versions() -> Versions {
        let mut ranges = wire::versions::SERVED.to_vec();
        ranges.extend([
            ApiRange {
                api_key: 8,
                min: 2,
                max: 9,
            },
            ApiRange {
                api_key: 12,
                min: 0,
                max: 4,
            },
            ApiRange {
                api_key: 68,
                min: 0,
                max: 1,
            },
        ]);
        Versions::new(&ranges)
    }

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.to_owned())
    }

    const MEMBER_ID: &str = "Qk9ZcW1uT2Z4aUJ1dG9rZQ"; // 22 chars, librdkafka-style
    const ORDERS_ID: [u8; 16] = [
        0x7d, 0x3c, 0x8a, 0x1e, 0x52, 0xb4, 0x4f, 0x6e, 0x9a, 0x0d, 0x1c, 0x2b, 0x3e, 0x4f, 0x5a,
        0x6b,
    ];
    const PAYMENTS_ID: [u8; 16] = [
        0x21, 0x6f, 0x0e, 0x94, 0x3c, 0x5d, 0x47, 0x18, 0xb1, 0x22, 0x9e, 0x4a, 0x70, 0x01, 0xc3,
        0xd5,
    ];

    fn case(
        name: &'static str,
        version: i16,
        request: Request,
        respond: fn(&Request) -> Response,
    ) -> Case {
        let header = RequestHeader {
            api_key: request.api_key(),
            api_version: version,
            correlation_id: 4711,
            client_id: Some("rdkafka".into()),
        };
        let mut buf = BytesMut::new();
        encode_request(&header, &request, &mut buf).expect("fixture encodes");
        let frame = buf.split_off(4).freeze();
        let response = respond(&request);
        Case {
            name,
            api_key: header.api_key,
            version,
            correlation_id: header.correlation_id,
            frame,
            request,
            response,
            respond,
        }
    }

    /// Classic-protocol Heartbeat v4 (flexible) from a static-less member.
    pub fn heartbeat_v4() -> Case {
        let req = HeartbeatRequest::default()
            .with_group_id(GroupId(s("g-classic")))
            .with_generation_id(3)
            .with_member_id(s("rdkafka-5f0c1b7e-8d2a-4c39-9a61-3e0f2b1c4d5e"))
            .with_group_instance_id(None);
        case("heartbeat_v4", 4, Request::Heartbeat(req), |_| {
            Response::Heartbeat(
                HeartbeatResponse::default()
                    .with_throttle_time_ms(0)
                    .with_error_code(0),
            )
        })
    }

    /// KIP-848 ConsumerGroupHeartbeat v1 with a full subscription and two owned topics (what a
    /// member sends when it (re)joins or after a metadata change).
    pub fn consumer_group_heartbeat_v1() -> Case {
        use consumer_group_heartbeat_request::TopicPartitions;
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s("g-consumer")))
            .with_member_id(s(MEMBER_ID))
            .with_member_epoch(5)
            .with_instance_id(None)
            .with_rack_id(None)
            .with_rebalance_timeout_ms(300_000)
            .with_subscribed_topic_names(Some(vec![
                TopicName(s("orders")),
                TopicName(s("payments")),
            ]))
            .with_subscribed_topic_regex(None)
            .with_server_assignor(None)
            .with_topic_partitions(Some(vec![
                TopicPartitions::default()
                    .with_topic_id(uuid::Uuid::from_bytes(ORDERS_ID))
                    .with_partitions(vec![0, 1, 2]),
                TopicPartitions::default()
                    .with_topic_id(uuid::Uuid::from_bytes(PAYMENTS_ID))
                    .with_partitions(vec![0, 1]),
            ]));
        case(
            "consumer_group_heartbeat_v1",
            1,
            Request::ConsumerGroupHeartbeat(req),
            |req| {
                use consumer_group_heartbeat_response::{Assignment, TopicPartitions};
                let Request::ConsumerGroupHeartbeat(req) = req else {
                    unreachable!()
                };
                // Steady state: the member keeps what it owns.
                let owned = req
                    .topic_partitions
                    .iter()
                    .flatten()
                    .map(|tp| {
                        TopicPartitions::default()
                            .with_topic_id(tp.topic_id)
                            .with_partitions(tp.partitions.clone())
                    })
                    .collect();
                Response::ConsumerGroupHeartbeat(
                    ConsumerGroupHeartbeatResponse::default()
                        .with_error_code(0)
                        .with_member_id(Some(req.member_id.clone()))
                        .with_member_epoch(req.member_epoch)
                        .with_heartbeat_interval_ms(5_000)
                        .with_assignment(Some(Assignment::default().with_topic_partitions(owned))),
                )
            },
        )
    }

    /// OffsetCommit v9 from a KIP-848 member: one topic, 10 partitions.
    pub fn offset_commit_v9_10p() -> Case {
        use offset_commit_request::*;
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(s("g-consumer")))
            .with_generation_id_or_member_epoch(5)
            .with_member_id(s(MEMBER_ID))
            .with_group_instance_id(None)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("orders")))
                .with_partitions(
                    (0..10)
                        .map(|p| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(1_000_000 + i64::from(p) * 997)
                                .with_committed_leader_epoch(2)
                                .with_committed_metadata(Some(s("")))
                        })
                        .collect(),
                )]);
        case(
            "offset_commit_v9_10p",
            9,
            Request::OffsetCommit(req),
            |req| {
                use offset_commit_response::*;
                let Request::OffsetCommit(req) = req else {
                    unreachable!()
                };
                let topics = req
                    .topics
                    .iter()
                    .map(|t| {
                        OffsetCommitResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        OffsetCommitResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(0)
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                Response::OffsetCommit(OffsetCommitResponse::default().with_topics(topics))
            },
        )
    }

    pub fn all() -> Vec<Case> {
        vec![
            heartbeat_v4(),
            consumer_group_heartbeat_v1(),
            offset_commit_v9_10p(),
        ]
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn fixtures_decode_to_themselves_and_responses_encode() {
            let versions = versions();
            for c in all() {
                let (h, req) = wire::decode_request(&c.frame, &versions).unwrap();
                assert_eq!(h.api_key, c.api_key);
                assert_eq!(req, c.request, "{}", c.name);
                assert_eq!((c.respond)(&req), c.response);
                let mut out = BytesMut::new();
                wire::encode_response(c.correlation_id, c.version, &c.response, &mut out).unwrap();
                let (cid, back) =
                    wire::codec::decode_response(c.api_key, c.version, &out.split_off(4).freeze())
                        .unwrap();
                assert_eq!(cid, c.correlation_id);
                assert_eq!(back, c.response, "{}", c.name);
            }
        }
    }
}

pub mod cpu_time {
    //! CPU time of the calling thread. On a shared machine the wall time of a CPU-bound loop
    //! also counts the time other processes held the core; the thread's CPU time (user +
    //! system) does not, so a rate per CPU second is what "per core" means when the machine is
    //! busy. Report it beside the wall-clock rate, never instead of it.

    /// Seconds of CPU this thread has used so far (`CLOCK_THREAD_CPUTIME_ID`).
    pub fn thread_seconds() -> f64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
        ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
    }
}

pub mod offset_commits {
    //! The `__consumer_offsets` records of the storage benchmarks: commit `i` of 1,000 groups ×
    //! 64 partitions of one topic (8,000 distinct keys), as (key, value) bytes.

    use wire::records::{OffsetCommitValue, Record, RecordKey, RecordValue};

    pub fn commit_record(i: u64) -> (Vec<u8>, Vec<u8>) {
        let r = Record {
            key: RecordKey::OffsetCommit {
                group: format!("group-{}", i % 1000),
                topic: "orders".into(),
                partition: (i % 64) as i32,
            },
            value: Some(RecordValue::OffsetCommit(OffsetCommitValue {
                offset: i as i64,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: 1_700_000_000_000 + i as i64,
                expire_timestamp: -1,
                topic_id: Default::default(),
            })),
        };
        (r.encode_key().unwrap(), r.encode_value().unwrap().unwrap())
    }

    /// Records `from..to` as (key, value) references, the shape `PartitionLog::append` and
    /// `encode_batch` take.
    pub fn refs(records: &[(Vec<u8>, Vec<u8>)]) -> Vec<(Option<&[u8]>, Option<&[u8]>)> {
        records
            .iter()
            .map(|(k, v)| (Some(k.as_slice()), Some(v.as_slice())))
            .collect()
    }
}

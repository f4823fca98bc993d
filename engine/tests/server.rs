//! The real server (all shards, real sockets) driven by a blocking client speaking through `wire`.

use bytes::{Bytes, BytesMut};
use engine::config::Config;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use wire::codec::{decode_response, encode_request};
use wire::{Request, RequestHeader, Response};

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<std::alloc::System> =
    wire::alloc::GuardedAlloc(std::alloc::System);

struct TestServer {
    handle: Option<engine::runtime::server::ServerHandle>,
    addr: SocketAddr,
    dir: std::path::PathBuf,
}

impl TestServer {
    fn start(tag: &str, cores: usize, sets: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!("rl-it-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Self::start_in(dir, cores, sets)
    }

    fn start_in(dir: std::path::PathBuf, cores: usize, sets: &[&str]) -> Self {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let config = Config::load(None, &sets).unwrap();
        let addr =
            engine::runtime::server::probe_listen_addr("127.0.0.1:0".parse().unwrap()).unwrap();
        let broker = engine::open_broker(config, &dir, addr).unwrap();
        let handle = engine::start(broker, addr, cores).unwrap();
        Self {
            handle: Some(handle),
            addr,
            dir,
        }
    }

    fn stop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
            h.join().unwrap();
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

struct Client {
    sock: TcpStream,
    next_cid: i32,
}

impl Client {
    fn connect(addr: SocketAddr) -> Self {
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Self { sock, next_cid: 1 }
    }

    fn frame(&mut self, version: i16, req: &Request) -> (i32, BytesMut) {
        let cid = self.next_cid;
        self.next_cid += 1;
        let header = RequestHeader {
            api_key: req.api_key(),
            api_version: version,
            correlation_id: cid,
            client_id: Some("it".into()),
        };
        let mut buf = BytesMut::new();
        encode_request(&header, req, &mut buf).unwrap();
        (cid, buf)
    }

    fn read_frame(&mut self) -> Option<Bytes> {
        let mut len = [0u8; 4];
        self.sock.read_exact(&mut len).ok()?;
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        self.sock.read_exact(&mut body).ok()?;
        Some(Bytes::from(body))
    }

    fn call(&mut self, version: i16, req: Request) -> Response {
        let (cid, buf) = self.frame(version, &req);
        self.sock.write_all(&buf).unwrap();
        let frame = self.read_frame().expect("response");
        let (got, resp) = decode_response(req.api_key(), version, &frame).unwrap();
        assert_eq!(got, cid);
        resp
    }

    /// True when the server closed the connection (read returns EOF or reset).
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.sock.read(&mut b), Ok(0) | Err(_))
    }
}

fn topic_req(name: &str) -> metadata_request::MetadataRequestTopic {
    metadata_request::MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.into()))))
}

fn create(name: &str, partitions: i32, rf: i16) -> Request {
    Request::CreateTopics(CreateTopicsRequest::default().with_topics(
        vec![create_topics_request::CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.into())))
        .with_num_partitions(partitions)
        .with_replication_factor(rf)],
    ))
}

#[test]
fn api_versions_every_version_and_the_too_new_fallback() {
    let server = TestServer::start("apiv", 2, &[]);
    let mut c = Client::connect(server.addr);
    for v in 0..=4 {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("it"))
            .with_client_software_version(StrBytes::from_static_str("1.0"));
        let Response::ApiVersions(r) = c.call(v, Request::ApiVersions(req)) else {
            panic!()
        };
        assert_eq!(r.error_code, 0);
        let keys: Vec<i16> = r.api_keys.iter().map(|k| k.api_key).collect();
        assert_eq!(
            keys,
            wire::versions::SERVED
                .iter()
                .map(|r| r.api_key)
                .collect::<Vec<_>>()
                .tap_sorted()
        );
    }
    // Version 9: answered as v0 with UNSUPPORTED_VERSION and only ApiVersions' own range.
    let (cid, mut buf) = c.frame(0, &Request::ApiVersions(Default::default()));
    buf[4 + 2..4 + 4].copy_from_slice(&9i16.to_be_bytes());
    c.sock.write_all(&buf).unwrap();
    let frame = c.read_frame().unwrap();
    let (got, Response::ApiVersions(r)) = decode_response(18, 0, &frame).unwrap() else {
        panic!()
    };
    assert_eq!(got, cid);
    assert_eq!(r.error_code, 35);
    assert_eq!(r.api_keys.len(), 1);
    assert_eq!(
        (
            r.api_keys[0].api_key,
            r.api_keys[0].min_version,
            r.api_keys[0].max_version
        ),
        (18, 0, 4)
    );
}

trait TapSorted {
    fn tap_sorted(self) -> Self;
}
impl TapSorted for Vec<i16> {
    fn tap_sorted(mut self) -> Self {
        self.sort();
        self
    }
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = TestServer::start("pipe", 2, &[]);
    let mut c = Client::connect(server.addr);
    // Mix slow (topic creation fsyncs) and fast requests in one write.
    let mut all = BytesMut::new();
    let mut expected = Vec::new();
    for i in 0..40 {
        let req = if i % 5 == 0 {
            create(&format!("pipe-{i}"), 1, 1)
        } else {
            Request::Metadata(MetadataRequest::default())
        };
        let (cid, buf) = c.frame(if i % 5 == 0 { 7 } else { 12 }, &req);
        expected.push((cid, req.api_key(), if i % 5 == 0 { 7 } else { 12 }));
        all.extend_from_slice(&buf);
    }
    c.sock.write_all(&all).unwrap();
    for (cid, key, version) in expected {
        let frame = c.read_frame().unwrap();
        let (got, resp) = decode_response(key, version, &frame).unwrap();
        assert_eq!(got, cid, "responses out of order");
        if let Response::CreateTopics(r) = resp {
            assert_eq!(r.topics[0].error_code, 0);
        }
    }
}

#[test]
fn topics_lifecycle_and_errors() {
    let mut server = TestServer::start("topics", 2, &[]);
    let mut c = Client::connect(server.addr);
    let Response::CreateTopics(r) = c.call(7, create("orders", 6, 1)) else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    assert_eq!(r.topics[0].num_partitions, 6);
    let id = r.topics[0].topic_id;
    assert!(!id.is_nil());
    let Response::CreateTopics(r) = c.call(7, create("orders", 6, 1)) else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 36);
    let Response::CreateTopics(r) = c.call(7, create("rf2", 1, 2)) else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 38);
    let Response::CreateTopics(r) = c.call(7, create("bad name!", 1, 1)) else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 17);
    let Response::CreateTopics(r) = c.call(2, create("zero", 0, 1)) else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 37);

    // Metadata by name and by id; internal topic flagged.
    let Response::Metadata(m) = c.call(
        12,
        Request::Metadata(MetadataRequest::default().with_topics(Some(vec![topic_req("orders")]))),
    ) else {
        panic!()
    };
    assert_eq!(m.topics.len(), 1);
    assert_eq!(m.topics[0].partitions.len(), 6);
    assert_eq!(m.topics[0].topic_id, id);
    assert_eq!(m.brokers[0].port, server.addr.port() as i32);
    let by_id = metadata_request::MetadataRequestTopic::default().with_topic_id(id);
    let Response::Metadata(m) = c.call(
        12,
        Request::Metadata(MetadataRequest::default().with_topics(Some(vec![by_id]))),
    ) else {
        panic!()
    };
    assert_eq!(
        m.topics[0]
            .name
            .as_ref()
            .map(|n| n.0.to_string())
            .as_deref(),
        Some("orders")
    );
    let Response::Metadata(all) = c.call(
        1,
        Request::Metadata(MetadataRequest::default().with_topics(None)),
    ) else {
        panic!()
    };
    let offsets = all
        .topics
        .iter()
        .find(|t| t.name.as_ref().unwrap().0.as_str() == "__consumer_offsets")
        .unwrap();
    assert!(offsets.is_internal);
    assert_eq!(offsets.partitions.len(), 50);

    // Restart: same id.
    let dir = server.dir.clone();
    server.stop();
    let server2 = TestServer::start_in(dir, 2, &[]);
    let mut c = Client::connect(server2.addr);
    let Response::Metadata(m) = c.call(
        12,
        Request::Metadata(MetadataRequest::default().with_topics(Some(vec![topic_req("orders")]))),
    ) else {
        panic!()
    };
    assert_eq!(m.topics[0].topic_id, id);

    // Delete, then it is gone; the internal topic cannot be deleted.
    let del = DeleteTopicsRequest::default().with_topic_names(vec![
        TopicName(StrBytes::from_static_str("orders")),
        TopicName(StrBytes::from_static_str("__consumer_offsets")),
    ]);
    let Response::DeleteTopics(d) = c.call(5, Request::DeleteTopics(del)) else {
        panic!()
    };
    assert_eq!(d.responses[0].error_code, 0);
    assert_eq!(d.responses[1].error_code, 42);
    let Response::Metadata(m) = c.call(
        12,
        Request::Metadata(
            MetadataRequest::default()
                .with_topics(Some(vec![topic_req("orders")]))
                .with_allow_auto_topic_creation(false),
        ),
    ) else {
        panic!()
    };
    assert_eq!(m.topics[0].error_code, 3);
}

#[test]
fn auto_creation_follows_config_and_request_flag() {
    let server = TestServer::start("auto", 1, &["num.partitions=3"]);
    let mut c = Client::connect(server.addr);
    let req = |allow| {
        Request::Metadata(
            MetadataRequest::default()
                .with_topics(Some(vec![topic_req("auto-t")]))
                .with_allow_auto_topic_creation(allow),
        )
    };
    let Response::Metadata(m) = c.call(12, req(false)) else {
        panic!()
    };
    assert_eq!(m.topics[0].error_code, 3);
    let Response::Metadata(m) = c.call(12, req(true)) else {
        panic!()
    };
    assert_eq!(m.topics[0].error_code, 0);
    assert_eq!(m.topics[0].partitions.len(), 3);
    drop(server);

    let server = TestServer::start("noauto", 1, &["auto.create.topics.enable=false"]);
    let mut c = Client::connect(server.addr);
    let Response::Metadata(m) = c.call(12, req(true)) else {
        panic!()
    };
    assert_eq!(m.topics[0].error_code, 3);
}

#[test]
fn find_coordinator_single_and_batched() {
    let server = TestServer::start("fc", 2, &[]);
    let mut c = Client::connect(server.addr);
    let Response::FindCoordinator(r) = c.call(
        2,
        Request::FindCoordinator(
            FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g1")),
        ),
    ) else {
        panic!()
    };
    assert_eq!(
        (r.error_code, r.node_id.0, r.port),
        (0, 1, server.addr.port() as i32)
    );
    let req = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![StrBytes::from_static_str("txn-a")]);
    let Response::FindCoordinator(r) = c.call(4, Request::FindCoordinator(req)) else {
        panic!()
    };
    assert_eq!(r.coordinators[0].error_code, 15);
    let req = FindCoordinatorRequest::default().with_coordinator_keys(vec![
        StrBytes::from_static_str("a"),
        StrBytes::from_static_str("b"),
    ]);
    let Response::FindCoordinator(r) = c.call(6, Request::FindCoordinator(req)) else {
        panic!()
    };
    assert_eq!(r.coordinators.len(), 2);
    assert!(r
        .coordinators
        .iter()
        .all(|c| c.error_code == 0 && c.node_id.0 == 1));
}

#[test]
fn bad_input_closes_only_that_connection() {
    let server = TestServer::start("garbage", 2, &["socket.request.max.bytes=1048576"]);
    let cases: Vec<Vec<u8>> = vec![
        (-5i32).to_be_bytes().to_vec(),                   // negative length
        (100_000_000i32).to_be_bytes().to_vec(),          // above socket.request.max.bytes
        [&12i32.to_be_bytes()[..], &[0xff; 12]].concat(), // unknown api key -1
        {
            // Metadata v99
            let mut v = 10i32.to_be_bytes().to_vec();
            v.extend_from_slice(&[0, 3, 0, 99, 0, 0, 0, 1, 0xff, 0xff]);
            v
        },
        {
            // CreateTopics v2 whose topics array claims i32::MAX entries.
            let mut v = 14i32.to_be_bytes().to_vec();
            v.extend_from_slice(&[0, 19, 0, 2, 0, 0, 0, 1, 0xff, 0xff]);
            v.extend_from_slice(&i32::MAX.to_be_bytes());
            v
        },
        {
            // Metadata v1 with a string length pointing past the frame.
            let mut v = 20i32.to_be_bytes().to_vec();
            v.extend_from_slice(&[
                0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 1, 0x7f, 0xff, b'a', b'b', b'c', b'd',
            ]);
            v
        },
        {
            // A client id claiming more bytes than the frame holds.
            let mut v = 10i32.to_be_bytes().to_vec();
            v.extend_from_slice(&[0, 18, 0, 0, 0, 0, 0, 1, 0x10, 0x00]);
            v
        },
    ];
    for (i, bytes) in cases.iter().enumerate() {
        let mut c = Client::connect(server.addr);
        c.sock.write_all(bytes).unwrap();
        assert!(c.closed(), "case {i} did not close the connection");
    }
    // A truncated frame, then the client goes away.
    let mut c = Client::connect(server.addr);
    c.sock.write_all(&[0, 0, 0, 50, 0, 3]).unwrap();
    drop(c);
    // The server still serves.
    let mut c = Client::connect(server.addr);
    let Response::Metadata(m) = c.call(
        12,
        Request::Metadata(MetadataRequest::default().with_topics(None)),
    ) else {
        panic!()
    };
    assert_eq!(m.brokers.len(), 1);
}

#[test]
fn config_describe_and_cluster() {
    let server = TestServer::start("cfg", 1, &["group.max.size=10"]);
    let mut c = Client::connect(server.addr);
    let res = describe_configs_request::DescribeConfigsResource::default()
        .with_resource_type(4)
        .with_resource_name(StrBytes::from_static_str("1"))
        .with_configuration_keys(Some(vec![
            StrBytes::from_static_str("group.max.size"),
            StrBytes::from_static_str("num.partitions"),
        ]));
    let Response::DescribeConfigs(r) = c.call(
        4,
        Request::DescribeConfigs(DescribeConfigsRequest::default().with_resources(vec![res])),
    ) else {
        panic!()
    };
    let got: Vec<(String, Option<String>, i8)> = r.results[0]
        .configs
        .iter()
        .map(|e| {
            (
                e.name.to_string(),
                e.value.as_ref().map(|v| v.to_string()),
                e.config_source,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("group.max.size".into(), Some("10".into()), 4),
            ("num.partitions".into(), Some("1".into()), 5)
        ]
    );
    let Response::DescribeCluster(d) = c.call(
        1,
        Request::DescribeCluster(DescribeClusterRequest::default().with_endpoint_type(1)),
    ) else {
        panic!()
    };
    assert_eq!(d.brokers.len(), 1);
    assert_eq!(d.controller_id.0, 1);
    assert_eq!(d.cluster_id.len(), 22);
}

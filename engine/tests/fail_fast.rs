//! A panic on one shard ends the whole process with a clear log line and a non-zero exit code,
//! instead of leaving the other shards serving while calls into the dead one hang.

#[allow(dead_code)]
mod common;

use kafka_protocol::messages::*;
use std::time::{Duration, Instant};

#[test]
fn a_panic_on_a_shard_stops_the_process_with_exit_code_101() {
    // The group's partition lives on some shard; with two shards a describe from one connection
    // reaches it locally or across shards — either way the panic must end the process.
    std::env::set_var("RINGLEADER_FAILPOINT_PANIC_ON_DESCRIBE", "doomed");
    let dir = common::data_dir("fail-fast");
    let mut broker = common::Broker::start(&dir, &["group.initial.rebalance.delay.ms=0"]);
    std::env::remove_var("RINGLEADER_FAILPOINT_PANIC_ON_DESCRIBE");
    let mut c = common::Client::connect(broker.addr);
    // Another group answers first: the broker is healthy.
    let ok = c.call(
        5,
        wire::Request::DescribeGroups(
            DescribeGroupsRequest::default().with_groups(vec![GroupId(common::s("healthy"))]),
        ),
    );
    assert!(matches!(ok, wire::Response::DescribeGroups(_)));
    let _ = c.try_call(
        5,
        wire::Request::DescribeGroups(
            DescribeGroupsRequest::default().with_groups(vec![GroupId(common::s("doomed"))]),
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = broker.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the broker kept running after a shard panicked"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    broker.join_reader();
    assert_eq!(status.code(), Some(101), "{}", broker.log_text());
    let lines = broker.log_lines("panic outside the decode guard");
    assert_eq!(lines.len(), 1, "{}", broker.log_text());
    assert!(
        lines[0].contains("failpoint: describing group doomed") && lines[0].contains("shard-"),
        "{}",
        lines[0]
    );
    std::fs::remove_dir_all(&dir).ok();
}

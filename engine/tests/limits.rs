//! Connection limits against the real binary: `max.connections.per.ip`, `max.connections` and
//! `connections.max.idle.ms` (which also closes a client that trickles a frame and never
//! completes it).

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use wire::{Request, Response};

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<std::alloc::System> =
    wire::alloc::GuardedAlloc(std::alloc::System);

/// Whether the broker closed `sock` (EOF) within `within`.
fn closed_within(sock: &mut TcpStream, within: Duration) -> bool {
    sock.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 1];
    matches!(sock.read(&mut b), Ok(0))
        || matches!(sock.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
}

fn api_versions_ok(c: &mut Client) -> bool {
    matches!(
        c.try_call(2, Request::ApiVersions(Default::default())),
        Ok(Response::ApiVersions(r)) if r.error_code == 0
    )
}

#[test]
fn connections_over_the_per_ip_limit_are_closed_at_accept() {
    let dir = data_dir("limits-ip");
    let broker = Broker::start(&dir, &["max.connections.per.ip=3"]);
    let mut held: Vec<Client> = (0..3).map(|_| Client::connect(broker.addr)).collect();
    for c in &mut held {
        assert!(
            api_versions_ok(c),
            "connections within the limit are served"
        );
    }
    let mut extra = TcpStream::connect(broker.addr).unwrap();
    assert!(
        closed_within(&mut extra, Duration::from_secs(5)),
        "the 4th connection is closed"
    );
    assert!(!broker
        .wait_for_lines(
            "connection refused: over the connection limit",
            Duration::from_secs(5)
        )
        .is_empty());
    // A closed connection gives its slot back.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c = Client::connect(broker.addr);
        if api_versions_ok(&mut c) {
            break;
        }
        assert!(Instant::now() < deadline, "the freed slot was never reused");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn max_connections_bounds_the_total() {
    let dir = data_dir("limits-total");
    let broker = Broker::start(&dir, &["max.connections=2"]);
    let mut held: Vec<Client> = (0..2).map(|_| Client::connect(broker.addr)).collect();
    for c in &mut held {
        assert!(api_versions_ok(c));
    }
    let mut extra = TcpStream::connect(broker.addr).unwrap();
    assert!(closed_within(&mut extra, Duration::from_secs(5)));
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn idle_and_trickling_connections_are_closed_after_connections_max_idle_ms() {
    let dir = data_dir("limits-idle");
    let broker = Broker::start(&dir, &["connections.max.idle.ms=400"]);
    // Idle: nothing sent.
    let mut idle = TcpStream::connect(broker.addr).unwrap();
    // Slowloris: a frame announced as 1 KiB, then one byte every 100 ms, never complete.
    let mut slow = TcpStream::connect(broker.addr).unwrap();
    slow.write_all(&1024i32.to_be_bytes()).unwrap();
    // Active: a request every 100 ms keeps its connection.
    let mut active = Client::connect(broker.addr);
    let started = Instant::now();
    let mut slow_closed = None;
    while started.elapsed() < Duration::from_millis(1500) {
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            api_versions_ok(&mut active),
            "an active connection stays open"
        );
        if slow_closed.is_none() && slow.write_all(&[0]).is_err() {
            slow_closed = Some(started.elapsed());
        }
    }
    assert!(
        closed_within(&mut idle, Duration::from_millis(100)),
        "the idle connection is closed"
    );
    assert!(
        slow_closed.is_some() || closed_within(&mut slow, Duration::from_millis(100)),
        "the trickling connection is closed"
    );
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

//! `abuse`: misbehaving clients for the network-abuse campaign (docs/reliability.md). Each mode
//! runs for `--duration` seconds against `--bootstrap` (127.0.0.1 only), while a well-behaved
//! loadgen population heartbeats beside it, and prints one JSON line of counts at the end.
//!
//! Modes:
//!   idle       hold `--connections` open connections that never send a byte
//!   slowloris  `--connections` connections each announcing a 64 KiB frame, then sending one byte
//!              per second per connection
//!   oversize   `--rate` connections/s each sending a frame length above socket.request.max.bytes
//!   garbage    `--rate` connections/s each sending one 508-byte frame of random bytes
//!   connect    `--rate` connections/s, each an ApiVersions round trip then close
//!   vanish     `--rate` classic members/s joining a group of 3 and closing their socket while
//!              their JoinGroup is parked in the rebalance (no LeaveGroup)
//!
//! Counts: connections opened, refused or failed to open, closed by the broker, round trips
//! answered. The broker surviving and the population's p99 are what the campaign reports.

use bytes::{Bytes, BytesMut};
use clap::{Parser, ValueEnum};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wire::codec::{decode_response, encode_request};
use wire::{Request, RequestHeader, Response};

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<mimalloc::MiMalloc> =
    wire::alloc::GuardedAlloc(mimalloc::MiMalloc);

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Mode {
    Idle,
    Slowloris,
    Oversize,
    Garbage,
    Connect,
    Vanish,
}

#[derive(Parser, Debug)]
#[command(about = "Misbehaving Kafka clients for the network-abuse campaign (127.0.0.1 only)")]
struct Args {
    #[arg(value_enum)]
    mode: Mode,
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: SocketAddr,
    /// Connections held (idle, slowloris).
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    /// New connections (or members) per second (oversize, garbage, connect, vanish).
    #[arg(long, default_value_t = 1000)]
    rate: u64,
    /// Seconds to run.
    #[arg(long, default_value_t = 20)]
    duration: u64,
}

#[derive(Default)]
struct Counts {
    opened: AtomicU64,
    open_failed: AtomicU64,
    closed_by_broker: AtomicU64,
    answered: AtomicU64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.bootstrap.ip().is_loopback(),
        "abuse only targets 127.0.0.1"
    );
    let counts = Arc::new(Counts::default());
    let until = Instant::now() + Duration::from_secs(args.duration);
    match args.mode {
        Mode::Idle | Mode::Slowloris => hold(&args, &counts, until),
        Mode::Oversize | Mode::Garbage | Mode::Connect | Mode::Vanish => {
            paced(&args, &counts, until)
        }
    }
    let c = &counts;
    println!(
        "{}",
        serde_json::json!({
            "mode": format!("{:?}", args.mode).to_lowercase(),
            "duration_s": args.duration,
            "opened": c.opened.load(Ordering::Relaxed),
            "open_failed": c.open_failed.load(Ordering::Relaxed),
            "closed_by_broker": c.closed_by_broker.load(Ordering::Relaxed),
            "answered": c.answered.load(Ordering::Relaxed),
        })
    );
    Ok(())
}

/// Whether the broker has closed `s` (a read returns EOF or a reset), without blocking.
fn broker_closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 256];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(_) => true,
    }
}

/// idle / slowloris: open the connections (as fast as the broker accepts them), then hold them.
fn hold(args: &Args, counts: &Counts, until: Instant) {
    let mut socks: Vec<Option<TcpStream>> = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        if Instant::now() >= until {
            break;
        }
        match TcpStream::connect_timeout(&args.bootstrap, Duration::from_secs(2)) {
            Ok(s) => {
                let _ = s.set_nonblocking(true);
                let mut s = s;
                if matches!(args.mode, Mode::Slowloris) {
                    let _ = s.write_all(&65_536i32.to_be_bytes());
                }
                counts.opened.fetch_add(1, Ordering::Relaxed);
                socks.push(Some(s));
            }
            Err(_) => {
                counts.open_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    eprintln!("abuse: {} connections open", socks.len());
    while Instant::now() < until {
        std::thread::sleep(Duration::from_secs(1));
        for slot in socks.iter_mut() {
            let Some(s) = slot else { continue };
            let gone = if matches!(args.mode, Mode::Slowloris) {
                s.write(&[0]).is_err() || broker_closed(s)
            } else {
                broker_closed(s)
            };
            if gone {
                counts.closed_by_broker.fetch_add(1, Ordering::Relaxed);
                *slot = None;
            }
        }
    }
}

/// The paced modes: `rate` new connections per second, each on its own short-lived thread pool
/// slot (4 threads share the rate).
fn paced(args: &Args, counts: &Arc<Counts>, until: Instant) {
    const THREADS: u64 = 4;
    let per_thread = (args.rate / THREADS).max(1);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let counts = counts.clone();
            let mode = args.mode;
            let addr = args.bootstrap;
            std::thread::spawn(move || {
                let gap = Duration::from_nanos(1_000_000_000 / per_thread);
                let mut next = Instant::now();
                let mut i = 0u64;
                let mut rng = fastrand::Rng::with_seed(t);
                while Instant::now() < until {
                    next += gap;
                    one(mode, addr, &counts, &mut rng, t * 1_000_000_000 + i);
                    i += 1;
                    if let Some(d) = next.checked_duration_since(Instant::now()) {
                        std::thread::sleep(d);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}

fn one(mode: Mode, addr: SocketAddr, counts: &Counts, rng: &mut fastrand::Rng, n: u64) {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        counts.open_failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    counts.opened.fetch_add(1, Ordering::Relaxed);
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let expect_close = |s: &mut TcpStream| {
        let mut b = [0u8; 64];
        if matches!(s.read(&mut b), Ok(0) | Err(_)) {
            counts.closed_by_broker.fetch_add(1, Ordering::Relaxed);
        }
    };
    match mode {
        Mode::Oversize => {
            let _ = s.write_all(&i32::MAX.to_be_bytes());
            expect_close(&mut s);
        }
        Mode::Garbage => {
            // A whole frame of random bytes: the broker must decode it and refuse it.
            let mut junk: Vec<u8> = (0..512).map(|_| rng.u8(..)).collect();
            junk[..4].copy_from_slice(&508i32.to_be_bytes());
            let _ = s.write_all(&junk);
            expect_close(&mut s);
        }
        Mode::Connect => {
            let req = Request::ApiVersions(ApiVersionsRequest::default());
            if let Some(Response::ApiVersions(r)) = round_trip(&mut s, 2, req) {
                if r.error_code == 0 {
                    counts.answered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Mode::Vanish => {
            // Join a group of three (one group per three members), then vanish while the
            // JoinGroup is parked waiting for the others (the initial rebalance delay).
            let group = format!("abuse-vanish-{}", n / 3);
            let join = |member: &str| {
                Request::JoinGroup(
                    JoinGroupRequest::default()
                        .with_group_id(GroupId(StrBytes::from_string(group.clone())))
                        .with_session_timeout_ms(10_000)
                        .with_rebalance_timeout_ms(10_000)
                        .with_member_id(StrBytes::from_string(member.to_string()))
                        .with_protocol_type(StrBytes::from_static_str("consumer"))
                        .with_protocols(vec![
                            join_group_request::JoinGroupRequestProtocol::default()
                                .with_name(StrBytes::from_static_str("range"))
                                .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0])),
                        ]),
                )
            };
            if let Some(Response::JoinGroup(r)) = round_trip(&mut s, 5, join("")) {
                counts.answered.fetch_add(1, Ordering::Relaxed);
                if r.error_code == ResponseError::MemberIdRequired.code() {
                    // Send the real join and leave without waiting for it.
                    let _ = send(&mut s, 5, join(r.member_id.as_str()), 2);
                }
            }
        }
        Mode::Idle | Mode::Slowloris => unreachable!("held modes"),
    }
}

fn send(s: &mut TcpStream, version: i16, req: Request, cid: i32) -> Option<()> {
    let header = RequestHeader {
        api_key: req.api_key(),
        api_version: version,
        correlation_id: cid,
        client_id: Some("abuse".into()),
    };
    let mut buf = BytesMut::new();
    encode_request(&header, &req, &mut buf).ok()?;
    s.write_all(&buf).ok()
}

fn round_trip(s: &mut TcpStream, version: i16, req: Request) -> Option<Response> {
    let key = req.api_key();
    send(s, version, req, 1)?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let n = i32::from_be_bytes(len);
    if !(0..=(64 << 20)).contains(&n) {
        return None;
    }
    let mut body = vec![0u8; n as usize];
    s.read_exact(&mut body).ok()?;
    decode_response(key, version, &Bytes::from(body))
        .ok()
        .map(|(_, r)| r)
}

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
//! Authentication modes (issue 18), `--bootstrap` being a SASL_PLAINTEXT listener for the sasl-*
//! modes and an SSL (or SASL_SSL) listener for the tls-* modes:
//!   sasl-wrong-password  `--rate` connections/s: SaslHandshake v1 PLAIN, then SaslAuthenticate v1
//!                        with a wrong password; the broker must answer SASL_AUTHENTICATION_FAILED
//!                        (58) and close
//!   sasl-garbage         `--rate` connections/s: SaslHandshake v1 SCRAM-SHA-256, then a
//!                        SaslAuthenticate whose token is random bytes (not a client-first message)
//!   sasl-pre-garbage     `--rate` connections/s: a frame of random bytes before any SaslHandshake
//!   sasl-unauthenticated `--rate` connections/s: a Metadata request before authenticating (Kafka's
//!                        SaslServerAuthenticator closes without answering)
//!   tls-stall            hold `--connections` TCP connections to the TLS port that never send a
//!                        byte of the handshake
//!   tls-half-hello       hold `--connections` connections that send half of a TLS ClientHello
//!                        record, then nothing
//!   tls-garbage          `--rate` connections/s sending 512 random bytes instead of a ClientHello
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
    SaslWrongPassword,
    SaslGarbage,
    SaslPreGarbage,
    SaslUnauthenticated,
    TlsStall,
    TlsHalfHello,
    TlsGarbage,
}

#[derive(Parser, Debug)]
#[command(about = "Misbehaving Kafka clients for the network-abuse campaign (127.0.0.1 only)")]
struct Args {
    #[arg(value_enum)]
    mode: Mode,
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: SocketAddr,
    /// Connections held (idle, slowloris, tls-stall, tls-half-hello).
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
        Mode::Idle | Mode::Slowloris | Mode::TlsStall | Mode::TlsHalfHello => {
            hold(&args, &counts, until)
        }
        Mode::Oversize
        | Mode::Garbage
        | Mode::Connect
        | Mode::Vanish
        | Mode::SaslWrongPassword
        | Mode::SaslGarbage
        | Mode::SaslPreGarbage
        | Mode::SaslUnauthenticated
        | Mode::TlsGarbage => paced(&args, &counts, until),
    }
    let c = &counts;
    println!(
        "{}",
        serde_json::json!({
            "mode": args.mode.to_possible_value().map(|v| v.get_name().to_string()),
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
                if matches!(args.mode, Mode::TlsHalfHello) {
                    let _ = s.write_all(&half_client_hello());
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
        Mode::SaslWrongPassword | Mode::SaslGarbage => {
            let mechanism = if matches!(mode, Mode::SaslWrongPassword) {
                "PLAIN"
            } else {
                "SCRAM-SHA-256"
            };
            // SaslHandshake v1: mechanism STRING
            let mut body = Vec::new();
            put_str(&mut body, mechanism);
            let Some((_, err)) = raw_round_trip(&mut s, 17, 1, 1, &body) else {
                return;
            };
            if err != 0 {
                return; // mechanism not enabled: counted as neither
            }
            let token: Vec<u8> = if matches!(mode, Mode::SaslWrongPassword) {
                b"\0alice\0not-the-password".to_vec()
            } else {
                (0..64).map(|_| rng.u8(..)).collect()
            };
            // SaslAuthenticate v1 (not flexible): auth_bytes BYTES
            let mut body = Vec::new();
            body.extend_from_slice(&(token.len() as i32).to_be_bytes());
            body.extend_from_slice(&token);
            if let Some((_, err)) = raw_round_trip(&mut s, 36, 1, 2, &body) {
                if err == 58 {
                    counts.answered.fetch_add(1, Ordering::Relaxed);
                }
            }
            expect_close(&mut s);
        }
        Mode::SaslPreGarbage | Mode::TlsGarbage => {
            let mut junk: Vec<u8> = (0..512).map(|_| rng.u8(..)).collect();
            if matches!(mode, Mode::SaslPreGarbage) {
                junk[..4].copy_from_slice(&508i32.to_be_bytes());
            }
            let _ = s.write_all(&junk);
            // A TLS server may answer with an alert before it closes: read past it.
            if closed_within(&mut s, Duration::from_secs(2)) {
                counts.closed_by_broker.fetch_add(1, Ordering::Relaxed);
            }
        }
        Mode::SaslUnauthenticated => {
            // Metadata v12 (flexible) with no topics, before any SaslHandshake.
            let body = [0x01u8, 0x00, 0x00]; // topics: empty compact array; allow_auto_topic_creation; tags
            let _ = raw_send(&mut s, 3, 12, 1, &body, true);
            expect_close(&mut s);
        }
        Mode::Idle | Mode::Slowloris | Mode::TlsStall | Mode::TlsHalfHello => {
            unreachable!("held modes")
        }
    }
}

/// Whether the broker closes `s` within `limit` (EOF or a reset), reading and discarding anything
/// it sends first; a read timeout is not a close.
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    let mut b = [0u8; 512];
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        let _ = s.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
    false
}

/// The first 100 bytes of a 517-byte TLS 1.2 record carrying a ClientHello: record header
/// (handshake, TLS 1.0 legacy version, length 512), handshake header (ClientHello, length 508),
/// client version TLS 1.2, 32 random bytes, and the start of the session id. The broker waits for
/// the rest of the record, which never comes.
fn half_client_hello() -> Vec<u8> {
    let mut v = vec![
        0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
    ];
    v.extend((0..32).map(|i| i as u8));
    v.push(32); // session id length
    v.resize(100, 0x5a);
    v
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as i16).to_be_bytes());
    buf.extend_from_slice(s.as_bytes());
}

/// Sends one request built by hand (header v1, or v2 with empty tagged fields when `flexible`):
/// the SASL requests are written raw so the abuse client does not depend on the broker's own
/// codec knowing them.
fn raw_send(
    s: &mut TcpStream,
    api_key: i16,
    version: i16,
    cid: i32,
    body: &[u8],
    flexible: bool,
) -> Option<()> {
    let mut frame = Vec::with_capacity(body.len() + 32);
    frame.extend_from_slice(&[0, 0, 0, 0]);
    frame.extend_from_slice(&api_key.to_be_bytes());
    frame.extend_from_slice(&version.to_be_bytes());
    frame.extend_from_slice(&cid.to_be_bytes());
    put_str(&mut frame, "abuse");
    if flexible {
        frame.push(0);
    }
    frame.extend_from_slice(body);
    let n = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&n.to_be_bytes());
    s.write_all(&frame).ok()
}

/// A non-flexible request and its response: (correlation id, the leading int16 error code).
fn raw_round_trip(
    s: &mut TcpStream,
    api_key: i16,
    version: i16,
    cid: i32,
    body: &[u8],
) -> Option<(i32, i16)> {
    raw_send(s, api_key, version, cid, body, false)?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let n = i32::from_be_bytes(len);
    if !(6..=(1 << 20)).contains(&n) {
        return None;
    }
    let mut resp = vec![0u8; n as usize];
    s.read_exact(&mut resp).ok()?;
    Some((
        i32::from_be_bytes([resp[0], resp[1], resp[2], resp[3]]),
        i16::from_be_bytes([resp[4], resp[5]]),
    ))
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

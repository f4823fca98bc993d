//! A bare glommio "echo" server for Kafka Heartbeat frames: the I/O ceiling of this machine.
//!
//! One glommio `LocalExecutor` pinned to one core (default 0) accepts TCP connections; each
//! connection task reads size-prefixed Kafka request frames and answers every Heartbeat (api key
//! 12, any version 0-4) with a fixed minimal valid Heartbeat response (error NONE) carrying the
//! request's correlation id. Nothing is decoded beyond the 8-byte header prefix, nothing is
//! allocated per request, and by default all responses to one read are written with one write:
//! what is left is the cost of the socket, the ring and the executor. Any other api key closes the
//! connection (run `hbflood` against it without `--join`).
//!
//! Knobs for the low-connection-count investigation (docs/performance.md):
//! `--spin-us N` (glommio `LocalExecutorBuilder::spin_before_park`), `--ring-depth N`
//! (`ring_depth`, default 128), `--write-per-frame` (one write per response instead of one per
//! read, which is what the broker's connection writer did before it coalesced responses).

use clap::Parser;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use glommio::{LocalExecutorBuilder, Placement};
use std::time::Duration;

#[derive(Parser, Debug, Clone)]
#[command(about = "Bare glommio Heartbeat echo server (the I/O ceiling for the macro benchmark)")]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9192")]
    listen: String,
    /// CPU to pin the executor to.
    #[arg(long, default_value_t = 0)]
    core: usize,
    /// Busy-poll this many microseconds before parking the reactor (glommio
    /// `spin_before_park`); 0 = park at once (glommio's default, and the broker's today).
    #[arg(long, default_value_t = 0)]
    spin_us: u64,
    /// io_uring submission ring depth (glommio default 128).
    #[arg(long)]
    ring_depth: Option<usize>,
    /// Write each response as soon as its frame is cut (one write per request) instead of one
    /// write for everything a read produced.
    #[arg(long)]
    write_per_frame: bool,
    /// Read buffer per connection, bytes.
    #[arg(long, default_value_t = 64 * 1024)]
    read_buf: usize,
}

const HEARTBEAT_KEY: i16 = 12;
const MAX_FRAME: usize = 100 * 1024 * 1024;

/// Append the Heartbeat response frame for `version` with `correlation_id`.
fn heartbeat_response(version: i16, correlation_id: i32, out: &mut Vec<u8>) {
    let cid = correlation_id.to_be_bytes();
    match version {
        // header v0 (correlation id), body: error_code
        0 => {
            out.extend_from_slice(&6i32.to_be_bytes());
            out.extend_from_slice(&cid);
            out.extend_from_slice(&[0, 0]);
        }
        // header v0, body: throttle_time_ms, error_code
        1..=3 => {
            out.extend_from_slice(&10i32.to_be_bytes());
            out.extend_from_slice(&cid);
            out.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        }
        // v4 (flexible): header v1 (correlation id + empty tagged fields), throttle_time_ms,
        // error_code, empty tagged fields
        _ => {
            out.extend_from_slice(&12i32.to_be_bytes());
            out.extend_from_slice(&cid);
            out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        }
    }
}

async fn serve(stream: TcpStream, args: std::rc::Rc<Args>) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let (mut rd, mut wr) = futures_lite::io::split(stream);
    let mut buf = vec![0u8; args.read_buf];
    let mut filled = 0usize;
    let mut out: Vec<u8> = Vec::with_capacity(args.read_buf);
    loop {
        if filled == buf.len() {
            let grow = buf.len();
            buf.resize(buf.len() + grow, 0);
        }
        let n = rd.read(&mut buf[filled..]).await?;
        if n == 0 {
            return Ok(());
        }
        filled += n;
        let mut pos = 0usize;
        while filled - pos >= 4 {
            let len = i32::from_be_bytes(buf[pos..pos + 4].try_into().expect("4 bytes"));
            if !(8..=MAX_FRAME as i32).contains(&len) {
                return Err(std::io::Error::other(format!("bad frame length {len}")));
            }
            let len = len as usize;
            if filled - pos < 4 + len {
                if 4 + len > buf.len() {
                    buf.resize(4 + len, 0);
                }
                break;
            }
            let f = &buf[pos + 4..pos + 4 + len];
            let api_key = i16::from_be_bytes([f[0], f[1]]);
            let version = i16::from_be_bytes([f[2], f[3]]);
            let cid = i32::from_be_bytes([f[4], f[5], f[6], f[7]]);
            if api_key != HEARTBEAT_KEY {
                return Err(std::io::Error::other(format!(
                    "api key {api_key} is not Heartbeat: the echo server answers Heartbeat only"
                )));
            }
            heartbeat_response(version, cid, &mut out);
            pos += 4 + len;
            if args.write_per_frame {
                wr.write_all(&out).await?;
                out.clear();
            }
        }
        buf.copy_within(pos..filled, 0);
        filled -= pos;
        if !out.is_empty() {
            wr.write_all(&out).await?;
            out.clear();
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut b = LocalExecutorBuilder::new(Placement::Fixed(args.core)).name("echo");
    if args.spin_us > 0 {
        b = b.spin_before_park(Duration::from_micros(args.spin_us));
    }
    if let Some(d) = args.ring_depth {
        b = b.ring_depth(d);
    }
    let handle = b
        .spawn(move || async move {
            let args = std::rc::Rc::new(args);
            let listener = match TcpListener::bind(args.listen.as_str()) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("echo-server: cannot listen on {}: {e}", args.listen);
                    std::process::exit(2);
                }
            };
            println!(
                "listening on {} (core {}, spin_before_park {} us, ring depth {}, {})",
                listener.local_addr().expect("bound"),
                args.core,
                args.spin_us,
                args.ring_depth
                    .map_or("default".to_string(), |d| d.to_string()),
                if args.write_per_frame {
                    "one write per response"
                } else {
                    "one write per read"
                }
            );
            use std::io::Write;
            let _ = std::io::stdout().flush();
            loop {
                match listener.accept().await {
                    Ok(s) => {
                        let a = args.clone();
                        glommio::spawn_local(async move {
                            if let Err(e) = serve(s, a).await {
                                if e.kind() != std::io::ErrorKind::ConnectionReset {
                                    eprintln!("echo-server: connection closed: {e}");
                                }
                            }
                        })
                        .detach();
                    }
                    Err(e) => eprintln!("echo-server: accept: {e}"),
                }
            }
        })
        .map_err(|e| anyhow::anyhow!("starting executor: {e}"))?;
    handle
        .join()
        .map_err(|e| anyhow::anyhow!("executor: {e}"))?;
    Ok(())
}

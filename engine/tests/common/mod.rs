//! What the integration tests that run the real `ringleader` binary share: the broker process
//! (started on a fresh data dir and an ephemeral port read back from its `listening on` line,
//! stopped with SIGTERM or SIGKILL), a blocking wire client, and a small seeded RNG.

#![allow(dead_code)] // each test file uses its own subset

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use wire::codec::{decode_response, encode_request};
use wire::{Request, RequestHeader, Response};

pub fn data_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rl-it-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One `ringleader serve` process; its stderr is collected line by line.
pub struct Broker {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Broker {
    pub fn start(dir: &Path, sets: &[&str]) -> Broker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringleader"));
        cmd.args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--cores",
            "2",
            "--data-dir",
        ])
        .arg(dir)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        for s in sets {
            cmd.args(["--set", s]);
        }
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent; it makes the
        // broker die with the test thread that started it, so a failed test leaks no process.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("spawn ringleader");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let reader = {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Some(rest) = line.split("listening on ").nth(1) {
                        let addr = rest.split_whitespace().next().unwrap_or("");
                        if let Ok(a) = addr.parse::<SocketAddr>() {
                            let _ = tx.send(a);
                        }
                    }
                    log.lock().unwrap().push(line);
                }
            })
        };
        let mut broker = Broker {
            child,
            addr: "127.0.0.1:0".parse().unwrap(),
            log,
            reader: Some(reader),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(a) => {
                    broker.addr = a;
                    return broker;
                }
                Err(_) if Instant::now() > deadline => {
                    panic!(
                        "broker did not log 'listening on' within 30 s:\n{}",
                        broker.log_text()
                    )
                }
                Err(_) => {
                    if let Some(status) = broker.child.try_wait().unwrap() {
                        broker.join_reader();
                        panic!(
                            "broker exited ({status}) before listening:\n{}",
                            broker.log_text()
                        );
                    }
                }
            }
        }
    }

    pub fn pid(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .cloned()
            .collect()
    }

    /// The log lines containing `needle`, waiting up to `timeout` for a first one: the broker's
    /// output is read by another thread, so a line the broker wrote just before an effect the
    /// test observed (a closed socket) may not have been collected yet.
    pub fn wait_for_lines(&self, needle: &str, timeout: std::time::Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let lines = self.log_lines(needle);
            if !lines.is_empty() || std::time::Instant::now() >= deadline {
                return lines;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    pub fn join_reader(&mut self) {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }

    /// SIGKILL: no chance to flush or finish anything.
    pub fn kill9(&mut self) {
        // SAFETY: kill(2) on our own child's pid; it has not been reaped yet.
        let rc = unsafe { libc::kill(self.pid(), libc::SIGKILL) };
        assert_eq!(rc, 0, "kill -9");
        let status = self.child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
        self.join_reader();
    }

    /// SIGTERM and a clean exit 0 within 15 s.
    pub fn stop(&mut self) {
        // SAFETY: kill(2) on our own child's pid; it has not been reaped yet.
        let rc = unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        assert_eq!(rc, 0, "kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(15);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "broker did not exit within 15 s of SIGTERM:\n{}",
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.join_reader();
        assert_eq!(
            status.code(),
            Some(0),
            "exit on SIGTERM:\n{}",
            self.log_text()
        );
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.join_reader();
    }
}

pub struct Client {
    pub sock: TcpStream,
    pub next_cid: i32,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Self {
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        sock.set_nodelay(true).unwrap();
        Self { sock, next_cid: 1 }
    }

    /// One request and its response; Err when the connection fails (the broker died).
    pub fn try_call(&mut self, version: i16, req: Request) -> Result<Response, String> {
        let cid = self.next_cid;
        self.next_cid += 1;
        let header = RequestHeader {
            api_key: req.api_key(),
            api_version: version,
            correlation_id: cid,
            client_id: Some("durability-it".into()),
        };
        let mut buf = BytesMut::new();
        encode_request(&header, &req, &mut buf).map_err(|e| e.to_string())?;
        self.sock.write_all(&buf).map_err(|e| e.to_string())?;
        let mut len = [0u8; 4];
        self.sock.read_exact(&mut len).map_err(|e| e.to_string())?;
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        self.sock.read_exact(&mut body).map_err(|e| e.to_string())?;
        let (got, resp) = decode_response(req.api_key(), version, &Bytes::from(body))
            .map_err(|e| e.to_string())?;
        assert_eq!(got, cid, "correlation id");
        Ok(resp)
    }

    pub fn call(&mut self, version: i16, req: Request) -> Response {
        self.try_call(version, req).expect("response")
    }
}

pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub fn create_topic(c: &mut Client, name: &str, partitions: i32) {
    let req = Request::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(partitions)
            .with_replication_factor(1),
    ]));
    let Response::CreateTopics(r) = c.call(7, req) else {
        panic!("CreateTopics")
    };
    assert_eq!(r.topics[0].error_code, 0, "CreateTopics {name}");
}

pub struct Rng(u64);

impl Rng {
    pub fn from_clock() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        println!("rng seed {seed}");
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

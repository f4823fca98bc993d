//! `--tls-ca` / `--tls-cert` against the real broker: one broker with a PLAINTEXT and an SSL
//! listener (client certificates required), certificates from `scripts/gen-test-certs.sh`.
//! A short classic run over TLS must succeed without errors; bad TLS settings (missing file,
//! a CA that did not sign the broker's certificate, TLS to the plaintext port, no client
//! certificate where one is required) must be setup errors (exit code 2) saying why.
//!
//! Needs `target/release/ringleader` (or RINGLEADER_BIN) and `openssl`; without them the tests
//! print why and pass. No timed assertions.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn broker_binary() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("RINGLEADER_BIN") {
        return Some(PathBuf::from(p));
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let p = target.join("release/ringleader");
    p.exists().then_some(p)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `scripts/gen-test-certs.sh DIR`, or None without openssl.
fn certs(dir: &Path) -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/gen-test-certs.sh");
    let o = Command::new("bash").arg(&script).arg(dir).output().ok()?;
    if !o.status.success() {
        eprintln!(
            "gen-test-certs.sh failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        return None;
    }
    Some(dir.to_path_buf())
}

struct Broker {
    child: Child,
    dir: PathBuf,
    plain: String,
    tls: String,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The broker and the certificate directory, or None (and why, printed) when either is missing.
fn setup(tag: &str) -> Option<Broker> {
    let Some(bin) = broker_binary() else {
        eprintln!(
            "SKIPPED: target/release/ringleader not found; build it with \
             `cargo build --release -p ringleader-engine` or set RINGLEADER_BIN"
        );
        return None;
    };
    let dir = std::env::temp_dir().join(format!("loadgen-tls-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let Some(certs) = certs(&dir.join("certs")) else {
        eprintln!("SKIPPED: no test certificates (openssl missing?)");
        return None;
    };
    let (plain, tls) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let c = |f: &str| certs.join(f).display().to_string();
    let sets = [
        format!("listeners=PLAINTEXT://{plain},SSL://{tls}"),
        "ssl.keystore.type=PEM".into(),
        format!("ssl.keystore.location={}", c("server.keystore.pem")),
        "ssl.truststore.type=PEM".into(),
        format!("ssl.truststore.location={}", c("ca.pem")),
        "listener.name.ssl.ssl.client.auth=required".into(),
        "group.initial.rebalance.delay.ms=0".into(),
    ];
    let mut child = Command::new(bin)
        .args(["serve", "--cores", "1", "--data-dir"])
        .arg(dir.join("data"))
        .args(sets.iter().flat_map(|kv| ["--set", kv.as_str()]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ringleader");
    let (tx, rx) = mpsc::channel();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if line.contains("listening on") {
                    let _ = tx.send(());
                }
            }
        });
    }
    let broker = Broker {
        child,
        dir,
        plain,
        tls,
    };
    rx.recv_timeout(Duration::from_secs(30))
        .expect("ringleader did not log 'listening on' within 30 s");
    Some(broker)
}

fn cert(b: &Broker, f: &str) -> String {
    b.dir.join("certs").join(f).display().to_string()
}

fn run_loadgen(args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start loadgen");
    let started = Instant::now();
    let pid = child.id();
    // wait_with_output blocks; guard against a hang with a watchdog thread.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(Duration::from_secs(120)) {
            // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    });
    let out = child.wait_with_output().unwrap();
    let _ = tx.send(());
    eprintln!(
        "loadgen {:?} -> {} after {:?}\n{}",
        args,
        out.status,
        started.elapsed(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn a_classic_run_over_tls_with_a_client_certificate_succeeds() {
    let Some(b) = setup("run") else { return };
    let out_dir = b.dir.join("report");
    let (ca, alice) = (cert(&b, "ca.pem"), cert(&b, "alice.keystore.pem"));
    let o = run_loadgen(&[
        "--bootstrap",
        &b.tls,
        "--tls-ca",
        &ca,
        "--tls-cert",
        &alice,
        "--groups",
        "5",
        "--members-per-group",
        "10",
        "--topics",
        "1",
        "--partitions",
        "4",
        "--duration",
        "4s",
        "--heartbeat-interval-ms",
        "200",
        "--commit-interval-ms",
        "500",
        "--connections",
        "8",
        "--cores",
        "1",
        "--quiet",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "loadgen exited with {}", o.status);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(
        s["totals"]["errors"], 0,
        "errors: {}",
        s["errors_by_api_and_code"]
    );
    assert_eq!(s["members"]["ever_stable"], 50);
    for api in [
        "Heartbeat",
        "OffsetCommit",
        "OffsetFetch",
        "JoinGroup",
        "SyncGroup",
    ] {
        let n = s["apis"][api]["responses"].as_u64().unwrap_or(0);
        assert!(n > 0, "no {api} responses over TLS");
    }
    assert_eq!(s["apis"]["LeaveGroup"]["responses"], 50);
}

fn assert_setup_error(o: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "exit status {}: {err}", o.status);
    for n in needles {
        assert!(err.contains(n), "{n:?} not in: {err}");
    }
}

#[test]
fn bad_tls_settings_are_setup_errors_that_say_why() {
    let Some(b) = setup("bad") else { return };
    let (ca, alice) = (cert(&b, "ca.pem"), cert(&b, "alice.keystore.pem"));
    let common = [
        "--groups",
        "1",
        "--members-per-group",
        "1",
        "--duration",
        "1s",
    ];

    // A missing CA file: named, before any connection.
    let mut a = vec!["--bootstrap", &b.tls, "--tls-ca", "/nonexistent/ca.pem"];
    a.extend(common);
    assert_setup_error(&run_loadgen(&a), &["--tls-ca /nonexistent/ca.pem"]);

    // A CA that did not sign the broker's certificate.
    let other = b.dir.join("other-certs");
    certs(&other).expect("second CA");
    let other_ca = other.join("ca.pem").display().to_string();
    let mut a = vec!["--bootstrap", &b.tls, "--tls-ca", &other_ca];
    a.extend(["--tls-cert", &alice]);
    a.extend(common);
    assert_setup_error(&run_loadgen(&a), &["TLS handshake failed", "certificate"]);

    // TLS to the plaintext listener.
    let mut a = vec!["--bootstrap", &b.plain, "--tls-ca", &ca];
    a.extend(common);
    assert_setup_error(&run_loadgen(&a), &["TLS handshake failed"]);

    // No client certificate where the listener requires one: the broker's alert arrives with
    // the first response (TLS 1.3 finishes the client's side of the handshake first).
    let mut a = vec!["--bootstrap", &b.tls, "--tls-ca", &ca];
    a.extend(common);
    assert_setup_error(&run_loadgen(&a), &["ApiVersions"]);
}

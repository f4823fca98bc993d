//! Short real runs: the real `ringleader` binary on a free port, and the real `loadgen` binary
//! driving 200 classic members in 10 groups, or 100 KIP-848 consumer-protocol members in 10
//! groups, against it for a few seconds. Checks the exit code, the report files, that every
//! member became stable without a single error, and (consumer protocol) that every partition of
//! every group had exactly one owner when the run ended.
//!
//! Needs `target/release/ringleader` (CI builds release first); without it the test prints why
//! and passes.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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

struct Broker {
    child: Child,
    data: PathBuf,
    addr: String,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_broker(bin: &Path, tag: &str, extra: &[&str]) -> Broker {
    let port = free_port();
    let data = std::env::temp_dir().join(format!("loadgen-real-run-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(bin)
        .args(["serve", "--listen", &addr, "--data-dir"])
        .arg(&data)
        .args(["--set", "group.initial.rebalance.delay.ms=0"])
        .args(extra.iter().flat_map(|kv| ["--set", kv]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ringleader");
    // The broker logs "listening on" once every shard accepts connections.
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
    let broker = Broker { child, data, addr };
    rx.recv_timeout(Duration::from_secs(30))
        .expect("ringleader did not log 'listening on' within 30 s");
    broker
}

#[test]
fn two_hundred_classic_members_run_clean_against_the_real_broker() {
    let Some(bin) = broker_binary() else {
        eprintln!(
            "SKIPPED: target/release/ringleader not found; build it with \
             `cargo build --release -p ringleader-engine` (CI does) or set RINGLEADER_BIN"
        );
        return;
    };
    let broker = start_broker(&bin, "classic", &[]);
    let out = std::env::temp_dir().join(format!("loadgen-real-run-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);

    let started = Instant::now();
    let mut lg = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "--bootstrap",
            &broker.addr,
            "--groups",
            "10",
            "--members-per-group",
            "20",
            "--topics",
            "2",
            "--partitions",
            "8",
            "--duration",
            "4s",
            "--heartbeat-interval-ms",
            "500",
            "--commit-interval-ms",
            "1000",
            "--connections",
            "16",
            "--cores",
            "1",
            "--out",
        ])
        .arg(&out)
        .spawn()
        .expect("start loadgen");
    let status = loop {
        if let Some(s) = lg.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(90) {
            let _ = lg.kill();
            panic!("loadgen did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "loadgen exited with {status}");

    for f in [
        "heartbeat.hgrm",
        "joingroup.hgrm",
        "syncgroup.hgrm",
        "offsetcommit.hgrm",
        "offsetfetch.hgrm",
        "leavegroup.hgrm",
        "rebalance.hgrm",
        "summary.json",
        "latency.svg",
    ] {
        assert!(out.join(f).exists(), "{f} missing from {}", out.display());
    }
    let hgrm = std::fs::read_to_string(out.join("heartbeat.hgrm")).unwrap();
    assert!(hgrm.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)"));
    assert!(hgrm.contains("#[Max     ="));

    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    eprintln!("{}", serde_json::to_string_pretty(&s["totals"]).unwrap());
    assert_eq!(
        s["totals"]["errors"], 0,
        "errors: {}",
        s["errors_by_api_and_code"]
    );
    assert_eq!(s["passed"], true);
    assert_eq!(s["members"]["total"], 200);
    assert_eq!(
        s["members"]["ever_stable"], 200,
        "every member reached stable"
    );
    assert_eq!(
        s["members"]["stable_at_end"], 200,
        "and was stable when the run ended"
    );
    let hb = s["apis"]["Heartbeat"]["responses"].as_u64().unwrap();
    // 200 members at 500 ms for ~3 stable seconds is ~1,200; allow a slow, shared CI machine.
    assert!(hb >= 400, "only {hb} heartbeats");
    assert!(s["apis"]["OffsetCommit"]["responses"].as_u64().unwrap() > 0);
    assert!(s["apis"]["OffsetFetch"]["responses"].as_u64().unwrap() >= 16);
    assert_eq!(
        s["apis"]["LeaveGroup"]["responses"], 200,
        "every member left at the end"
    );
    assert!(s["rebalance_convergence_us"]["count"].as_u64().unwrap() >= 200);
    assert_eq!(s["api_versions"]["JoinGroup"], 9);
    let svg = std::fs::read_to_string(out.join("latency.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("Heartbeat"));
    let _ = std::fs::remove_dir_all(&out);
}

fn wait_for(mut lg: Child) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(s) = lg.try_wait().unwrap() {
            return s;
        }
        if started.elapsed() > Duration::from_secs(90) {
            let _ = lg.kill();
            panic!("loadgen did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn hundred_consumer_protocol_members_run_clean_against_the_real_broker() {
    let Some(bin) = broker_binary() else {
        eprintln!("SKIPPED: target/release/ringleader not found (see the classic test)");
        return;
    };
    let broker = start_broker(
        &bin,
        "consumer",
        &[
            "group.consumer.heartbeat.interval.ms=500",
            "group.consumer.min.heartbeat.interval.ms=500",
            "group.consumer.assignment.interval.ms=100",
        ],
    );
    let out = std::env::temp_dir().join(format!(
        "loadgen-real-run-consumer-report-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out);
    let lg = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "--bootstrap",
            &broker.addr,
            "--protocol",
            "consumer",
            "--groups",
            "10",
            "--members-per-group",
            "10",
            "--topics",
            "2",
            "--partitions",
            "8",
            "--duration",
            "4s",
            "--commit-interval-ms",
            "1000",
            "--connections",
            "16",
            "--cores",
            "1",
            "--out",
        ])
        .arg(&out)
        .spawn()
        .expect("start loadgen");
    let status = wait_for(lg);
    assert!(status.success(), "loadgen exited with {status}");
    for f in [
        "consumergroupheartbeat.hgrm",
        "offsetcommit.hgrm",
        "offsetfetch.hgrm",
        "rebalance.hgrm",
        "summary.json",
        "latency.svg",
    ] {
        assert!(out.join(f).exists(), "{f} missing from {}", out.display());
    }
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    eprintln!("{}", serde_json::to_string_pretty(&s["totals"]).unwrap());
    eprintln!(
        "{}",
        serde_json::to_string_pretty(&s["ownership_at_end"]).unwrap()
    );
    assert_eq!(
        s["totals"]["errors"], 0,
        "errors: {}",
        s["errors_by_api_and_code"]
    );
    assert_eq!(s["passed"], true);
    assert_eq!(s["api_versions"]["ConsumerGroupHeartbeat"], 1);
    assert_eq!(s["members"]["ever_stable"], 100);
    assert_eq!(s["members"]["stable_at_end"], 100);
    // Every partition of every group (2 topics x 8) owned by exactly one member.
    let own = &s["ownership_at_end"];
    assert_eq!(own["partitions"], 160);
    assert_eq!(own["owned_exactly_once"], 160, "{own}");
    assert_eq!(own["groups_with_every_partition_owned_once"], 10, "{own}");
    let cgh = &s["apis"]["ConsumerGroupHeartbeat"];
    // Joins, acks, ~3 s of 500 ms heartbeats and the leaves: ~800; allow a slow machine.
    assert!(cgh["responses"].as_u64().unwrap() >= 300, "{cgh}");
    assert!(s["apis"]["OffsetCommit"]["responses"].as_u64().unwrap() > 0);
    assert_eq!(s["apis"]["OffsetFetch"]["responses"], 100, "one per member");
    assert!(s["apis"].get("JoinGroup").is_none() || s["apis"]["JoinGroup"]["requests"] == 0);
    assert!(s["rebalance_convergence_us"]["count"].as_u64().unwrap() >= 100);
    let _ = std::fs::remove_dir_all(&out);
}

/// `--until-stable --late-joiners 2`: the group converges, two members join one after the other,
/// each measured, and the run ends on its own well before `--duration`.
fn convergence_run(protocol: &str, broker: &Broker, interval_args: &[&str]) -> serde_json::Value {
    let out = std::env::temp_dir().join(format!(
        "loadgen-real-run-converge-report-{protocol}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out);
    let started = Instant::now();
    let lg = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "--bootstrap",
            &broker.addr,
            "--protocol",
            protocol,
            "--groups",
            "1",
            "--members-per-group",
            "10",
            "--topics",
            "1",
            "--partitions",
            "20",
            "--duration",
            "80s",
            "--commit-interval-ms",
            "0",
            "--until-stable",
            "--late-joiners",
            "2",
            "--server-pid",
            &broker.child.id().to_string(),
            "--cores",
            "1",
        ])
        .args(interval_args)
        .arg("--out")
        .arg(&out)
        .spawn()
        .expect("start loadgen");
    let status = wait_for(lg);
    assert!(status.success(), "loadgen exited with {status}");
    assert!(
        started.elapsed() < Duration::from_secs(75),
        "--until-stable ended the run before --duration"
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    s
}

fn check_convergence(s: &serde_json::Value) {
    let g = &s["group_convergence"];
    eprintln!("{}", serde_json::to_string_pretty(g).unwrap());
    assert_eq!(s["totals"]["errors"], 0, "{}", s["errors_by_api_and_code"]);
    assert_eq!(s["members"]["total"], 12, "10 members and 2 late joiners");
    assert_eq!(s["members"]["stable_at_end"], 12);
    let own = &s["ownership_at_end"];
    assert_eq!(own["owned_exactly_once"], 20, "{own}");
    assert!(g["initial_converged_ms"].as_f64().unwrap() > 0.0);
    let l = &g["late_joiners"];
    assert_eq!(l["completed"], 2, "{l}");
    let events = l["events_ms"].as_array().unwrap();
    for e in events {
        let (joiner, group) = (
            e["joiner_join_to_stable"].as_f64().unwrap(),
            e["join_to_group_converged"].as_f64().unwrap(),
        );
        assert!(joiner > 0.0 && joiner <= group, "{e}");
    }
    // One after the other: the second joined after the first had converged.
    let end_of_first = events[0]["started"].as_f64().unwrap()
        + events[0]["join_to_group_converged"].as_f64().unwrap();
    assert!(
        events[1]["started"].as_f64().unwrap() >= end_of_first,
        "{l}"
    );
    // With late joiners the start-up's per-member figures are not reported (they moved since).
    assert!(g["initial"].is_null());
    let server = &s["server"];
    assert!(
        server["rss_mb_at_end_of_run"].as_f64().unwrap() > 0.0,
        "{server}"
    );
}

#[test]
fn classic_convergence_and_late_joiners_are_measured() {
    let Some(bin) = broker_binary() else {
        eprintln!("SKIPPED: target/release/ringleader not found (see the classic test)");
        return;
    };
    let broker = start_broker(&bin, "converge-classic", &[]);
    let s = convergence_run("classic", &broker, &["--heartbeat-interval-ms", "300"]);
    check_convergence(&s);
}

#[test]
fn consumer_convergence_and_late_joiners_are_measured() {
    let Some(bin) = broker_binary() else {
        eprintln!("SKIPPED: target/release/ringleader not found (see the classic test)");
        return;
    };
    let broker = start_broker(
        &bin,
        "converge-consumer",
        &[
            "group.consumer.heartbeat.interval.ms=300",
            "group.consumer.min.heartbeat.interval.ms=300",
            "group.consumer.assignment.interval.ms=100",
        ],
    );
    let s = convergence_run("consumer", &broker, &[]);
    check_convergence(&s);
}

#[test]
fn open_loop_is_refused_for_the_consumer_protocol() {
    let o = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "--protocol",
            "consumer",
            "--rate",
            "1000",
            "--bootstrap",
            "127.0.0.1:1",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--rate"), "{err}");
}

#[test]
fn an_unreachable_broker_is_a_setup_error() {
    let port = free_port(); // nothing listens there any more
    let o = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "--bootstrap",
            &format!("127.0.0.1:{port}"),
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot connect"));
}

"""Disk-fault campaign driver (run by scripts/disk-faults.sh, as root): a broker whose data dir is a
size-limited tmpfs that fills up (and later is read-only at start-up), while a producer (acks=all) and a
consumer group committing offsets keep going. Checks: clients get clear errors, the broker logs
them and keeps running, nothing acknowledged is lost (verified after a restart), and service
resumes once space returns / the filesystem is writable again.

Usage: disk_faults.py BINARY WORKDIR
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BIN, WORK = Path(sys.argv[1]), Path(sys.argv[2])
MNT = WORK / "mnt"
DATA = MNT / "data"
PORT = 29000 + os.getpid() % 900
BS = f"127.0.0.1:{PORT}"
TOPIC = "faults"
report: dict = {}


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True)


RUNNING: list[subprocess.Popen] = []


def start() -> subprocess.Popen:
    log = open(WORK / "ringleader.log", "a")
    p = subprocess.Popen(
        [str(BIN), "serve", "--listen", BS, "--data-dir", str(DATA), "--cores", "2",
         "--set", "group.initial.rebalance.delay.ms=0", "--set", "log.segment.bytes=1048576",
         "--set", "offsets.topic.segment.bytes=1048576"],
        stdout=log, stderr=log)
    RUNNING.append(p)
    deadline = time.time() + 20
    while time.time() < deadline:
        if "listening on" in (WORK / "ringleader.log").read_text():
            return p
        time.sleep(0.1)
    raise SystemExit("broker did not start")


def stop(p: subprocess.Popen) -> None:
    p.terminate()
    p.wait(timeout=20)


def free_bytes() -> int:
    st = os.statvfs(MNT)
    return st.f_bavail * st.f_frsize


acked: dict[int, dict[int, bytes]] = {}
errors: dict[str, int] = {}


def produce(n: int, tag: str, timeout_s: float = 8.0) -> tuple[int, int]:
    """Produce n records of 1 KiB; returns (acknowledged, failed)."""
    ok = failed = 0

    def cb(err, msg):
        nonlocal ok, failed
        if err is None:
            acked.setdefault(msg.partition(), {})[msg.offset()] = msg.value()
            ok += 1
        else:
            failed += 1
            errors[err.name()] = errors.get(err.name(), 0) + 1

    p = Producer({"bootstrap.servers": BS, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": int(timeout_s * 1000), "enable.idempotence": False,
                  "retries": 2})
    for i in range(n):
        p.produce(TOPIC, value=f"{tag}-{i}-".encode() + b"x" * 1000, callback=cb)
        if i % 200 == 0:
            p.poll(0)
    p.flush(timeout_s + 10)
    return ok, failed


def commit(group: str, offset: int) -> str:
    c = Consumer({"bootstrap.servers": BS, "group.id": group, "enable.auto.commit": False})
    try:
        res = c.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
        return "ok" if res and res[0].error is None else str(res)
    except Exception as e:  # the commit's error is the point here
        return type(e).__name__ + ": " + str(e)[:120]
    finally:
        c.close()


def read_back() -> dict[int, dict[int, bytes]]:
    c = Consumer({"bootstrap.servers": BS, "group.id": "verify", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    parts = [TopicPartition(TOPIC, p, 0) for p in range(3)]
    c.assign(parts)
    got: dict[int, dict[int, bytes]] = {}
    highs = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), 10)[1] for p in range(3)}
    deadline = time.time() + 60
    while time.time() < deadline and any(len(got.get(p, {})) < highs[p] for p in range(3)):
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                got.setdefault(m.partition(), {})[m.offset()] = m.value()
    c.close()
    return got


def verify(phase: str) -> None:
    got = read_back()
    lost = sum(1 for p, offs in acked.items() for o, v in offs.items() if got.get(p, {}).get(o) != v)
    total = sum(len(v) for v in acked.values())
    report[f"{phase}_verified"] = {"acknowledged": total, "lost": lost}
    print(f"[{phase}] acknowledged records: {total}, lost after restart: {lost}", flush=True)
    assert lost == 0, f"{lost} acknowledged records lost"


def main() -> None:
    broker = start()
    admin = AdminClient({"bootstrap.servers": BS})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(10)
    report["warmup"] = produce(2000, "warm")
    report["warmup_commit"] = commit("g-faults", 100)

    # --- 1. the filesystem fills up -------------------------------------------------------------
    filler = MNT / "filler"
    with open(filler, "wb") as f:  # leave ~1 MiB free
        while free_bytes() > 1 << 20:
            f.write(b"\0" * min(1 << 20, free_bytes() - (1 << 20) or 4096))
    report["full_produce"] = produce(3000, "full")
    report["full_commit"] = commit("g-faults", 200)
    report["full_errors"] = dict(errors)
    print(f"[full] produce ok/failed {report['full_produce']}, commit: {report['full_commit']}", flush=True)
    assert broker.poll() is None, "the broker died when the disk filled up"
    filler.unlink()
    time.sleep(1)
    report["after_space_produce"] = produce(2000, "space")
    report["after_space_commit"] = commit("g-faults", 300)
    print(f"[space back] produce ok/failed {report['after_space_produce']}, commit: {report['after_space_commit']}", flush=True)
    assert report["after_space_produce"][1] == 0, "service did not resume after space returned"

    # --- 2. the filesystem is read-only -----------------------------------------------------------
    # Linux refuses to remount a filesystem read-only while files are open for writing (EBUSY), so
    # a running broker cannot be switched under; the case is a broker started on a read-only data
    # dir (a disk remounted ro after errors, then a restart): it must refuse to start with a clear
    # message, and start with every record once the filesystem is writable again.
    stop(broker)
    sh("mount", "-o", "remount,ro", str(MNT))
    ro = subprocess.run(
        [str(BIN), "serve", "--listen", BS, "--data-dir", str(DATA), "--cores", "2"],
        capture_output=True, text=True, timeout=30)
    report["ro_start"] = {"exit": ro.returncode, "stderr_tail": ro.stderr.strip().splitlines()[-2:]}
    print(f"[read-only] start exit {ro.returncode}: {ro.stderr.strip().splitlines()[-1:]}", flush=True)
    assert ro.returncode != 0, "a broker on a read-only data dir must not pretend to serve"
    sh("mount", "-o", "remount,rw", str(MNT))
    broker = start()
    verify("after_read_only")
    report["rw_produce"] = produce(1000, "rw")
    report["rw_commit"] = commit("g-faults", 500)
    print(f"[writable again] produce ok/failed {report['rw_produce']}, commit: {report['rw_commit']}", flush=True)
    assert report["rw_produce"][1] == 0, "service did not resume after remount rw"

    # --- restart and verify nothing acknowledged is lost -----------------------------------------
    stop(broker)
    broker = start()
    verify("restart")
    c = Consumer({"bootstrap.servers": BS, "group.id": "g-faults"})
    committed = c.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset
    c.close()
    report["committed_after_restart"] = committed
    print(f"committed offset of g-faults after restart: {committed} (last acknowledged commit: 500)")
    assert committed == 500
    stop(broker)
    log = (WORK / "ringleader.log").read_text()
    report["log_lines"] = {
        k: sum(1 for line in log.splitlines() if k in line)
        for k in ["write failed", "No space left", "Read-only file system", "reload"]
    }
    (WORK / "report.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, indent=2, default=str))


try:
    main()
finally:
    for proc in RUNNING:  # never leave a broker holding the tmpfs
        if proc.poll() is None:
            proc.kill()

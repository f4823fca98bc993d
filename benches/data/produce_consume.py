#!/usr/bin/env python3
"""Produce/consume throughput of Ringleader next to Tansu with the same client (confluent-kafka).

For each broker, one at a time: start it pinned to the server core (taskset), create a topic,
produce N records of S bytes (acks=all, linger.ms=5, librdkafka's default batching), then consume
them all back (assigned partitions from the beginning, no group), and stop it. The driver (and
librdkafka's threads) run on the client core. Prints a table and writes JSON.

Usually run through scripts/bench-data.sh, which finds the binaries and the Python environment:

    taskset -c 1 python benches/data/produce_consume.py \\
        --ringleader target/release/ringleader --tansu /path/to/tansu --json out.json

Only 127.0.0.1 is used. Every wait is bounded.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CLK_TCK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------ process helpers
def proc_cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (all threads), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def self_cpu_seconds() -> float:
    """This process's CPU time including librdkafka's threads."""
    t = os.times()
    return t.user + t.system


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_keys(port: int, timeout: float = 5.0) -> set[int]:
    """ApiVersions v0 over a raw socket: the API keys the broker advertises."""
    payload = struct.pack(">hhi", 18, 0, 1) + struct.pack(">h", 5) + b"bench"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        buf = b""
        while len(buf) < 4:
            chunk = s.recv(4 - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        (size,) = struct.unpack(">i", buf)
        data = b""
        while len(data) < size:
            chunk = s.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
    _corr, err, n = struct.unpack_from(">ihi", data, 0)
    if err != 0:
        raise RuntimeError(f"ApiVersions error {err}")
    return {struct.unpack_from(">hhh", data, 10 + 6 * i)[0] for i in range(n)}


class Server:
    def __init__(self, name: str, argv: list[str], port: int, log_path: Path, core: int | None):
        self.name, self.argv, self.port, self.log_path, self.core = name, argv, port, log_path, core
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> None:
        if port_open(self.port):
            raise RuntimeError(f"port {self.port} already in use")
        argv = (["taskset", "-c", str(self.core)] if self.core is not None else []) + self.argv
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "NO_COLOR": "1"})
        log.close()
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not listen on {self.port} within {timeout}s: {self.log_tail()}")
            time.sleep(0.1)

    def cpu(self) -> float | None:
        return proc_cpu_seconds(self.proc.pid) if self.proc else None

    def rss_mb(self) -> float | None:
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except (OSError, AttributeError):
            return None
        return None

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            return self.proc.returncode

    def log_tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


# ------------------------------------------------------------------------------------ phases
def client_conf(bootstrap: str) -> dict:
    return {"bootstrap.servers": bootstrap, "broker.address.family": "v4",
            "socket.timeout.ms": 30000, "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 1000}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient(client_conf(bootstrap))
    fs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                             request_timeout=15, operation_timeout=10)
    fs[topic].result(timeout=30)
    deadline = time.monotonic() + 20
    while True:  # until every partition has a leader in Metadata
        md = admin.list_topics(topic=topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and \
                all(p.leader >= 0 for p in t.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} has no leaders after 20s: {t and t.partitions}")
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, n: int, size: int, conf_extra: dict, server: Server,
            timeout: float) -> dict:
    errors = []

    def on_error(err, msg):
        if err is not None:
            errors.append(str(err))

    conf = {**client_conf(bootstrap), "acks": "all", "linger.ms": 5, "message.timeout.ms": 120000,
            "delivery.report.only.error": True, **conf_extra}
    p = Producer(conf)
    value = os.urandom(size)
    # connection + metadata outside the measured window
    p.produce(topic, value=value, on_delivery=on_error)
    if p.flush(30) != 0 or errors:
        raise RuntimeError(f"warm-up record not delivered: {errors[:3]}")
    n -= 1
    deadline = time.monotonic() + timeout
    s_cpu0, c_cpu0, t0 = server.cpu(), self_cpu_seconds(), time.perf_counter()
    produce_ = p.produce
    poll = p.poll
    i = 0
    while i < n:
        try:
            produce_(topic, value, on_delivery=on_error)
            i += 1
            if i & 1023 == 0:
                poll(0)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"produce phase exceeded {timeout}s after {i} records")
        except BufferError:
            poll(0.001)
    left = p.flush(max(1.0, deadline - time.monotonic()))
    t1, s_cpu1, c_cpu1 = time.perf_counter(), server.cpu(), self_cpu_seconds()
    if left:
        raise RuntimeError(f"{left} records not delivered within the time limit")
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[:3]}")
    secs = t1 - t0
    return phase_result(n, size, secs, s_cpu0, s_cpu1, c_cpu1 - c_cpu0)


def consume(bootstrap: str, topic: str, partitions: int, n: int, size: int, server: Server, timeout: float) -> dict:
    # librdkafka stops fetching a partition for fetch.queue.backoff.ms (default 1000) once its local
    # queue holds queued.min.messages (100000): with the defaults, a consumer that drains faster than
    # that sits idle most of the time, whatever the broker. 10 ms keeps the fetcher busy.
    c = Consumer({**client_conf(bootstrap), "group.id": f"bench-{os.getpid()}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": False,
                  "fetch.queue.backoff.ms": 10})
    try:
        deadline = time.monotonic() + timeout
        t_assign = time.perf_counter()
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        # The window starts when the first records are in hand: before that, librdkafka waits out
        # its own 500 ms offset-query timer after assign(), whatever the broker.
        got = 0
        nbytes = 0
        t0 = s_cpu0 = c_cpu0 = None
        max_gap = 0.0
        last = None
        while got < n:
            msgs = c.consume(num_messages=10000, timeout=1.0)
            now = time.perf_counter()
            k = 0
            for m in msgs:
                if m.error() is not None:
                    if m.error().code() < 0:
                        continue
                    raise RuntimeError(f"consume error: {m.error()}")
                k += 1
                nbytes += len(m)
            if k:
                if t0 is None:
                    t0, s_cpu0, c_cpu0 = now, server.cpu(), self_cpu_seconds()
                    first_after = now - t_assign
                    first_batch = k
                elif last is not None:
                    max_gap = max(max_gap, now - last)
                last = now
                got += k
            if time.monotonic() > deadline:
                raise RuntimeError(f"consume phase exceeded {timeout}s after {got} of {n} records")
        t1, s_cpu1, c_cpu1 = time.perf_counter(), server.cpu(), self_cpu_seconds()
        if nbytes != got * size:
            raise RuntimeError(f"consumed {nbytes} value bytes for {got} records of {size} bytes")
        # rates over the records that arrived after the first consume() that returned any
        res = phase_result(got - first_batch, size, max(t1 - t0, 1e-6), s_cpu0, s_cpu1, c_cpu1 - c_cpu0)
        res["records"] = got
        res["first_records_after_assign_s"] = round(first_after, 3)
        res["longest_wait_between_records_s"] = round(max_gap, 3)
        # anything past the end would be a duplicate
        extra = sum(1 for m in c.consume(num_messages=1000, timeout=0.5) if m.error() is None)
        res["extra_records"] = extra
        if extra:
            raise RuntimeError(f"{extra} records more than produced")
        return res
    finally:
        c.close()


def phase_result(n: int, size: int, secs: float, s0, s1, client_cpu: float) -> dict:
    server_cpu = (s1 - s0) if (s0 is not None and s1 is not None) else None
    return {
        "records": n,
        "seconds": round(secs, 3),
        "records_per_s": round(n / secs, 1),
        "mb_per_s": round(n * size / secs / 1e6, 2),
        "server_cpu_util": None if server_cpu is None else round(server_cpu / secs, 3),
        "server_cpu_us_per_record": None if server_cpu is None else round(server_cpu * 1e6 / n, 3),
        "client_cpu_util": round(client_cpu / secs, 3),
    }


def run_broker(name: str, argv: list[str], port: int, args, out: Path, data_dir: Path | None) -> dict:
    log = out / f"{name}.log"
    srv = Server(name, argv, port, log, args.server_core)
    res: dict = {"argv": argv, "log": str(log)}
    try:
        srv.start()
        bootstrap = f"127.0.0.1:{port}"
        keys = api_keys(port)
        if 0 not in keys or 1 not in keys:
            res["status"] = "skipped: the broker does not advertise Produce (0) and Fetch (1) in ApiVersions"
            return res
        res["runs"] = []
        for run in range(args.runs):
            topic = f"bench-data-{run}"
            create_topic(bootstrap, topic, args.partitions)
            tag = f"{name} run {run + 1}/{args.runs}"
            say(f"{tag}: produce {args.records:,} x {args.size} B into {topic}")
            prod = produce(bootstrap, topic, args.records, args.size, {}, srv, args.phase_timeout)
            say(f"{tag}: produce {fmt_phase(prod)}")
            cons = consume(bootstrap, topic, args.partitions, args.records, args.size, srv, args.phase_timeout)
            say(f"{tag}: consume {fmt_phase(cons)}")
            res["runs"].append({"topic": topic, "produce": prod, "consume": cons})
        for phase in ("produce", "consume"):  # the median run by records/s
            ordered = sorted((r[phase] for r in res["runs"]), key=lambda p: p["records_per_s"])
            res[phase] = dict(ordered[len(ordered) // 2], runs_records_per_s=[r[phase]["records_per_s"]
                                                                              for r in res["runs"]])
        res["server_rss_mb_at_end"] = srv.rss_mb()
        if data_dir is not None:
            res["data_dir_bytes"] = sum(f.stat().st_size for f in data_dir.rglob("*") if f.is_file())
        res["status"] = "ok"
    except Exception as e:  # report and go on with the next broker
        res["status"] = f"failed: {e}"
        res["log_tail"] = srv.log_tail()
        say(f"{name}: FAILED: {e}\n{srv.log_tail()}")
    finally:
        rc = srv.stop()
        res["exit_code"] = rc
    return res


def fmt_phase(p: dict) -> str:
    extra = ""
    if "longest_wait_between_records_s" in p:
        extra = f", longest wait {p['longest_wait_between_records_s'] * 1000:.0f} ms"
    return (f"{p['records_per_s']:,.0f} rec/s, {p['mb_per_s']:.1f} MB/s in {p['seconds']:.2f}s "
            f"(server CPU {pct(p['server_cpu_util'])}, client CPU {pct(p['client_cpu_util'])}{extra})")


def pct(x) -> str:
    return "-" if x is None else f"{x * 100:.0f}%"


T0 = time.monotonic()


def say(msg: str) -> None:
    print(f"[+{time.monotonic() - T0:5.1f}s] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ringleader", help="ringleader binary (skipped if not given)")
    ap.add_argument("--tansu", help="tansu binary (skipped if not given)")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100, help="record value bytes (no key)")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3, help="produce+consume rounds per broker (new topic each); "
                                                         "the median is reported")
    ap.add_argument("--server-core", type=int, default=0, help="taskset core for the brokers (-1: no pinning)")
    ap.add_argument("--phase-timeout", type=float, default=300.0, help="seconds allowed per produce/consume phase")
    ap.add_argument("--out", default="target/bench-data", help="directory for logs and data")
    ap.add_argument("--json", help="results file (default OUT/results.json)")
    ap.add_argument("--keep-data", action="store_true", help="keep ringleader's data directory")
    args = ap.parse_args()
    if args.server_core < 0 or not shutil.which("taskset"):
        args.server_core = None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    json_path = Path(args.json) if args.json else out / "results.json"

    results: dict = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                    "loadavg_at_start": open("/proc/loadavg").read().split()[:3]},
        "setup": {
            "records": args.records, "record_bytes": args.size, "partitions": args.partitions, "runs": args.runs,
            "server_core": args.server_core,
            "client_affinity": sorted(os.sched_getaffinity(0)),
            "client": f"confluent-kafka {__import__('confluent_kafka').__version__} "
                      f"(librdkafka {__import__('confluent_kafka').libversion()[0]})",
            "producer": "acks=all, linger.ms=5, librdkafka default batch.size/batch.num.messages, no compression, "
                        "no keys (sticky partitioning)",
            "consumer": "assign all partitions from the beginning (no group), consume(10000), default fetch sizes, "
                        "fetch.queue.backoff.ms=10; timed from the first consume() that returned records",
            "mb": "10^6 bytes of record values",
        },
        "brokers": {},
    }
    data_dir = None
    if args.ringleader:
        port = free_port()
        data_dir = Path(tempfile.mkdtemp(prefix="ringleader-bench-data-"))
        fs_type = subprocess.run(["df", "--output=fstype", str(data_dir)], capture_output=True, text=True).stdout.split()
        results["setup"]["ringleader_data_dir"] = {"path": str(data_dir), "fstype": fs_type[-1] if fs_type else None}
        argv = [args.ringleader, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir),
                "--cores", "1"]
        say(f"ringleader on 127.0.0.1:{port}, data dir {data_dir}")
        try:
            results["brokers"]["ringleader"] = run_broker("ringleader", argv, port, args, out, data_dir)
        finally:
            if not args.keep_data:
                shutil.rmtree(data_dir, ignore_errors=True)
    if args.tansu:
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        argv = [args.tansu, "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]
        say(f"tansu on 127.0.0.1:{port} (memory storage)")
        results["brokers"]["tansu"] = run_broker("tansu", argv, port, args, out, None)

    b = results["brokers"]

    def get(name, phase, key):
        return ((b.get(name) or {}).get(phase) or {}).get(key)

    ratios = {}
    for phase in ("produce", "consume"):
        r, t = get("ringleader", phase, "records_per_s"), get("tansu", phase, "records_per_s")
        ratios[phase] = round(r / t, 3) if r and t else None
    def ratio_of(key, phase):
        r, t = get("ringleader", phase, key), get("tansu", phase, key)
        return round(r / t, 3) if r and t else None

    for phase in ("produce", "consume"):
        ratios[f"{phase}_server_cpu_per_record"] = ratio_of("server_cpu_us_per_record", phase)
    results["ratio_ringleader_over_tansu"] = ratios
    results["machine"]["loadavg_at_end"] = open("/proc/loadavg").read().split()[:3]
    json_path.write_text(json.dumps(results, indent=2))

    # ------------------------------------------------------------------ table
    names = [n for n in ("ringleader", "tansu") if n in b]
    print()
    print(f"Produce/consume: {args.records:,} records x {args.size} B, {args.partitions} partitions, "
          f"median of {args.runs} runs, "
          f"server core {args.server_core}, client {results['setup']['client']} on cores "
          f"{results['setup']['client_affinity']}")
    print("producer: acks=all, linger.ms=5, default batching; consumer: assigned partitions from the beginning")
    print()
    w = 19
    print(f"{'':28}" + "".join(f"{n:>{w}}" for n in names) + f"{'ringleader/tansu':>{w + 2}}")

    def row(label, f, ratio=None):
        print(f"{label:28}" + "".join(f"{f(n):>{w}}" for n in names) +
              (f"{ratio:>{w + 2}}" if ratio is not None else ""))

    for phase in ("produce", "consume"):
        rr = ratios.get(phase)
        row(f"{phase} records/s", lambda n: "-" if get(n, phase, "records_per_s") is None
            else f"{get(n, phase, 'records_per_s'):,.0f}", "-" if rr is None else f"{rr:.2f}x")
        row(f"{phase} MB/s", lambda n: "-" if get(n, phase, "mb_per_s") is None else f"{get(n, phase, 'mb_per_s'):.1f}")
        row(f"{phase} seconds", lambda n: "-" if get(n, phase, "seconds") is None else f"{get(n, phase, 'seconds'):.2f}")
        row(f"  server CPU", lambda n: pct(get(n, phase, "server_cpu_util")))
        cpr = ratio_of("server_cpu_us_per_record", phase)
        row(f"  server CPU us/record", lambda n: "-" if get(n, phase, "server_cpu_us_per_record") is None
            else f"{get(n, phase, 'server_cpu_us_per_record'):.2f}", "-" if cpr is None else f"{cpr:.2f}x")
        row(f"  client CPU", lambda n: pct(get(n, phase, "client_cpu_util")))
        row(f"  all runs, records/s", lambda n: "/".join(f"{x / 1000:.0f}k" for x in get(n, phase, "runs_records_per_s") or []))
        if phase == "consume":
            row(f"  longest wait, ms", lambda n: "-" if get(n, phase, "longest_wait_between_records_s") is None
                else f"{get(n, phase, 'longest_wait_between_records_s') * 1000:.0f}")
    print()
    for n in names:
        print(f"{n}: {b[n]['status']}")
    print(f"results: {json_path}")
    return 0 if all(b[n]["status"] == "ok" for n in names) else 1


if __name__ == "__main__":
    sys.exit(main())

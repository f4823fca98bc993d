#!/usr/bin/env python3
"""The failover row of scripts/bench-cluster.sh: how long a group cannot commit when its coordinator dies.

One confluent-kafka (librdkafka) consumer commits offsets for one group synchronously, in a loop, on a thread of
its own, for the whole run (a failed commit is retried after 10 ms, whatever the error). Each round:

1. settle: every live node names the same coordinator for the group (FindCoordinator v1, asked of each node
   directly), commits have been acknowledged for --settle seconds, and, for Kafka, every `__consumer_offsets`
   partition has its full ISR again (the node restarted in the previous round caught up);
2. that coordinator's process is killed with SIGKILL;
3. recovery = time from the kill until the first commit *sent after the kill* is acknowledged (by any node);
4. the killed node is started again on its data and ports.
After the last round the committer stops and a second client's OffsetFetch must return the last acknowledged
offset. (Commits go on through every failover, so a commit lost in one would be overwritten by the next; that
every acknowledged commit survives a kill is what tests/clients/test_cluster.py checks, committing nothing
while it looks.)

The nodes come from --nodes, a JSON file the shell script writes:
  {"kind": "ringleader" | "kafka", "nodes": [{"id": 1, "addr": "127.0.0.1:P", "pidfile": F, "log": L,
   "restart": [argv...]}, ...]}
A Ringleader node is restarted by running `restart` in the background (its output appended to `log`, its pid
written to `pidfile`), then waiting until it accepts connections; a Kafka node by running `restart`
(scripts/kafka-ref.sh start --keep-data), which returns once the broker has started and writes the pid file.

What happened in between is read back from the nodes' logs (wall-clock times, relative to the kill): for
Ringleader the `__consumer_offsets leader` lines of the group's partition (the nodes run with
RUST_LOG=info,engine::runtime::replicated=debug); for Kafka the controller's fencing of the dead broker, the
KRaft leader change when the dead node was the active controller, and the new group coordinator's load of the
partition. Output: JSON (--out) with every round and p50 / max, and a line per round on stderr.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import re
import signal
import socket
import statistics
import struct
import subprocess
import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def log(msg: str) -> None:
    print(f"failover: {msg}", flush=True, file=__import__("sys").stderr)


def java_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    b = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(b), 2):
        h = (31 * h + int.from_bytes(b[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group: str, partitions: int = 50) -> int:
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# ------------------------------------------------------------------------------------------ raw protocol
def find_coordinator(addr: str, group: str, timeout: float = 2.0) -> int | None:
    """FindCoordinator v1 for `group`, asked of `addr` alone: the coordinator's node id, or None (an error
    code, or the node does not answer)."""
    host, port = addr.rsplit(":", 1)
    client = b"failover"
    body = struct.pack(">h", len(group)) + group.encode() + struct.pack(">b", 0)
    header = struct.pack(">hhih", 10, 1, 7, len(client)) + client
    req = header + body
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(req)) + req)
            n = struct.unpack(">i", _read(s, 4))[0]
            resp = _read(s, n)
    except OSError:
        return None
    # correlation id, throttle_time_ms, error_code, error_message (nullable string), node_id, host, port
    err = struct.unpack(">h", resp[8:10])[0]
    mlen = struct.unpack(">h", resp[10:12])[0]
    pos = 12 + max(mlen, 0)
    node = struct.unpack(">i", resp[pos:pos + 4])[0]
    return node if err == 0 and node >= 0 else None


def _read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            raise OSError("closed")
        out += b
    return out


def listening(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------- nodes
class Node:
    def __init__(self, d: dict, kind: str):
        self.id = d["id"]
        self.addr = d["addr"]
        self.pidfile = d["pidfile"]
        self.log = d["log"]
        self.restart_argv = d["restart"]
        self.kind = kind
        self.alive = True

    def pid(self) -> int:
        return int(open(self.pidfile).read().strip())

    def kill(self) -> None:
        os.kill(self.pid(), signal.SIGKILL)
        self.alive = False

    def restart(self) -> None:
        if self.kind == "ringleader":
            env = dict(os.environ, NO_COLOR="1", RUST_LOG="info,engine::runtime::replicated=debug")
            with open(self.log, "ab") as out:
                p = subprocess.Popen(self.restart_argv, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, start_new_session=True)
            with open(self.pidfile, "w") as f:
                f.write(f"{p.pid}\n")
            deadline = time.monotonic() + 60
            while not listening(self.addr):
                if p.poll() is not None:
                    raise RuntimeError(f"node {self.id} exited at restart ({p.returncode}); log {self.log}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {self.id} does not listen 60 s after its restart")
                time.sleep(0.05)
        else:
            subprocess.run(self.restart_argv, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                           timeout=180)
        self.alive = True


# ------------------------------------------------------------------------------------------- committer
class Committer(threading.Thread):
    """Commits offset 1, 2, 3, ... for the group, synchronously, until stopped."""

    def __init__(self, bootstrap: str, group: str, topic: str):
        super().__init__(daemon=True)
        self.c = Consumer(client_conf(bootstrap, group))
        self.topic = topic
        self.lock = threading.Lock()
        self.offset = 0
        self.acked = 0              # last acknowledged offset
        self.last_ack_at = 0.0
        self.ok_since = None        # monotonic time since when every commit succeeded
        self.errors: dict[str, int] = {}
        self.watch_from = None      # monotonic kill time: report the first ack of a commit sent after it
        self.first_ack = None
        self.errors_since_watch = 0
        self.acked_event = threading.Event()
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.offset += 1
            start = time.monotonic()
            try:
                out = self.c.commit(offsets=[TopicPartition(self.topic, 0, self.offset)], asynchronous=False)
                err = out[0].error
                if err is not None:
                    raise KafkaException(err)
                end = time.monotonic()
                with self.lock:
                    self.acked = self.offset
                    self.last_ack_at = end
                    if self.ok_since is None:
                        self.ok_since = end
                    if self.watch_from is not None and self.first_ack is None and start >= self.watch_from:
                        self.first_ack = end
                        self.acked_event.set()
            except KafkaException as e:
                k = e.args[0]
                name = k.name() if hasattr(k, "name") else str(k)
                with self.lock:
                    self.errors[name] = self.errors.get(name, 0) + 1
                    self.ok_since = None
                    if self.watch_from is not None:
                        self.errors_since_watch += 1
                time.sleep(0.01)

    def watch(self, t: float) -> None:
        with self.lock:
            self.watch_from = t
            self.first_ack = None
            self.errors_since_watch = 0
            self.acked_event.clear()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=60)
        self.c.close()


def client_conf(bootstrap: str, group: str) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "logger": logging.getLogger("librdkafka"),
        "broker.address.family": "v4",
        "socket.timeout.ms": 5000,
        "socket.connection.setup.timeout.ms": 2000,
        "reconnect.backoff.max.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000,
    }


def committed(bootstrap: str, group: str, topic: str) -> int | None:
    c = Consumer(client_conf(bootstrap, group))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                return c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
            except KafkaException:
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.1)
    finally:
        c.close()


# ------------------------------------------------------------------------------------------ log events
RL_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z")
KAFKA_TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def log_lines_after(path: str, wall: float, until: float):
    """(seconds after `wall`, line) for the lines of `path` stamped in [wall - 0.5 s, until]."""
    out = []
    try:
        f = open(path, errors="replace")
    except OSError:
        return out
    with f:
        for line in f:
            m = RL_TS.match(line)
            if m:
                t = datetime.datetime.fromisoformat(m[1][:26]).replace(tzinfo=datetime.timezone.utc).timestamp()
            else:
                m = KAFKA_TS.match(line)
                if not m:
                    continue
                t = datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()  # local time
            if wall - 0.5 <= t <= until:
                out.append((round(t - wall, 3), line.rstrip()))
    return out


def events(kind: str, nodes: list[Node], victim: Node, partition: int, wall: float, until: float) -> dict:
    """What the surviving nodes logged between the kill and the first acknowledged commit (+5 s)."""
    ev: dict = {}
    for n in nodes:
        if n is victim:
            continue
        for t, line in log_lines_after(n.log, wall, until):
            if t < 0:
                continue
            if kind == "ringleader":
                if f"partition={partition} " in line and "__consumer_offsets leader" in line:
                    m = re.search(r"leader=(\S+)", line)
                    if m and m[1] != "None":
                        ev.setdefault("new_leader_known_s", {}).setdefault(str(n.id), t)
            else:
                if "Fencing broker" in line or ("fenced" in line and f"broker {victim.id}" in line.lower()):
                    ev.setdefault("victim_fenced_s", t)
                if "Completed transition to Leader" in line and "RaftManager" in line:
                    ev.setdefault("new_kraft_leader_s", t)
                if f"__consumer_offsets-{partition}" in line and ("Finished loading" in line
                                                                  or "Elected as the group coordinator" in line
                                                                  or "became the leader" in line.lower()):
                    ev.setdefault("new_coordinator_loaded_s", t)
    return ev


def kraft_leader(node: Node) -> bool:
    """Kafka: whether `node` was the active controller (the last KRaft transition it logged was to Leader)."""
    last = None
    try:
        with open(node.log, errors="replace") as f:
            for line in f:
                m = re.search(r"\[RaftManager id=\d+\] Completed transition to (\w+)", line)
                if m:
                    last = m[1]
    except OSError:
        return False
    return last == "Leader"


def full_isr(bootstrap: str, want: int, timeout: float) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "logger": logging.getLogger("librdkafka")})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(topic="__consumer_offsets", timeout=5)
            t = md.topics.get("__consumer_offsets")
            if t and t.error is None and t.partitions and all(len(p.isrs) >= want for p in t.partitions.values()):
                return True
        except KafkaException:
            pass
        time.sleep(0.5)
    return False


# ------------------------------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--group", default=f"failover-{os.getpid()}")
    ap.add_argument("--topic", default="failover-t")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds of acknowledged commits before a kill")
    ap.add_argument("--timeout", type=float, default=120.0, help="give up on a round after this many seconds")
    ap.add_argument("--label", default="")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    # librdkafka logs every refused connection to the dead node at ERROR: expected here, and counted instead
    # (commit_errors).
    logging.getLogger("librdkafka").setLevel(logging.CRITICAL)

    spec = json.load(open(args.nodes))
    kind = spec["kind"]
    nodes = [Node(d, kind) for d in spec["nodes"]]
    bootstrap = ",".join(n.addr for n in nodes)
    partition = partition_for(args.group)

    # The topic on every node (a Ringleader cluster keeps one registry per node; Kafka answers the second and
    # third with TOPIC_ALREADY_EXISTS).
    for n in nodes:
        admin = AdminClient({"bootstrap.servers": n.addr, "broker.address.family": "v4",
                             "logger": logging.getLogger("librdkafka")})
        fs = admin.create_topics([NewTopic(args.topic, num_partitions=1, replication_factor=-1)],
                                 request_timeout=15, operation_timeout=10)
        try:
            fs[args.topic].result(timeout=30)
        except KafkaException as e:
            if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise

    committer = Committer(bootstrap, args.group, args.topic)
    committer.start()
    rounds = []
    failed = None
    try:
        for r in range(args.rounds):
            # 1. settle
            deadline = time.monotonic() + args.timeout
            if kind == "kafka" and not full_isr(bootstrap, len(nodes), args.timeout):
                raise RuntimeError(f"round {r}: __consumer_offsets has not got its full ISR back")
            while True:
                ids = {find_coordinator(n.addr, args.group) for n in nodes}
                with committer.lock:
                    ok_for = 0.0 if committer.ok_since is None else time.monotonic() - committer.ok_since
                if len(ids) == 1 and None not in ids and ok_for >= args.settle:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"round {r}: no settled coordinator (answers {ids}, commits ok for "
                                       f"{ok_for:.1f} s)")
                time.sleep(0.1)
            leader = ids.pop()
            victim = next(n for n in nodes if n.id == leader)
            was_controller = kind == "kafka" and kraft_leader(victim)
            with committer.lock:
                acked_before = committer.acked
            # 2. kill
            wall = time.time()
            t_kill = time.monotonic()
            victim.kill()
            committer.watch(t_kill)
            # 3. recovery
            if not committer.acked_event.wait(args.timeout):
                raise RuntimeError(f"round {r}: no commit acknowledged {args.timeout:.0f} s after killing node "
                                   f"{leader}")
            with committer.lock:
                recovery = committer.first_ack - t_kill
                errs = committer.errors_since_watch
            new_leader = find_coordinator(next(n for n in nodes if n.alive).addr, args.group)
            time.sleep(2)  # let the survivors' log lines land
            ev = events(kind, nodes, victim, partition, wall, wall + recovery + 5)
            # 4. restart
            t0 = time.monotonic()
            victim.restart()
            row = {"round": r, "killed": leader, "new_coordinator": new_leader, "recovery_ms": round(recovery * 1000),
                   "failed_commits_meanwhile": errs, "acked_before_kill": acked_before,
                   "restart_s": round(time.monotonic() - t0, 1), "events_s": ev}
            if kind == "kafka":
                row["killed_was_kraft_leader"] = was_controller
            rounds.append(row)
            log(f"{args.label} round {r}: killed node {leader}{' (KRaft leader)' if was_controller else ''}, "
                f"next commit acknowledged after {recovery * 1000:.0f} ms ({errs} failed meanwhile), "
                f"new coordinator {new_leader}, events {ev}")
    except Exception as e:  # noqa: BLE001 - reported in the JSON and the exit code
        failed = f"{type(e).__name__}: {e}"
        log(f"{args.label}: FAILED: {failed}")
    finally:
        committer.stop()
    final = committed(bootstrap, args.group, args.topic)
    lost = final is None or final < committer.acked

    rec = [x["recovery_ms"] for x in rounds]
    out = {"label": args.label, "kind": kind, "group": args.group, "partition": partition, "rounds": rounds,
           "recovery_ms_p50": statistics.median(rec) if rec else None, "recovery_ms_max": max(rec) if rec else None,
           "last_acked": committer.acked, "committed_at_end": final, "lost_commits": lost,
           "commit_errors": committer.errors,
           "failed": failed}
    json.dump(out, open(args.out, "w"), indent=2)
    log(f"{args.label}: {len(rec)} rounds, kill → next acknowledged commit p50 {out['recovery_ms_p50']} ms, "
        f"max {out['recovery_ms_max']} ms; at the end committed {final}, last acknowledged {committer.acked}"
        f"{' — LOST' if lost else ''}")
    if failed or lost:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

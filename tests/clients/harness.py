"""Process harness and raw-protocol helpers for the Ringleader real-client tests.

Everything here targets 127.0.0.1 only and every blocking call is bounded by a timeout.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BIN = REPO / "target" / "release" / "ringleader"

START_TIMEOUT_S = float(os.environ.get("RINGLEADER_START_TIMEOUT", "20"))
STOP_TIMEOUT_S = float(os.environ.get("RINGLEADER_STOP_TIMEOUT", "15"))
NODE_ID = 1  # default broker node id (single broker)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def binary_path() -> Path:
    return Path(os.environ.get("RINGLEADER_BIN", str(DEFAULT_BIN)))


# Ports free_port() handed out in this process: never handed out twice, as one may still be free only
# because what it went to has not bound it yet (a cluster's voter ports until its nodes start).
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A free port below the ephemeral range (32768+), so that a broker restarted on the same
    port cannot find it taken by some client's outgoing connection in between. Spread by pid so
    parallel workers (pytest-xdist) rarely probe the same ports."""
    import os
    import random

    rng = random.Random(os.getpid() ^ int(time.time() * 1000))
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            _HANDED_OUT.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_test_certs(dir: Path) -> Path:
    """The security tests' CA, server and client certificates (scripts/gen-test-certs.sh), made in `dir` at
    test time; returns `dir`."""
    subprocess.run(["bash", str(REPO / "scripts" / "gen-test-certs.sh"), str(dir)], check=True, timeout=60,
                   stdin=subprocess.DEVNULL, capture_output=True)
    return Path(dir)


def security_sets(certs: Path) -> list[str]:
    """The key=value settings both brokers get in the security tests (scripts/security-config.sh)."""
    out = subprocess.run(["bash", str(REPO / "scripts" / "security-config.sh"), str(certs)], check=True,
                         timeout=30, stdin=subprocess.DEVNULL, capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if ln.strip()]


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL the broker if the test process dies (PR_SET_PDEATHSIG)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)
    except Exception:  # pragma: no cover - best effort
        pass


def broker_env() -> dict:
    env = dict(os.environ)
    env.setdefault("NO_COLOR", "1")
    return env


class BrokerError(AssertionError):
    pass


class Broker:
    """One `ringleader serve` process (restartable on the same port and data dir)."""

    def __init__(self, data_dir: Path, log_path: Path, sets: list[str] | None = None,
                 extra_args: list[str] | None = None, port: int | None = None,
                 listeners: list[str] | None = None):
        self.binary = binary_path()
        self.port_chosen = port is None  # by free_port(): another may be picked if it is taken
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.bootstrap = f"{self.host}:{self.port}"
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        self.sets = list(sets or [])
        self.extra_args = list(extra_args or [])
        # Extra listeners (names such as SASL_SSL, each its own security protocol by Kafka's default
        # listener.security.protocol.map) on free ports next to the PLAINTEXT one: name -> port.
        self.listeners: dict[str, int] = {}
        for name in listeners or []:
            port_l = free_port()
            while port_l == self.port or port_l in self.listeners.values():
                port_l = free_port()
            self.listeners[name] = port_l
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.exit_codes: list[int] = []

    # ----------------------------------------------------------------- lifecycle
    def argv(self) -> list[str]:
        argv = [str(self.binary), "serve", "--listen", self.bootstrap, "--data-dir", str(self.data_dir)]
        if self.listeners:
            # --listen replaces the PLAINTEXT listener's address; the others come from `listeners`.
            argv += ["--set", "listeners=" + ",".join(
                [f"PLAINTEXT://{self.bootstrap}"] + [f"{n}://{self.host}:{p}" for n, p in self.listeners.items()])]
        for kv in self.sets:
            argv += ["--set", kv]
        return argv + self.extra_args

    def listener(self, name: str) -> str:
        """host:port of the extra listener `name` (e.g. SASL_SSL)."""
        return f"{self.host}:{self.listeners[name]}"

    def start(self) -> "Broker":
        # A port free_port() found free can be taken before the broker binds it (another xdist
        # worker's broker picked it in the same instant): the broker then refuses to start,
        # "cannot listen on ...", and a first start moves to another port.
        for attempt in range(3):
            try:
                return self._start_once()
            except BrokerError as e:
                if not (self.port_chosen and self.starts == 1 and "cannot listen on" in str(e)
                        and attempt < 2):
                    raise
                logging.getLogger(__name__).warning("port %d taken; retrying on another", self.port)
                self.starts = 0
                self.port = free_port()
                self.bootstrap = f"{self.host}:{self.port}"
        raise AssertionError("unreachable")

    def _start_once(self) -> "Broker":
        if not self.binary.exists():
            raise BrokerError(
                f"ringleader binary not found at {self.binary} "
                "(build with `cargo build --release` or set RINGLEADER_BIN)")
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as f:
            f.write(f"\n===== start #{self.starts + 1}: {' '.join(self.argv())}\n".encode())
            offset = f.tell()
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                self.argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=broker_env(), preexec_fn=_die_with_parent, cwd=str(self.data_dir.parent))
        finally:
            log.close()
        self.starts += 1
        self._wait_listening(offset)
        return self

    def _wait_listening(self, offset: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        needle = f"{self.host}:{self.port}"
        while True:
            text = self.log_text(offset)
            for line in text.splitlines():
                if "listening on" in line and needle in line:
                    return
            rc = self.proc.poll()
            if rc is not None:
                raise BrokerError(
                    f"ringleader exited with code {rc} before logging 'listening on {needle}'.\n"
                    f"--- last log lines ({self.log_path}) ---\n{self.log_tail(max_lines=12)}")
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerError(
                    f"ringleader did not log 'listening on {needle}' within {START_TIMEOUT_S}s.\n"
                    f"--- last log lines ({self.log_path}) ---\n{self.log_tail(max_lines=12)}")
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the broker and wait (bounded) for it to exit; returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
                raise BrokerError(
                    f"ringleader did not exit within {STOP_TIMEOUT_S}s of signal {sig}.\n"
                    f"--- last log lines ({self.log_path}) ---\n{self.log_tail(max_lines=12)}")
        rc = self.proc.returncode
        self.exit_codes.append(rc)
        return rc

    def restart(self) -> "Broker":
        rc = self.stop(signal.SIGTERM)
        if rc != 0:
            raise BrokerError(f"ringleader exited with code {rc} on SIGTERM (expected 0).\n"
                              f"--- last log lines ({self.log_path}) ---\n{self.log_tail(max_lines=12)}")
        self.proc = None
        return self.start()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass

    # ----------------------------------------------------------------------- logs
    def log_text(self, offset: int = 0) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return ""
        return _ANSI.sub("", data.decode("utf-8", "replace"))

    def log_tail(self, max_chars: int = 6000, max_lines: int | None = None) -> str:
        text = self.log_text()
        if max_lines is not None:
            text = "\n".join(text.splitlines()[-max_lines:])
        return text if len(text) <= max_chars else "...\n" + text[-max_chars:]

    def __repr__(self) -> str:
        return f"Broker({self.bootstrap}, data_dir={self.data_dir}, pid={getattr(self.proc, 'pid', None)})"


# --------------------------------------------------------------------- raw wire helpers
def kstring(s: str | None) -> bytes:
    """Classic (non-compact) nullable string: int16 length + UTF-8 bytes."""
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def request_frame(api_key: int, api_version: int, correlation_id: int, body: bytes = b"",
                  client_id: str | None = "ringleader-raw-test") -> bytes:
    """Size-prefixed request with header v1 (api_key, api_version, correlation_id, client_id)."""
    payload = struct.pack(">hhi", api_key, api_version, correlation_id) + kstring(client_id) + body
    return struct.pack(">i", len(payload)) + payload


def connect(bootstrap: str, timeout: float = 5.0) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.settimeout(timeout)
    return s


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def recv_frame(sock: socket.socket) -> bytes:
    """Read one size-prefixed response; returns the payload (without the size)."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    assert 0 <= size <= 64 * 1024 * 1024, f"implausible response size {size}"
    return recv_exact(sock, size)


def roundtrip(bootstrap: str, frame: bytes, timeout: float = 5.0) -> bytes:
    with connect(bootstrap, timeout) as s:
        s.sendall(frame)
        return recv_frame(s)


class Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise AssertionError(f"response truncated: need {size} bytes at {self.pos}, have {len(self.data)}")
        vals = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return vals if len(vals) > 1 else vals[0]

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n]
        assert len(s) == n, "response truncated inside a string"
        self.pos += n
        return s.decode()

    def remaining(self) -> int:
        return len(self.data) - self.pos


def parse_api_versions_v0(payload: bytes):
    """Response header v0 + ApiVersionsResponse v0: (correlation_id, error_code, [(key, min, max)], trailing)."""
    r = Reader(payload)
    corr = r.take(">i")
    err = r.take(">h")
    n = r.take(">i")
    assert 0 <= n <= 1000, f"implausible ApiKeys array length {n}"
    keys = [r.take(">hhh") for _ in range(n)]
    return corr, err, keys, r.remaining()


def wait_closed(sock: socket.socket, timeout: float) -> tuple[str, bytes]:
    """Read until the peer closes or the timeout passes.

    Returns ("closed", data) if the server closed the connection (EOF or reset),
    or ("open", data) if it was still open when the timeout expired.
    """
    sock.settimeout(0.25)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return "closed", data
        if not chunk:
            return "closed", data
        data += chunk
    return "open", data


# ------------------------------------------------------------ confluent-kafka helpers
CALL_TIMEOUT_S = 20.0


def confluent_admin(broker, **extra):
    from confluent_kafka.admin import AdminClient

    conf = {
        "bootstrap.servers": broker.bootstrap,
        "client.id": "ringleader-test-confluent",
        # route librdkafka's log lines through Python logging (captured per test) instead of
        # raw stderr, where reconnect noise from clients outliving their broker lands anywhere
        "logger": logging.getLogger("librdkafka"),
        "broker.address.family": "v4",
        "socket.timeout.ms": 10000,
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
    }
    conf.update(extra)
    return AdminClient(conf)


def confluent_create(admin, name: str, partitions: int = 3, replication_factor: int = 1,
                     config: dict | None = None):
    """Create one topic; returns None on success, or the KafkaError on failure."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                                       config=config or {})],
                             request_timeout=15, operation_timeout=10)
    assert set(fs) == {name}
    try:
        assert fs[name].result(timeout=CALL_TIMEOUT_S) is None
        return None
    except KafkaException as e:
        return e.args[0]


def confluent_topics(admin) -> dict:
    """name -> TopicMetadata for all topics (Metadata with a null topic list)."""
    md = admin.list_topics(timeout=CALL_TIMEOUT_S)
    return md.topics


def confluent_topic_ids(admin, names) -> dict:
    """name -> (topic id string, partition count) via DescribeTopics (Metadata v12+ by name)."""
    from confluent_kafka import TopicCollection

    fs = admin.describe_topics(TopicCollection(list(names)), request_timeout=15)
    out = {}
    for name, fut in fs.items():
        d = fut.result(timeout=CALL_TIMEOUT_S)
        out[name] = (str(d.topic_id), len(d.partitions))
    return out


# --------------------------------------------------------------- group test helpers
def wait_until(predicate, timeout: float, what: str, interval: float = 0.05, step=None):
    """Call `step()` (e.g. a bounded consumer poll) then `predicate()` until it is truthy;
    raises AssertionError naming `what` after `timeout` seconds. Returns the truthy value."""
    deadline = time.monotonic() + timeout
    while True:
        if step is not None:
            step()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        if step is None:
            time.sleep(interval)


def confluent_consumer(broker, group: str, **extra):
    """A confluent-kafka (librdkafka) classic-protocol group consumer with bounded timeouts.
    Keys in `extra` use librdkafka names with '_' for '.' (partition_assignment_strategy=...)."""
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "client.id": "ringleader-test-confluent-consumer",
        "logger": logging.getLogger("librdkafka"),
        "broker.address.family": "v4",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 1000,
        "socket.timeout.ms": 10000,
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
    }
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    return Consumer(conf)


def groups_cli(broker, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    """Run `ringleader groups --bootstrap <broker> ARGS...` (bounded); returns the CompletedProcess."""
    argv = [str(binary_path()), "groups", "--bootstrap", broker.bootstrap, "--timeout-ms", "10000", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env=broker_env())


def parse_cli_table(text: str) -> list[dict]:
    """Parse the first whitespace-aligned table (header line of UPPER-CASE column names) printed by
    `ringleader groups` into a list of {column: value}. Column names may contain one space
    (`COORDINATOR (ID)`), so cells are cut at the header's column start positions."""
    lines = [ln for ln in text.splitlines()]
    for i, ln in enumerate(lines):
        if ln.startswith("GROUP") and ln.strip() == ln.strip().upper():
            header = ln
            break
    else:
        return []
    starts = [m.start() for m in re.finditer(r"(?<!\S)(?!\(ID\))\S+(?: \(ID\))?", header)]
    names = [header[s:e].strip() for s, e in zip(starts, starts[1:] + [None])]
    rows = []
    for ln in lines[i + 1:]:
        if not ln.strip():
            break
        cells = [ln[s:e].strip() if e is not None else ln[s:].strip() for s, e in zip(starts, starts[1:] + [None])]
        rows.append(dict(zip(names, cells)))
    return rows


# --- confluent-kafka consumer helpers shared by the group and data-path tests ---
def assigned(consumer) -> list[int]:
    return sorted(tp.partition for tp in consumer.assignment())


def close_quietly(*consumers):
    for c in consumers:
        try:
            c.close()
        except RuntimeError:
            pass  # already closed


def committed(consumer, topic: str, partitions) -> dict[int, int]:
    res = consumer.committed([_tp(topic, p) for p in partitions], timeout=CALL_TIMEOUT_S)
    for tp in res:
        assert tp.error is None, tp
    return {tp.partition: tp.offset for tp in res}


def _tp(topic: str, partition: int):
    from confluent_kafka import TopicPartition  # the raw-protocol tests do not need the client

    return TopicPartition(topic, partition)

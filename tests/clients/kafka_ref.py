"""The reference broker (Apache Kafka 4.4.0 via scripts/kafka-ref.sh) and Kafka's own command line tools
(kafka-consumer-groups, kafka-dump-log) for differential tests against Ringleader.

Everything runs on 127.0.0.1 and every blocking call is bounded by a timeout.

`RefKafka` starts one KRaft node in a directory of its own. A watchdog process (started before the broker)
stops it when the test process that started it dies without tearing down (SIGKILL, a crash, a pytest-timeout
in a worker), and in any case after `RINGLEADER_KAFKA_REF_MAX_S` seconds (default 2 h), so a broker never
lingers forever.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness import REPO, _die_with_parent, broker_env

SCRIPT = REPO / "scripts" / "kafka-ref.sh"
START_TIMEOUT_S = float(os.environ.get("RINGLEADER_KAFKA_REF_START_TIMEOUT", "240"))
STOP_TIMEOUT_S = 90.0
TOOL_TIMEOUT_S = float(os.environ.get("RINGLEADER_KAFKA_TOOL_TIMEOUT", "120"))
MAX_LIFETIME_S = float(os.environ.get("RINGLEADER_KAFKA_REF_MAX_S", str(2 * 3600)))

# The watchdog: a child of the test process in a session of its own (so a Ctrl-C to the test's process group
# does not take it down before it has done its job). It polls its parent pid; once it is re-parented (the test
# process died) or the lifetime is over, it runs `kafka-ref.sh stop --dir DIR` and exits. The fixture's normal
# teardown stops the broker itself and then SIGTERMs the watchdog.
_WATCHDOG = r"""
import os, subprocess, sys, time
parent, script, d, max_s = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
deadline = time.monotonic() + max_s
while os.getppid() == parent and time.monotonic() < deadline:
    time.sleep(1.0)
time.sleep(1.0)  # let a start script killed with its parent finish writing the pid file
for _ in range(3):
    try:
        subprocess.run(["bash", script, "stop", "--dir", d], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=90)
    except Exception:
        pass
    if not os.path.exists(os.path.join(d, "pid")):
        break
    time.sleep(2.0)
"""


class RefKafkaError(AssertionError):
    pass


def java_available() -> bool:
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


class RefKafka:
    """One Apache Kafka 4.4.0 KRaft node started by scripts/kafka-ref.sh in `dir`."""

    def __init__(self, dir: Path, sets: list[str] | None = None, listeners: list[str] | None = None):
        self.dir = Path(dir)
        self.sets = list(sets or [])
        # extra listeners by name (`kafka-ref.sh start --listener NAME:NAME`), name -> port once started
        self.listener_names = list(listeners or [])
        self.listeners: dict[str, int] = {}
        self.bootstrap: str | None = None
        self.watchdog: subprocess.Popen | None = None

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_path(self) -> Path:
        return self.dir / "broker.log"

    def start(self) -> "RefKafka":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(SCRIPT), str(self.dir), str(MAX_LIFETIME_S)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, cwd=str(self.dir))
        argv = ["bash", str(SCRIPT), "start", "--dir", str(self.dir)]
        for kv in self.sets:
            argv += ["--set", kv]
        for name in self.listener_names:
            argv += ["--listener", f"{name}:{name}"]
        try:
            # the start script dies with the test process (the watchdog then stops what it started)
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=START_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent, cwd=str(REPO))
        except subprocess.TimeoutExpired as e:
            self.stop()
            raise RefKafkaError(f"kafka-ref.sh start did not finish within {START_TIMEOUT_S}s\n"
                                f"{e.stderr or ''}\n--- broker log ---\n{self.log_tail()}") from None
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines or not re.fullmatch(r"127\.0\.0\.1:\d+", lines[-1]):
            self.stop()
            raise RefKafkaError(f"kafka-ref.sh start failed (exit {proc.returncode})\nstdout:\n{proc.stdout}\n"
                                f"stderr:\n{proc.stderr}\n--- broker log ---\n{self.log_tail()}")
        self.bootstrap = lines[-1]
        if self.listener_names:
            for ln in (self.dir / "listeners").read_text().splitlines():
                name, addr = ln.split("=", 1)
                self.listeners[name] = int(addr.rsplit(":", 1)[1])
        return self

    def listener(self, name: str) -> str:
        """127.0.0.1:port of the extra listener `name`."""
        return f"127.0.0.1:{self.listeners[name]}"

    def pid(self) -> int | None:
        try:
            return int((self.dir / "pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def alive(self) -> bool:
        pid = self.pid()
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False

    def stop(self) -> None:
        try:
            subprocess.run(["bash", str(SCRIPT), "stop", "--dir", str(self.dir)], capture_output=True,
                           timeout=STOP_TIMEOUT_S, stdin=subprocess.DEVNULL, cwd=str(REPO))
        except subprocess.TimeoutExpired:
            pid = self.pid()
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        finally:
            if self.watchdog is not None and self.watchdog.poll() is None:
                self.watchdog.terminate()
                try:
                    self.watchdog.wait(timeout=10)
                except subprocess.TimeoutExpired:  # pragma: no cover
                    self.watchdog.kill()

    def log_tail(self, max_lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-max_lines:])
        except OSError:
            return "(no broker log)"

    def __repr__(self) -> str:
        return f"RefKafka({self.bootstrap}, dir={self.dir}, pid={self.pid()})"


# ------------------------------------------------------------------------------------------ tools
@dataclass
class ToolResult:
    argv: list[str]
    rc: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return (f"$ {' '.join(self.argv)}\nexit code {self.rc}\n--- stdout ---\n{self.stdout}"
                f"--- stderr ---\n{self.stderr}")


def _run(argv: list[str], timeout: float) -> ToolResult:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                           env=broker_env(), cwd=str(REPO), preexec_fn=_die_with_parent)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise AssertionError(f"timed out after {timeout}s: {' '.join(argv)}\nstdout:\n{out}\nstderr:\n{err}") from None
    return ToolResult(argv, p.returncode, p.stdout, p.stderr)


def kafka_tool(name: str, *args: str, timeout: float = TOOL_TIMEOUT_S) -> ToolResult:
    """Run one of Kafka 4.4.0's tools (`scripts/kafka-ref.sh tool NAME ARGS...`), bounded."""
    return _run(["bash", str(SCRIPT), "tool", name, *args], timeout)


def consumer_groups(bootstrap: str, *args: str, timeout: float = TOOL_TIMEOUT_S) -> ToolResult:
    """kafka-consumer-groups --bootstrap-server BOOTSTRAP ARGS... (Kafka 4.4.0's ConsumerGroupCommand)."""
    return kafka_tool("consumer-groups", "--bootstrap-server", bootstrap, *args, timeout=timeout)


def log_dirs(bootstrap: str, *args: str) -> dict:
    """kafka-log-dirs --describe ARGS... (Kafka 4.4.0's LogDirsCommand) against `bootstrap`: the JSON it prints
    (every broker DescribeCluster names, each with its log directories and their partitions)."""
    r = kafka_tool("log-dirs", "--bootstrap-server", bootstrap, "--describe", *args, timeout=90)
    assert r.rc == 0, r
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("{")), None)
    assert line is not None, r
    return json.loads(line)


def in_parallel(*calls):
    """Run zero-argument callables in threads (each a bounded subprocess); returns their results in order
    and re-raises the first exception."""
    results: list = [None] * len(calls)
    errors: list = [None] * len(calls)

    def run(i, fn):
        try:
            results[i] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors[i] = e

    threads = [threading.Thread(target=run, args=(i, fn), daemon=True) for i, fn in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TOOL_TIMEOUT_S + 30)
    for t in threads:
        if t.is_alive():
            raise AssertionError("a tool run did not return (thread still alive)")
    for e in errors:
        if e is not None:
            raise e
    return results


# ---------------------------------------------------------------------------- normalising, diffs
_LOG_TIME = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]")
_SPACES = re.compile(r"[ \t]+")


class Normaliser:
    """Rewrites the parts of a tool's output that legitimately differ between two brokers running the same
    scenario, and nothing else:

    * member ids = the CONSUMER-ID column (registered exactly with `add`, from each client's `memberid()`, as
      `<member:GROUP>`; an id no client of the test holds stays visible, as a difference);
    * topic ids (registered exactly with `add`);
    * the broker's own address `127.0.0.1:<port>` (the COORDINATOR column) — the only host that differs, since
      clients and both brokers are on 127.0.0.1;
    * log timestamps `[yyyy-mm-dd hh:mm:ss,SSS]` in the tool's WARN lines.

    The tool sizes its columns from the longest value in each column (member ids, hosts), so after replacing
    those values runs of blanks are folded to one and trailing blanks dropped; every column, value, state name,
    number and message stays as printed. Client ids are set by the tests (no ids embedded), so they stay."""

    def __init__(self, bootstrap: str):
        self.exact: dict[str, str] = {bootstrap: "<broker>"}

    def add(self, value: str | None, placeholder: str) -> None:
        if value:
            self.exact[value] = placeholder

    def __call__(self, text: str) -> str:
        for value in sorted(self.exact, key=len, reverse=True):
            text = text.replace(value, self.exact[value])
        text = _LOG_TIME.sub("[<time>]", text)
        return "\n".join(_SPACES.sub(" ", ln).rstrip() for ln in text.splitlines())


def intraline(a: str, b: str, context: int = 30) -> tuple[str, str]:
    """The two lines cut down to their differing stretches (with `context` characters around each), the
    differing characters bracketed: `…sequence: 0 [headerKeys: [] ]key…` vs `…sequence: 0 []key…`."""
    ops = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    out_a, out_b = [], []
    for op, i1, i2, j1, j2 in ops:
        if op == "equal":
            seg = a[i1:i2]
            first, last = (i1 == 0), (i2 == len(a))
            if len(seg) > 2 * context + 1:
                head = "" if first else seg[:context]
                tail = "" if last else seg[-context:]
                seg_out = head + "…" + tail
            else:
                seg_out = seg
            out_a.append(seg_out)
            out_b.append(seg_out)
        else:
            out_a.append(f"[{a[i1:i2]}]")
            out_b.append(f"[{b[j1:j2]}]")
    return "".join(out_a), "".join(out_b)


def fragments(a: str, b: str) -> tuple[tuple[str, str], ...]:
    """The differing stretches of two lines as (in a, in b) pairs."""
    return tuple((a[i1:i2], b[j1:j2]) for op, i1, i2, j1, j2
                 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes() if op != "equal")


def summarise_text_diffs(pairs: list[tuple[str, str, str]], left_name: str, right_name: str,
                         max_unpaired: int = 20) -> str:
    """For many (label, left text, right text) that should be equal: the kinds of line difference (the same
    differing stretches), each with its count and one example, then the lines present on one side only."""
    kinds: dict = {}
    unpaired: list[str] = []
    for label, left, right in pairs:
        a, b = left.splitlines(), right.splitlines()
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
            if op == "equal":
                continue
            la, lb = a[i1:i2], b[j1:j2]
            if op == "replace" and len(la) == len(lb):
                for x, y in zip(la, lb):
                    k = tuple((fa.strip(), fb.strip()) for fa, fb in fragments(x, y))
                    entry = kinds.setdefault(k, [0, set(), (label, x, y)])
                    entry[0] += 1
                    entry[1].add(label)
            else:
                unpaired += [f"  {label}: only in {left_name}: {x}" for x in la]
                unpaired += [f"  {label}: only in {right_name}: {y}" for y in lb]
    out = []
    w = max(len(left_name), len(right_name))
    for k, (n, labels, (label, x, y)) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        desc = "; ".join(f"{left_name} {fa!r} vs {right_name} {fb!r}" for fa, fb in k)
        cx, cy = intraline(x, y)
        out.append(f"* {n} line(s) in {len(labels)} file(s): {desc}\n    e.g. {label}:\n"
                   f"      {left_name.ljust(w)}: {cx}\n      {right_name.ljust(w)}: {cy}")
    if unpaired:
        out.append(f"lines on one side only ({len(unpaired)}):")
        out += unpaired[:max_unpaired]
        if len(unpaired) > max_unpaired:
            out.append(f"  ... and {len(unpaired) - max_unpaired} more")
    return "\n".join(out)


def side_by_side(left: str, right: str, left_name: str = "kafka", right_name: str = "ringleader",
                 width: int = 100) -> str:
    """A two-column diff: ` ` equal, `!` changed, `<` only left, `>` only right. Changed lines longer than
    the column are also shown one above the other, cut to the differing stretches (see `intraline`)."""
    a, b = left.splitlines(), right.splitlines()
    w = min(width, max([len(left_name)] + [len(x) for x in a]))

    def cell(s: str) -> str:
        return (s if len(s) <= w else s[:w - 1] + "…").ljust(w)

    out = [f"  {cell(left_name)} | {right_name}", f"  {'-' * w} | {'-' * len(right_name)}"]
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out += [f"  {cell(x)} | {x}" for x in a[i1:i2]]
            continue
        la, lb = a[i1:i2], b[j1:j2]
        for k in range(max(len(la), len(lb))):
            x = la[k] if k < len(la) else None
            y = lb[k] if k < len(lb) else None
            mark = "!" if x is not None and y is not None else ("<" if y is None else ">")
            out.append(f"{mark} {cell(x or '')} | {y or ''}")
            if x is not None and y is not None and max(len(x), len(y)) > w:
                cx, cy = intraline(x, y)
                out.append(f"      {left_name}: {cx}\n      {right_name}: {cy}")
    return "\n".join(out)


def compare_results(label: str, kafka: ToolResult, ringleader: ToolResult, norm_kafka, norm_rl) -> str | None:
    """None if exit code, stdout and stderr are equal after normalising; else a readable report."""
    problems = []
    if kafka.rc != ringleader.rc:
        problems.append(f"exit code: kafka {kafka.rc}, ringleader {ringleader.rc}")
    for stream in ("stdout", "stderr"):
        k, r = norm_kafka(getattr(kafka, stream)), norm_rl(getattr(ringleader, stream))
        if k != r:
            problems.append(f"{stream} differs (normalised):\n{side_by_side(k, r)}")
    if not problems:
        return None
    cmd = " ".join(a for a in kafka.argv[kafka.argv.index("--bootstrap-server") + 2:]) \
        if "--bootstrap-server" in kafka.argv else " ".join(kafka.argv)
    return f"=== {label}: kafka-consumer-groups {cmd}\n" + "\n".join(problems)


# ------------------------------------------------------------------------ __consumer_offsets
def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units)."""
    b = s.encode("utf-16-be")
    h = 0
    for (unit,) in struct.iter_unpack(">H", b):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def offsets_partition(group: str, partitions: int = 50) -> int:
    """Kafka's partitionFor(groupId): Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def offsets_segments(data_dir: Path) -> list[Path]:
    """The non-empty `__consumer_offsets-<p>/<20-digit>.log` segment files under a data dir, by (p, base)."""
    files = [f for f in Path(data_dir).glob("__consumer_offsets-*/*.log")
             if re.fullmatch(r"\d{20}\.log", f.name) and f.stat().st_size > 0]
    return sorted(files, key=lambda f: (int(f.parent.name.rsplit("-", 1)[1]), f.name))


def split_dumps(text: str) -> dict[str, str]:
    """kafka-dump-log output for several files -> {path: that file's section (from its `Dumping` line)}."""
    out: dict[str, list[str]] = {}
    current = None
    for ln in text.splitlines():
        if ln.startswith("Dumping "):
            current = ln[len("Dumping "):].strip()
            out[current] = []
        if current is not None:
            out[current].append(ln)
    return {k: "\n".join(v) for k, v in out.items()}


def wait_for_bytes(path: Path, needles: list[bytes], timeout: float) -> None:
    """Wait (bounded) until `path` exists, contains every needle and its size has been stable for 0.5 s."""
    deadline = time.monotonic() + timeout
    last_size, stable_since = -1, time.monotonic()
    while True:
        try:
            data = path.read_bytes()
        except OSError:
            data = None
        if data is not None:
            if len(data) != last_size:
                last_size, stable_since = len(data), time.monotonic()
            elif all(n in data for n in needles) and time.monotonic() - stable_since >= 0.5:
                return
        if time.monotonic() > deadline:
            missing = [n for n in needles if data is None or n not in data]
            raise AssertionError(f"{path}: after {timeout}s still missing {missing} "
                                 f"(size {None if data is None else len(data)})")
        time.sleep(0.1)

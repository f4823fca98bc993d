#!/usr/bin/env bash
# Time to stable for KIP-848 groups (issue 16, item 7): Ringleader against the reference Apache Kafka 4.4.0 broker,
# the same client (loadgen, `--protocol consumer`) and the same load against each broker in turn.
#
#   ./scripts/bench-stable.sh              full run (~25 min after the build)
#   ./scripts/bench-stable.sh --joins 4    fewer single-member joins (a smoke run, ~8 min)
#
# Options:
#   --members N      members of the group (1000)
#   --share S        partitions per member once the joiner is in: the topic has S * (N + 1) partitions (2)
#   --joins K        single-member joins into the stable group, one after the other (12)
#   --no-off         skip the Ringleader run with the short interval off (Kafka's intervals on Ringleader)
#   --no-nofsync     skip the Ringleader run with the benchmark-only `--fsync never`
#   --skip-build     use the binaries already in target/release
#   --out DIR        results directory (default target/bench-stable)
#
# Two rows per broker, from one loadgen process of N members ("the group") plus K short ones ("the joiner"):
#   - join storm: the N members start at once (no --ramp-up) into one group; each member's join → stable (it
#     owns its share, S partitions, and has acknowledged it: loadgen --expect-partitions, since the protocol never
#     says that more partitions are coming), p50/p99 over the N members (the S * (N + 1) partitions give S to
#     most and S + 1 to S of them: those S count once they own S);
#   - one member joins the stable group: once the group has settled, a loadgen of one member joins the same
#     group, stays --duration 9s and leaves; the next starts 8 s later (the group re-settles); its join → stable,
#     p50/p99 over the K joins (with K = 12, p99 is the slowest).
# Brokers: Ringleader (default: `group.consumer.reconciliation.heartbeat.interval.ms=100`), Ringleader with it set
# to 0 (every response carries the 5 s interval, as Kafka's do: the effect of the short interval alone),
# Ringleader with the benchmark-only `--fsync never` (each reconciliation step waits for its records to be
# durable, and a one-node Kafka acknowledges from the page cache: this is the like-for-like row), and Kafka 4.4.0 (scripts/kafka-ref.sh: one KRaft node, -Xmx768m). All keep Kafka's other defaults: heartbeat 5 s,
# assignment interval 1 s, the uniform assignor. Members commit no offsets (--commit-interval-ms 0): the group
# protocol alone, without Ringleader's fsyncs against Kafka's page-cache acknowledgements in the way. Each broker alone on core 0 (`taskset -c 0`; Ringleader
# --cores 1), loadgen on core 1. Benchmarks never assert times: the script fails only if a run errs.
#
# Output: a table on stdout, DIR/results.json, each loadgen's report directory and the broker logs beside it.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
BIN="$TARGET_DIR/release"

MEMBERS=1000
SHARE=2
JOINS=12
OFF=1
NOFSYNC=1
BUILD=1
OUT="$TARGET_DIR/bench-stable"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --members) MEMBERS="$2"; shift ;;
    --share) SHARE="$2"; shift ;;
    --joins) JOINS="$2"; shift ;;
    --no-off) OFF=0 ;;
    --no-nofsync) NOFSYNC=0 ;;
    --skip-build) BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    *) echo "bench-stable: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
PARTITIONS=$((SHARE * (MEMBERS + 1)))
[[ $(nproc) -ge 2 ]] || { echo "bench-stable: needs 2 cores (broker on 0, client on 1)" >&2; exit 2; }

if [[ $BUILD -eq 1 ]]; then
  cargo build --release -q -p ringleader-engine --bin ringleader -p ringleader-loadgen --bin loadgen
fi
RL="$BIN/ringleader"
LG="$BIN/loadgen"
mkdir -p "$OUT"

# Phases (seconds): the storm settles, then K joins of JOIN_SECS each, GAP apart; the group's loadgen runs through.
SETTLE=30
JOIN_SECS=9
GAP=8
CYCLE=$((JOIN_SECS + 3 + GAP + 2)) # + loadgen's drain (3 s) and start-up
GROUP_SECS=$((SETTLE + JOINS * CYCLE + 15))

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  scripts/kafka-ref.sh stop --dir "$OUT/kafka" >/dev/null 2>&1 || true
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_ringleader NAME [--set k=v]...: sets ADDR and PID
start_ringleader() {
  local name=$1; shift
  local port dir="$OUT/$name-data"
  port=$(free_port)
  rm -rf "$dir"
  taskset -c 0 "$RL" serve --listen "127.0.0.1:$port" --data-dir "$dir" --cores 1 "$@" >"$OUT/$name.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  for _ in $(seq 1 200); do
    grep -q "listening on" "$OUT/$name.log" && break
    kill -0 "$PID" 2>/dev/null || { cat "$OUT/$name.log" >&2; exit 1; }
    sleep 0.05
  done
  ADDR="127.0.0.1:$port"
}

stop_pid() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# run_broker NAME ADDR: the storm (the group's loadgen, in the background), then the K joins.
run_broker() {
  local name=$1 addr=$2 i gpid start
  rm -rf "$OUT/$name-group" "$OUT/$name-join-"*
  echo "   group: $MEMBERS members join at once, then stay ${GROUP_SECS}s"
  taskset -c 1 "$LG" --bootstrap "$addr" --protocol consumer --groups 1 --members-per-group "$MEMBERS" \
    --topics 1 --partitions "$PARTITIONS" --group-prefix stable-g --topic-prefix stable-t --cores 1 \
    --expect-partitions "$SHARE" --commit-interval-ms 0 --duration "${GROUP_SECS}s" --quiet --out "$OUT/$name-group" >"$OUT/$name-group.txt" 2>&1 &
  gpid=$!
  PIDS+=("$gpid")
  start=$(date +%s)
  sleep "$SETTLE"
  for i in $(seq 1 "$JOINS"); do
    # Never start a join the group's run would not outlast.
    if (( $(date +%s) - start + CYCLE > GROUP_SECS )); then
      echo "   (stopped after $((i - 1)) joins: the group's run ends)" >&2
      break
    fi
    taskset -c 1 "$LG" --bootstrap "$addr" --protocol consumer --groups 1 --members-per-group 1 \
      --topics 1 --partitions "$PARTITIONS" --group-prefix stable-g --topic-prefix stable-t --cores 1 \
      --expect-partitions "$SHARE" --commit-interval-ms 0 --duration "${JOIN_SECS}s" --quiet --out "$OUT/$name-join-$i" >"$OUT/$name-join-$i.txt" 2>&1 ||
      echo "   join $i: loadgen exited non-zero (see $OUT/$name-join-$i.txt)" >&2
    sleep "$GAP"
  done
  wait "$gpid" || echo "   group: loadgen exited non-zero (see $OUT/$name-group.txt)" >&2
}

echo "== ringleader (--cores 1, reconciliation heartbeat interval 100 ms: the default)"
start_ringleader rl
run_broker rl "$ADDR"
stop_pid "$PID"

if [[ $OFF -eq 1 ]]; then
  echo "== ringleader (--cores 1, group.consumer.reconciliation.heartbeat.interval.ms=0: Kafka's intervals)"
  start_ringleader rl-off --set group.consumer.reconciliation.heartbeat.interval.ms=0
  run_broker rl-off "$ADDR"
  stop_pid "$PID"
fi

if [[ $NOFSYNC -eq 1 ]]; then
  echo "== ringleader (--cores 1, --fsync never: benchmark-only, page-cache acknowledgements like Kafka's)"
  start_ringleader rl-nofsync --fsync never
  run_broker rl-nofsync "$ADDR"
  stop_pid "$PID"
fi

echo "== kafka 4.4.0 (one KRaft node, core 0)"
rm -rf "$OUT/kafka"
KADDR=$(taskset -c 0 scripts/kafka-ref.sh start --dir "$OUT/kafka")
run_broker kafka "$KADDR"
scripts/kafka-ref.sh stop --dir "$OUT/kafka" >/dev/null

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$OUT" "$MEMBERS" "$PARTITIONS" "$JOINS" "$LOAD" <<'PY'
import json, math, os, sys

out, members, partitions, joins, load = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def summary(d):
    p = os.path.join(out, d, "summary.json")
    return json.load(open(p)) if os.path.exists(p) else None

def pct(xs, q):
    """Nearest rank (the smallest sample with at least q of them at or below it), as HdrHistogram reports."""
    xs = sorted(xs)
    return xs[max(0, math.ceil(q * len(xs)) - 1)] if xs else None

rows = {}
NAMES = ("rl", "rl-off", "rl-nofsync", "kafka")
for name in NAMES:
    g = summary(f"{name}-group")
    if g is None:
        continue
    c = g["rebalance_convergence_us"]
    storm = {"count": c.get("count", 0), "p50_ms": c.get("p50", 0) / 1000, "p99_ms": c.get("p99", 0) / 1000,
             "max_ms": c.get("max", 0) / 1000}
    samples = []
    missing = 0
    i = 1
    while os.path.isdir(os.path.join(out, f"{name}-join-{i}")):
        s = summary(f"{name}-join-{i}")
        j = s["rebalance_convergence_us"] if s else {"count": 0}
        if j.get("count", 0) >= 1:
            samples.append(j["max"] / 1000)
        else:
            missing += 1
        i += 1
    join = {"count": len(samples), "not_stable": missing, "p50_ms": pct(samples, 0.5), "p99_ms": pct(samples, 0.99),
            "samples_ms": [round(x, 1) for x in samples]}
    rows[name] = {"storm": storm, "join": join, "group_errors": g.get("totals", {}).get("errors")}

res = {"members": members, "partitions": partitions, "joins": joins, "loadavg_end": load, "rows": rows}
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=2)

def f(x):
    return "—" if x is None else f"{x:,.0f}"

def ratio(a, b):
    return "—" if not a or not b else f"{a / b:.2f}"

print()
print(f"Time to stable, KIP-848, one group of {members} members, {partitions} partitions (load average {load} at the end)")
print("| row | Ringleader p50 / p99 ms | short interval off | `--fsync never` | Kafka 4.4 p50 / p99 ms | ratio RL/Kafka p50 / p99 (`--fsync never`) |")
print("|---|---|---|---|---|---|")
for key, label in (("storm", f"{members} members join at once (per member)"),
                   ("join", "1 member joins the stable group")):
    cells = []
    for name in NAMES:
        r = rows.get(name, {}).get(key)
        cells.append("—" if r is None else f"{f(r['p50_ms'])} / {f(r['p99_ms'])}")
    k = rows.get("kafka", {}).get(key)
    rr = []
    for name in ("rl", "rl-nofsync"):
        r = rows.get(name, {}).get(key)
        rr.append("—" if not r or not k else f"{ratio(r['p50_ms'], k['p50_ms'])} / {ratio(r['p99_ms'], k['p99_ms'])}")
    print(f"| {label} | {' | '.join(cells)} | {rr[0]} ({rr[1]}) |")
for name in NAMES:
    if name in rows:
        j = rows[name]["join"]
        print(f"{name}: storm samples {rows[name]['storm']['count']} (max {f(rows[name]['storm']['max_ms'])} ms); "
              f"joins {j['count']} (not stable within the run: {j['not_stable']}): {j['samples_ms']}")
PY

#!/usr/bin/env bash
# Ringleader against the reference Apache Kafka 4.4.0 broker, in one run: the same client (hbflood, benches/macro)
# and the same load against each broker in turn, ratios side by side.
#
#   ./scripts/bench-kafka.sh               full run (~6 min after the build; Kafka's jars come from .cache/maven)
#   ./scripts/bench-kafka.sh --quick       short phases (~3 min), for a smoke check
#
# Options:
#   --quick            short phases
#   --connections N    connections (= members, one classic group each) for the heartbeat rows (1000)
#   --fixed-rate R     offered heartbeats/s for the latency row (5000)
#   --commit-conns L   connection counts for the commit rows, comma-separated (1,8,64)
#   --no-two-cores     skip the `--cores 2` rows
#   --skip-build       use the binaries already in target/release
#   --out DIR          results directory (default target/bench-kafka)
#
# Rows (this script grows with issue 16; what it does not measure yet is listed in docs/performance.md):
#   - classic Heartbeat v4: saturation (closed loop, 1 in flight per connection) and open-loop latency at
#     --fixed-rate (coordinated-omission corrected), N connections, each member joined for real;
#   - synchronous OffsetCommit v8 (one partition, group-less commit, one group per connection, 1 in flight):
#     throughput and latency at each --commit-conns. Who fsyncs: Ringleader acknowledges after fdatasync;
#     a one-node Kafka acknowledges from the page cache (its log flush is periodic). So the commit rows are run
#     a second time against Ringleader with the benchmark-only `--fsync=never`, the like-for-like comparison;
#   - the same rows against Ringleader with `--cores 2` (both cores; the client then shares core 1 with it).
#
# Setup: each broker runs alone, pinned to core 0 (`taskset -c 0`), the client pinned to core 1. Ringleader:
# --cores 1 and group.initial.rebalance.delay.ms=0 (only shortens group formation); Kafka: scripts/kafka-ref.sh
# (one KRaft node, -Xmx768m, Kafka's GC flags) with the same delay setting. Every broker first gets the same
# unmeasured warm-up (64 connections committing, 100 members heartbeating; 20 s + 10 s), which Kafka's JIT needs:
# without it its first commit rows ran 4x slower. Benchmarks never assert times: the script fails only if a run errs.
#
# Output: a table on stdout, target/bench-kafka/results.json, raw hbflood JSON and broker logs beside it.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
BIN="$TARGET_DIR/release"

QUICK=0
CONNS=1000
FIXED_RATE=5000
COMMIT_CONNS="1,8,64"
TWO_CORES=1
BUILD=1
OUT="$TARGET_DIR/bench-kafka"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --connections) CONNS="$2"; shift ;;
    --fixed-rate) FIXED_RATE="$2"; shift ;;
    --commit-conns) COMMIT_CONNS="$2"; shift ;;
    --no-two-cores) TWO_CORES=0 ;;
    --skip-build) BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    *) echo "bench-kafka: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

if [[ $QUICK -eq 1 ]]; then SAT=4; RATE_SECS=4; WARM=1; WARMUP=6; else SAT=10; RATE_SECS=8; WARM=2; WARMUP=20; fi
[[ $(nproc) -ge 2 ]] || { echo "bench-kafka: needs 2 cores (broker on 0, client on 1)" >&2; exit 2; }

if [[ $BUILD -eq 1 ]]; then
  cargo build --release -q -p ringleader-engine --bin ringleader -p ringleader-macro-bench --bin hbflood
fi
RL="$BIN/ringleader"
HB="$BIN/hbflood"
mkdir -p "$OUT"
rm -f "$OUT"/*.json

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  scripts/kafka-ref.sh stop --dir "$OUT/kafka" >/dev/null 2>&1 || true
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_ringleader NAME CPUS CORES [extra serve args...]: sets ADDR and PID
start_ringleader() {
  local name=$1 cpus=$2 cores=$3; shift 3
  local port dir="$OUT/$name-data"
  port=$(free_port)
  rm -rf "$dir"
  taskset -c "$cpus" "$RL" serve --listen "127.0.0.1:$port" --data-dir "$dir" --cores "$cores" \
    --set group.initial.rebalance.delay.ms=0 "$@" >"$OUT/$name.log" 2>&1 &
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

# run_rows NAME ADDR PID CLIENT_CPUS WHAT: WHAT is "commits", "heartbeats" or "both"
run_rows() {
  local name=$1 addr=$2 pid=$3 ccpu=$4 what=$5 c
  # Unmeasured warm-up of both paths on every broker (Kafka's JIT needs it; the same for all, for fairness).
  taskset -c "$ccpu" "$HB" --target "$addr" --request commit --connections 64 --saturate-secs "$WARMUP" \
    --warmup-secs 0 --label "$name warm-up" --json "$OUT/$name-warmup-commit.json" 2>/dev/null
  taskset -c "$ccpu" "$HB" --target "$addr" --join --connections 100 --saturate-secs "$((WARMUP / 2))" \
    --warmup-secs 0 --group-prefix warm --label "$name warm-up" --json "$OUT/$name-warmup-heartbeat.json" 2>/dev/null
  if [[ $what != heartbeats ]]; then
    for c in ${COMMIT_CONNS//,/ }; do
      taskset -c "$ccpu" "$HB" --target "$addr" --request commit --connections "$c" --saturate-secs "$SAT" \
        --warmup-secs "$WARM" --server-pid "$pid" --label "$name commit $c" --json "$OUT/$name-commit-$c.json"
    done
  fi
  if [[ $what != commits ]]; then
    taskset -c "$ccpu" "$HB" --target "$addr" --join --connections "$CONNS" --saturate-secs "$SAT" \
      --rates "$FIXED_RATE" --rate-secs "$RATE_SECS" --warmup-secs "$WARM" --server-pid "$pid" \
      --label "$name heartbeat" --json "$OUT/$name-heartbeat.json"
  fi
}

echo "== ringleader (--cores 1, fsync always)"
start_ringleader rl 0 1
run_rows rl "$ADDR" "$PID" 1 both
stop_pid "$PID"

echo "== ringleader (--cores 1, --fsync=never: benchmark-only, page-cache acknowledgements like Kafka's)"
start_ringleader rl-nofsync 0 1 --fsync never
run_rows rl-nofsync "$ADDR" "$PID" 1 commits
stop_pid "$PID"

if [[ $TWO_CORES -eq 1 ]]; then
  echo "== ringleader (--cores 2, fsync always; the client shares core 1)"
  start_ringleader rl2 0,1 2
  run_rows rl2 "$ADDR" "$PID" 1 both
  stop_pid "$PID"
fi

echo "== kafka 4.4.0 (one KRaft node, core 0)"
rm -rf "$OUT/kafka"
KADDR=$(taskset -c 0 scripts/kafka-ref.sh start --dir "$OUT/kafka" --set group.initial.rebalance.delay.ms=0)
KPID=$(cat "$OUT/kafka/pid")
# The commit warm-up runs first: its set-up creates __consumer_offsets (FindCoordinator), which joins need.
run_rows kafka "$KADDR" "$KPID" 1 both
scripts/kafka-ref.sh stop --dir "$OUT/kafka" >/dev/null

python3 - "$OUT" "$COMMIT_CONNS" "$(cat /proc/loadavg)" <<'EOF'
import json, os, sys
out, conns, load = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
def load_json(name):
    p = os.path.join(out, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
def phase(d, mode):
    for p in (d or {}).get("phases", []):
        if p["mode"] == mode:
            return p
    return None
rows = []
def row(what, ours_name, ours_file, mode, kafka_file="same"):
    o = phase(load_json(ours_file), mode)
    k = phase(load_json(ours_file.replace(ours_name, "kafka") if kafka_file == "same" else kafka_file), mode)
    if o is None:
        return
    r = {"row": what, "ringleader": o, "kafka": k}
    if k and k["throughput_rps"]:
        r["throughput_ratio"] = o["throughput_rps"] / k["throughput_rps"]
    rows.append(r)
for name, label in (("rl", "--cores 1"), ("rl-nofsync", "--cores 1 --fsync=never"), ("rl2", "--cores 2")):
    for c in conns:
        row(f"OffsetCommit sync, {c} conn, ringleader {label}", name, f"{name}-commit-{c}", "saturate")
    row(f"Heartbeat saturation, ringleader {label}", name, f"{name}-heartbeat", "saturate")
    row(f"Heartbeat fixed rate, ringleader {label}", name, f"{name}-heartbeat", "rate")
res = {"loadavg_at_end": load, "rows": rows}
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=2)
f = lambda p, k: f"{p['latency_us'][k] / 1000:.2f}" if p else "-"
print(f"\n{'row':58} {'ours/s':>9} {'kafka/s':>9} {'ratio':>6}   p50/p99/p99.9 ms ours | kafka")
for r in rows:
    o, k = r["ringleader"], r["kafka"]
    print(f"{r['row']:58} {o['throughput_rps']:9.0f} {(k or {}).get('throughput_rps', 0):9.0f} "
          f"{r.get('throughput_ratio', 0):6.2f}   {f(o,'p50')}/{f(o,'p99')}/{f(o,'p999')} | "
          f"{f(k,'p50')}/{f(k,'p99')}/{f(k,'p999')}")
print(f"\nload average at the end: {load}\nresults: {out}/results.json")
EOF

#!/usr/bin/env bash
# Time to stable for KIP-848 groups (issue 16, item 7): what Ringleader's short reconciliation heartbeat interval
# buys, against the reference Apache Kafka 4.4.0 broker, with the same client (loadgen, `--protocol consumer`) and
# the same load against each broker in turn.
#
#   ./scripts/bench-stable.sh                     full run (4 brokers × 2 rows, at most ~30 min after the build)
#   ./scripts/bench-stable.sh --late-joiners 2    a smoke run
#
# Options:
#   --members N        members of the group (1000); the topic has 2 × N partitions
#   --late-joiners K   members joining the converged group one after the other (10)
#   --brokers LIST     comma-separated subset of rl,rl-off,rl-nofsync,kafka (all)
#   --skip-build       use the binaries already in target/release
#   --out DIR          results directory (default target/bench-stable)
#
# Rows, each one loadgen run against a fresh broker state (group convergence as loadgen/README.md defines it:
# every member stable, every partition owned, owned counts within one of each other):
#   storm  `--until-stable`: the N members join one group at once; per member, join → stable with its final
#          assignment (p50/p99), and the first join → the group converged;
#   late   `--until-stable --late-joiners K`: once the group converged, K members join it one at a time, each
#          once the group converged again; per joiner, join → it is stable, and join → the group converged.
# Brokers (each alone on core 0, `--cores 1`; loadgen on core 1):
#   rl          Ringleader as shipped: group.consumer.reconciliation.heartbeat.interval.ms=100
#   rl-off      the same at 0: every response carries the 5 s interval, as Kafka's do (the short interval's effect)
#   rl-nofsync  the benchmark-only `--fsync never`: acknowledgements from the page cache, like a one-node Kafka
#   kafka       Kafka 4.4.0, one KRaft node (scripts/kafka-ref.sh, -Xmx768m)
# Each broker first gets an unmeasured one-member warm-up run (Kafka loads __consumer_offsets on first use).
# All with group.initial.rebalance.delay.ms=0 and Kafka's other defaults (heartbeat 5 s, the uniform assignor).
# Members commit no offsets (--commit-interval-ms 0): the group protocol alone. This is the consumer half of
# bench-kafka.sh's `converge` row, with the two Ringleader variants that isolate the interval and the fsync.
# Benchmarks never assert times: the script fails only if a run errs.
#
# Output: a table on stdout, DIR/results.json, each loadgen's report directory and log, the broker logs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"

MEMBERS=1000
LATE=10
BROKERS=rl,rl-off,rl-nofsync,kafka
BUILD=1
OUT="$TARGET_DIR/bench-stable"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --members) MEMBERS="$2"; shift ;;
    --late-joiners) LATE="$2"; shift ;;
    --brokers) BROKERS="$2"; shift ;;
    --skip-build) BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    *) echo "bench-stable: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
bench_need_cores 2
bench_environment

if [[ $BUILD -eq 1 ]]; then
  cargo build --release -q -p ringleader-engine --bin ringleader -p ringleader-loadgen --bin loadgen
fi
LG="$BIN/loadgen"
rm -rf "$OUT"
mkdir -p "$OUT"
FAILED=()

KDIR=""
bench_on_exit() { [[ -z "$KDIR" ]] || scripts/kafka-ref.sh stop --dir "$KDIR" >/dev/null 2>&1 || true; }

# start NAME: a fresh broker; sets ADDR and PID.
start() {
  case "$1" in
    rl) rl_start rl 0 1 "$OUT" ;;
    rl-off) rl_start rl-off 0 1 "$OUT" --set group.consumer.reconciliation.heartbeat.interval.ms=0 ;;
    rl-nofsync) rl_start rl-nofsync 0 1 "$OUT" --fsync never ;;
    kafka)
      KDIR="$OUT/kafka"
      ADDR=$(KAFKA_REF_HEAP_OPTS="-Xms256m -Xmx768m" taskset -c 0 scripts/kafka-ref.sh start --dir "$KDIR" \
        --set group.initial.rebalance.delay.ms=0)
      PID=$(cat "$KDIR/pid")
      return ;;
    *) echo "bench-stable: unknown broker $1" >&2; exit 2 ;;
  esac
  ADDR=$RL_ADDR
  PID=$RL_PID
}
stop() {
  if [[ $1 == kafka ]]; then scripts/kafka-ref.sh stop --dir "$KDIR" >/dev/null; KDIR=""; else rl_stop; fi
}

# run NAME ROW ARGS...: one loadgen run into OUT/NAME-ROW; a failure is recorded, not fatal.
run() {
  local name=$1 row=$2 rc=0; shift 2
  taskset -c 1 "$LG" --bootstrap "$ADDR" --protocol consumer --groups 1 --members-per-group "$MEMBERS" \
    --topics 1 --partitions $((MEMBERS * 2)) --group-prefix "stable-$row-$name-$RANDOM-" --topic-prefix stable-t \
    --commit-interval-ms 0 --until-stable --rebalance-timeout-ms 60000 --server-pid "$PID" --cores 1 --quiet \
    --out "$OUT/$name-$row" "$@" >"$OUT/$name-$row.log" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "bench-stable: $name $row: loadgen exited $rc (see $OUT/$name-$row.log)" >&2
    FAILED+=("$name $row")
  fi
}

IFS=, read -r -a NAMES <<<"$BROKERS"
for name in "${NAMES[@]}"; do
  say "$name: storm ($MEMBERS members at once), then $LATE late joiners"
  start "$name"
  # Warm-up, not measured: a fresh Kafka creates __consumer_offsets on the first group request and answers
  # COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR until its partitions are loaded; both brokers get the same.
  taskset -c 1 "$LG" --bootstrap "$ADDR" --protocol consumer --groups 1 --members-per-group 1 --topics 1 \
    --partitions 1 --group-prefix "stable-warmup-$name-" --topic-prefix stable-warmup-t --commit-interval-ms 0 \
    --until-stable --duration 60s --max-error-rate 1 --cores 1 --quiet >"$OUT/$name-warmup.log" 2>&1 ||
    echo "bench-stable: $name warm-up: loadgen exited non-zero (see $OUT/$name-warmup.log)" >&2
  run "$name" storm --duration 180s
  run "$name" late --late-joiners "$LATE" --duration 300s
  stop "$name"
done

python3 - "$OUT" "$MEMBERS" "$LATE" "$(load_average)" "${NAMES[@]}" <<'PY'
import json, os, sys

out, members, late, load, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]

def conv(name, row):
    p = os.path.join(out, f"{name}-{row}", "summary.json")
    try:
        return json.load(open(p)).get("group_convergence") or {}
    except (OSError, ValueError):
        return {}

def ms(h, q):
    """A percentile (µs histogram in summary.json) in ms, or None when there were no samples."""
    return h[q] / 1000 if h and h.get("count") else None

rows = {}
for name in names:
    s, l = conv(name, "storm"), conv(name, "late")
    si = s.get("initial") or {}
    ll = l.get("late_joiners") or {}
    rows[name] = {
        "storm_member_p50_ms": ms(si.get("per_member_join_to_stable_us"), "p50"),
        "storm_member_p99_ms": ms(si.get("per_member_join_to_stable_us"), "p99"),
        "storm_group_converged_ms": si.get("all_groups_converged_ms"),
        "late_completed": f"{ll.get('completed', 0)}/{ll.get('requested', late)}",
        "late_joiner_p50_ms": ms(ll.get("joiner_join_to_stable_us"), "p50"),
        "late_joiner_p99_ms": ms(ll.get("joiner_join_to_stable_us"), "p99"),
        "late_group_p50_ms": ms(ll.get("join_to_group_converged_us"), "p50"),
        "late_group_p99_ms": ms(ll.get("join_to_group_converged_us"), "p99"),
    }
json.dump({"members": members, "partitions": 2 * members, "late_joiners": late, "loadavg_end": load, "rows": rows},
          open(os.path.join(out, "results.json"), "w"), indent=2)

def f(x):
    return "—" if x is None else f"{x:,.0f}"

cols = [
    ("storm: member join → stable p50 / p99", "storm_member_p50_ms", "storm_member_p99_ms"),
    ("storm: first join → group converged", "storm_group_converged_ms", None),
    ("late joiner: join → stable p50 / p99", "late_joiner_p50_ms", "late_joiner_p99_ms"),
    ("late joiner: join → group converged p50 / p99", "late_group_p50_ms", "late_group_p99_ms"),
]
print()
print(f"Time to stable (ms), KIP-848, one group of {members} members, {2 * members} partitions, "
      f"{late} late joiners (load average {load} at the end)")
print("| | " + " | ".join(names) + (" | RL / Kafka" if "rl" in rows and "kafka" in rows else "") + " |")
print("|---|" + "---|" * (len(names) + ("rl" in rows and "kafka" in rows)))
for label, a, b in cols:
    cells = [f(rows[n][a]) + ("" if b is None else f" / {f(rows[n][b])}") for n in names]
    if "rl" in rows and "kafka" in rows:
        r, k = rows["rl"], rows["kafka"]
        ratio = lambda key: "—" if not r[key] or not k[key] else f"{r[key] / k[key]:.2f}"
        cells.append(ratio(a) + ("" if b is None else f" / {ratio(b)}"))
    print(f"| {label} | " + " | ".join(cells) + " |")
print("late joiners measured: " + ", ".join(f"{n} {rows[n]['late_completed']}" for n in names))
PY

if [[ ${#FAILED[@]} -gt 0 ]]; then
  echo "bench-stable: failed runs: ${FAILED[*]}" >&2
  exit 1
fi

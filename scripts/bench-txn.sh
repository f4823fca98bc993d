#!/usr/bin/env bash
# Transactions per second, Ringleader against the reference Apache Kafka 4.4.0 broker, in one run: the Java
# client 4.4.0 (benches/kafka-txn, TxnBench) with N producers, each with its own transactional.id, looping
# beginTransaction, 10 sends of 100-byte values to a 16-partition topic, sendOffsetsToTransaction (one partition
# of an input topic, one group per producer), commitTransaction; transactions completed in a measured window
# after a warm-up, and the whole transaction's p50/p99 (begin → commit returned).
#
#   ./scripts/bench-txn.sh                      1 and 16 producers on every broker (~4 min after the builds)
#   ./scripts/bench-txn.sh --producers 1,4,16 --secs 20
#
# Options:
#   --producers LIST     producer counts (1,16)
#   --warmup-secs S      unmeasured seconds before each window (3)
#   --secs S             measured window per point (10)
#   --brokers LIST       rl (Ringleader --cores 1), rl-nofsync (the same with the benchmark-only --fsync never),
#                        kafka (Kafka 4.4.0 as formatted: transaction.version 2, the client speaks transactions
#                        v2), kafka-tv1 (formatted at transaction.version=1: the client speaks v1, as it does
#                        against Ringleader, which finalizes no transaction.version). Default: all four.
#   --producer-config K=V[,K=V]  producer settings for every broker (default: the client's own defaults, so
#                        acks=all, linger.ms=5, retry.backoff.ms=100)
#   --skip-build         use target/release/ringleader and benches/kafka-txn/target as they are
#   --out DIR            results directory (default target/bench-txn)
#
# Setup (as scripts/bench-kafka.sh): each broker runs alone with fresh data, pinned to core 0 (`taskset -c 0`);
# Ringleader `--cores 1`, group.initial.rebalance.delay.ms=0; Kafka via scripts/kafka-ref.sh (one KRaft node,
# -Xms256m -Xmx768m, Kafka's G1 flags), the same delay setting. The client JVM (-Xms256m -Xmx768m) is pinned to
# core 1. Each point is its own client JVM with fresh transactional.ids on the same broker; the first point's
# warm-up is also the broker's (and Kafka's JIT's).
#
# Durability differs: Ringleader acknowledges every write (transaction log, records, markers, offsets) after
# fdatasync; a one-node Kafka acknowledges from the page cache (its log flush is periodic). rl-nofsync is the
# like-for-like column for that.
#
# Benchmarks never assert times: the script fails (exit 1, at the end) only if a run errs.
# Output: a table on stdout, DIR/results.json, each point's JSON and client stderr, broker logs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"

PRODUCERS="1,16"
WARMUP=3
SECS=10
BROKERS="rl,rl-nofsync,kafka,kafka-tv1"
PCONF=""
BUILD=1
OUT="$TARGET_DIR/bench-txn"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --producers) PRODUCERS="$2"; shift ;;
    --warmup-secs) WARMUP="$2"; shift ;;
    --secs) SECS="$2"; shift ;;
    --brokers) BROKERS="$2"; shift ;;
    --producer-config) PCONF="$2"; shift ;;
    --skip-build) BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench-txn: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
for b in ${BROKERS//,/ }; do
  [[ ",rl,rl-nofsync,kafka,kafka-tv1," == *",$b,"* ]] || { echo "bench-txn: unknown broker '$b'" >&2; exit 2; }
done
bench_need_cores 2
bench_environment
LOAD_START=$(load_average)

M2="${RINGLEADER_MAVEN_REPO:-$REPO/.cache/maven}"
export RINGLEADER_MAVEN_REPO="$M2"
POM="$REPO/benches/kafka-txn/pom.xml"
CPFILE="$REPO/benches/kafka-txn/target/classpath.txt"
if [[ $BUILD -eq 1 ]]; then
  say "cargo build --release (ringleader); mvn compile (benches/kafka-txn)"
  cargo build --release -q -p ringleader-engine --bin ringleader
  command -v mvn >/dev/null || { echo "bench-txn: mvn (3.8+) not found" >&2; exit 1; }
  mvn -B -q -Dstyle.color=never -f "$POM" -Dmaven.repo.local="$M2" compile dependency:build-classpath \
    -Dmdep.outputFile="$CPFILE" >&2
fi
[[ -x "$BIN/ringleader" && -s "$CPFILE" ]] || { echo "bench-txn: build first (ringleader, benches/kafka-txn)" >&2; exit 1; }
CP="$REPO/benches/kafka-txn/target/classes:$(cat "$CPFILE")"
mkdir -p "$OUT"
rm -rf "$OUT"/*.json "$OUT"/*.log "$OUT"/*-data "$OUT"/kafka*
FAILED=()

KDIR=""
bench_on_exit() { [[ -z "$KDIR" ]] || scripts/kafka-ref.sh stop --dir "$KDIR" >/dev/null 2>&1 || true; }

run_point() { # NAME ADDR N
  local name=$1 addr=$2 n=$3 rc=0
  local extra=()
  [[ -z "$PCONF" ]] || extra=(--producer-config "$PCONF")
  pin 1 java -Xms256m -Xmx768m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$CP" dev.ringleader.txnbench.TxnBench \
    --bootstrap "$addr" --producers "$n" --warmup-secs "$WARMUP" --secs "$SECS" --run-id "$name-$n-$RANDOM" \
    --label "$name" --json "$OUT/$name-$n.json" "${extra[@]}" 2>"$OUT/$name-$n.stderr.log" || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "bench-txn: $name $n producers failed (exit $rc); see $OUT/$name-$n.stderr.log" >&2
    tail -5 "$OUT/$name-$n.stderr.log" >&2 || true
    FAILED+=("$name/$n")
  fi
}

for b in ${BROKERS//,/ }; do
  say "$b"
  case "$b" in
    rl) rl_start rl 0 1 "$OUT"; ADDR=$RL_ADDR ;;
    rl-nofsync) rl_start rl-nofsync 0 1 "$OUT" --fsync never; ADDR=$RL_ADDR ;;
    kafka|kafka-tv1)
      KDIR="$OUT/$b"
      feature=()
      [[ $b == kafka ]] || feature=(--feature transaction.version=1)
      ADDR=$(KAFKA_REF_HEAP_OPTS="-Xms256m -Xmx768m" taskset -c 0 scripts/kafka-ref.sh start --dir "$KDIR" \
        --set group.initial.rebalance.delay.ms=0 "${feature[@]}")
      ;;
  esac
  for n in ${PRODUCERS//,/ }; do
    run_point "$b" "$ADDR" "$n"
    sed 's/^/  /' "$OUT/$b-$n.json" 2>/dev/null | head -1 >&2 || true
  done
  case "$b" in
    rl|rl-nofsync)
      grep -iE 'warn|error|stall' "$RL_LOG" | head -20 >"$OUT/$b-log-warnings.txt" || true
      rl_stop ;;
    *)
      grep -E ' (WARN|ERROR) ' "$KDIR/broker.log" | head -20 >"$OUT/$b-log-warnings.txt" || true
      scripts/kafka-ref.sh stop --dir "$KDIR" >/dev/null; KDIR="" ;;
  esac
done

say "results"
python3 - "$OUT" "$PRODUCERS" "$BROKERS" "$LOAD_START" "$(load_average)" "$PCONF" <<'EOF'
import json, os, sys
out, producers, brokers, load0, load1, pconf = sys.argv[1:7]
producers = [int(p) for p in producers.split(",")]
brokers = brokers.split(",")
names = {"rl": "Ringleader", "rl-nofsync": "RL fsync=never", "kafka": "Kafka tv2", "kafka-tv1": "Kafka tv1"}
def get(b, n):
    try:
        return json.load(open(os.path.join(out, f"{b}-{n}.json")))
    except Exception:
        return None
points = {b: {n: get(b, n) for n in producers} for b in brokers}
def cell(d):
    if not d:
        return "failed"
    return f"{d['txns_per_s']:,.0f}/s {d['p50_ms']:.1f}/{d['p99_ms']:.1f} ms"
print("\nTransactions: 10 records x 100 B + one offset commit each; txns/s and whole-transaction p50/p99")
print("Ringleader fdatasyncs every write before acknowledging; one-node Kafka acknowledges from the page cache.")
print(f"producer config: {pconf or 'client defaults'}\n")
print(f"{'producers':>10}" + "".join(f"{names[b]:>28}" for b in brokers) + "   ratio RL/Kafka txns/s (tv1, tv2)")
for n in producers:
    line = f"{n:>10}" + "".join(f"{cell(points[b][n]):>28}" for b in brokers)
    rl = points.get("rl", {}).get(n)
    ratios = []
    for k in ("kafka-tv1", "kafka"):
        kd = points.get(k, {}).get(n)
        if rl and kd and kd["txns_per_s"]:
            ratios.append(f"{k}: {rl['txns_per_s'] / kd['txns_per_s']:.2f}")
    print(line + "   " + ", ".join(ratios))
print()
for b in brokers:
    for n in producers:
        d = points[b][n]
        if d and (d["failed_txns"] or d["fatal_producers"] or d["record_retries"] or d["record_errors"] or d["errors"]):
            print(f"{names[b]} {n}: failed txns {d['failed_txns']}, fatal producers {d['fatal_producers']}, "
                  f"record retries {d['record_retries']:.0f}, record errors {d['record_errors']:.0f}; {d['errors'][:3]}")
        if d:
            print(f"{names[b]} {n}: max {d['max_ms']:.1f} ms, p99.9 {d['p999_ms']:.1f} ms, "
                  f"transaction.version {d['transaction_version']}, initTransactions {d['init_ms']:.0f} ms")
print(f"\nload average at the start: {load0}; at the end: {load1}")
json.dump({"load_average_start": load0, "load_average_end": load1, "producer_config": pconf or None,
           "points": points, "ratio": "Ringleader txns/s / Kafka txns/s; > 1 means Ringleader is faster"},
          open(os.path.join(out, "results.json"), "w"), indent=2)
EOF
echo "results: $OUT/results.json"
if [[ ${#FAILED[@]} -gt 0 ]]; then
  echo "bench-txn: these runs failed: ${FAILED[*]}" >&2
  exit 1
fi

#!/usr/bin/env bash
# Kafka 4.4.0's own group-coordinator code measured on this machine under JMH (issue 16, items 2-4), so Ringleader's
# criterion benches are set beside Kafka run here, on the same shapes, instead of beside Kafka's published figures.
# The harness is benches/kafka-jmh (a Maven project over org.apache.kafka:kafka-group-coordinator 4.4.0 and what it
# needs, resolved from Maven Central into the repo-local .cache/maven, as scripts/kafka-ref.sh does).
#
#   ./scripts/bench-kafka-jmh.sh            full run (~11 min; JMH's fixed iteration counts set most of it)
#   ./scripts/bench-kafka-jmh.sh --quick    short iterations, 2 M records only (~5 min), for a smoke check
#
# Options:
#   --quick            JMH warm-up 1 × 1 s, measurement 2 × 1 s (load: 1 + 2 loads), 2 M records only
#   --only LIST        comma-separated subset of: assignor, load, regex (default: all three)
#   --records LIST     record counts for the load rows (default 2000000,10000000)
#   --kafka-writer     write the load rows' segments with Kafka's serde (WriteOffsetLog) even where cargo exists
#   --no-ringleader    skip Ringleader's load of the same segments (the same-run ratio)
#   --out DIR          results directory (default target/bench-kafka-jmh)
#
# What runs (every JVM pinned to core 0 with `taskset -c 0`, -Xms1g -Xmx1g and the G1 flags of Kafka's
# bin/kafka-run-class.sh; one JMH fork per benchmark; full: 5 warm-up + 5 measured iterations of 2 s, Kafka's
# benchmarks use 5 + 5 of 10 s):
#   - assignor: UniformAssignor and RangeAssignor, full and incremental (one member joins an assigned group), on the
#     ServerSideAssignorBenchmark shapes issue 16 names, rack-unaware, topic ids 1..N:
#       homogeneous-10000x10-1000t     10,000 members, 10 partitions per member, 1,000 topics × 100 partitions
#       homogeneous-5000x50-1000t       5,000 members, 50 partitions per member, 1,000 topics × 250 partitions
#       heterogeneous-1000x50-1000t     1,000 members, 1,000 topics × 50 partitions, 5 subscription buckets
#     (incremental: memberCount - 1 members assigned first, then "newMember" joins; see AssignorBench.java);
#   - load: CoordinatorLoaderImpl loading a real UnifiedLog of N offset-commit records (1,000 groups × 64
#     partitions, batches of 1,000) into a fresh GroupCoordinatorShard; the segments are written by Ringleader's
#     `offset_log` example, so Ringleader (`offset_log load`, same core, right after) loads the very same bytes.
#     Also, at the first record count, the records of Kafka's own GroupCoordinatorShardLoadingBenchmark (one group,
#     2,048 topics, batches of 2,048; the source of its published ~4.3 M records/s), loaded by both;
#   - regex: TopicRegexResolver, 1 regex × 10,000 topics, on Kafka's RegexResolutionBenchmark shape and on the
#     shape of Ringleader's `coordinator_regex` bench.
# Benchmarks never assert times: the script fails only if a run errs (each benchmark checks its result is real).
#
# Output: a table on stdout, target/bench-kafka-jmh/results.json, JMH's JSON and logs beside it.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
POM="$REPO/benches/kafka-jmh/pom.xml"
M2="${RINGLEADER_MAVEN_REPO:-$REPO/.cache/maven}"

QUICK=0
ONLY="assignor,load,regex"
RECORDS=""
KAFKA_WRITER=0
RINGLEADER=1
OUT="$TARGET_DIR/bench-kafka-jmh"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --only) ONLY="$2"; shift ;;
    --records) RECORDS="$2"; shift ;;
    --kafka-writer) KAFKA_WRITER=1 ;;
    --no-ringleader) RINGLEADER=0 ;;
    --out) OUT="$2"; shift ;;
    *) echo "bench-kafka-jmh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
for part in ${ONLY//,/ }; do
  case "$part" in assignor|load|regex) ;; *) echo "bench-kafka-jmh: --only takes assignor, load, regex" >&2; exit 2 ;; esac
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }

if [[ $QUICK -eq 1 ]]; then
  ITER=(-wi 1 -i 2 -w 1s -r 1s); LOAD_ITER=(-wi 1 -i 2); RECORDS="${RECORDS:-2000000}"; RL_ROUNDS=3
else
  ITER=(-wi 5 -i 5 -w 2s -r 2s); LOAD_ITER=(-wi 3 -i 5); RECORDS="${RECORDS:-2000000,10000000}"; RL_ROUNDS=8
fi

command -v java >/dev/null || { echo "bench-kafka-jmh: java (17+) not found" >&2; exit 1; }
command -v mvn >/dev/null || { echo "bench-kafka-jmh: mvn (3.8+) not found" >&2; exit 1; }
command -v taskset >/dev/null || { echo "bench-kafka-jmh: taskset (util-linux) not found" >&2; exit 1; }
HAVE_CARGO=0
command -v cargo >/dev/null && HAVE_CARGO=1
mkdir -p "$OUT" "$OUT/tmp"
rm -f "$OUT"/*.json

# Build the harness and resolve its classpath (retried: a fresh machine fetches everything from Maven Central).
CP_FILE="$OUT/classpath.txt"
built=0
for attempt in 1 2 3; do
  if mvn -B -q -Dstyle.color=never -f "$POM" -Dmaven.repo.local="$M2" compile dependency:build-classpath \
      -Dmdep.outputFile="$CP_FILE" >&2; then
    built=1
    break
  fi
  echo "bench-kafka-jmh: mvn failed (attempt $attempt)" >&2
  sleep $((attempt * 5))
done
[[ $built -eq 1 ]] || { echo "bench-kafka-jmh: could not build benches/kafka-jmh" >&2; exit 1; }
CP="$REPO/benches/kafka-jmh/target/classes:$(cat "$CP_FILE")"

# The forked benchmark JVM: heap and GC as a Kafka broker runs (bin/kafka-run-class.sh's G1 flags; Kafka's default
# heap is 1 GiB). Temporary files (the load rows' copy of the log) stay under $OUT.
FORK_ARGS="-Xms1g -Xmx1g -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
-XX:+ExplicitGCInvokesConcurrent -Djava.io.tmpdir=$OUT/tmp -Dorg.slf4j.simpleLogger.defaultLogLevel=warn"

jmh() {
  local name="$1"; shift
  echo "== $name" >&2
  # The JMH launcher only forks and collects; the measured JVM is the fork, which inherits the pinning.
  taskset -c 0 java -Xmx256m -cp "$CP" org.openjdk.jmh.Main "$@" -f 1 -rf json -rff "$OUT/$name.json" \
    >"$OUT/$name.log" 2>&1 || { tail -40 "$OUT/$name.log" >&2; echo "bench-kafka-jmh: $name failed" >&2; exit 1; }
  grep -E "^(Benchmark|[A-Za-z]+Bench\.)" "$OUT/$name.log" >&2 || true
}

if want assignor; then
  jmh assignor 'dev.ringleader.kafkajmh.AssignorBench' "${ITER[@]}" -jvmArgs "$FORK_ARGS"
fi
if want regex; then
  jmh regex 'dev.ringleader.kafkajmh.RegexBench' "${ITER[@]}" -jvmArgs "$FORK_ARGS"
fi

if want load; then
  # The segments, written once per shape and record count and kept under $OUT/offsets (they are the input, not a
  # result): ringleader-N by Ringleader's offset_log example (or, without cargo or with --kafka-writer, the same
  # records through Kafka's serde), kafka-N (Kafka's own loading-benchmark records) by WriteOffsetLog.
  WRITER=kafka-serde
  if [[ $KAFKA_WRITER -eq 0 && $HAVE_CARGO -eq 1 ]]; then
    WRITER=offset_log
    cargo build --release -q -p ringleader-benches --example offset_log
  fi
  OFFSETS="$OUT/offsets"
  mkdir -p "$OFFSETS"
  write_log() { # NAME WRITER COMMAND...
    local name="$1" writer="$2"; shift 2
    if [[ "$(cat "$OFFSETS/$name.done" 2>/dev/null)" != "$writer" ]]; then
      rm -rf "${OFFSETS:?}/$name" "$OFFSETS/$name.done"
      "$@" >&2
      echo "$writer" >"$OFFSETS/$name.done"
    fi
  }
  LOGS=()
  for n in ${RECORDS//,/ }; do
    if [[ $WRITER == offset_log ]]; then
      write_log "ringleader-$n" offset_log "$TARGET_DIR/release/examples/offset_log" write "$OFFSETS/ringleader-$n" "$n"
    else
      write_log "ringleader-$n" kafka-serde java -Xmx256m -cp "$CP" dev.ringleader.kafkajmh.WriteOffsetLog "$OFFSETS/ringleader-$n" "$n" ringleader
    fi
    LOGS+=("ringleader-$n")
  done
  # Kafka's own shape once, at the first record count: does its published rate reproduce here?
  first="${RECORDS%%,*}"
  write_log "kafka-$first" kafka-serde java -Xmx256m -cp "$CP" dev.ringleader.kafkajmh.WriteOffsetLog "$OFFSETS/kafka-$first" "$first" kafka
  LOGS+=("kafka-$first")
  LOG_LIST=$(IFS=,; echo "${LOGS[*]}")
  jmh load 'dev.ringleader.kafkajmh.OffsetLoadBench' "${LOAD_ITER[@]}" -p "log=$LOG_LIST" \
    -jvmArgs "$FORK_ARGS -Drl.jmh.offsets=$OFFSETS"
  echo "$WRITER" >"$OUT/load-writer.txt"
  # Ringleader's load of the same files, same core, right after: the ratio of one run.
  if [[ $RINGLEADER -eq 1 && $HAVE_CARGO -eq 0 ]]; then
    echo "bench-kafka-jmh: cargo not found, so Ringleader's side of the load rows is skipped" >&2
  fi
  if [[ $RINGLEADER -eq 1 && $HAVE_CARGO -eq 1 ]]; then
    cargo build --release -q -p ringleader-benches --example offset_log
    for name in "${LOGS[@]}"; do
      echo "== ringleader load $name" >&2
      taskset -c 0 "$TARGET_DIR/release/examples/offset_log" load "$OFFSETS/$name" "$RL_ROUNDS" | tee "$OUT/ringleader-load-$name.log" >&2
      tail -1 "$OUT/ringleader-load-$name.log" >"$OUT/ringleader-load-$name.json"
    done
  fi
fi

python3 - "$OUT" "$QUICK" <<'EOF'
import json, os, platform, subprocess, sys, glob
out, quick = sys.argv[1], sys.argv[2] == "1"

def load(name):
    p = os.path.join(out, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else []

def score(r):
    m = r["primaryMetric"]
    # JMH writes the error as "NaN" (a string) when there are too few iterations for one.
    try:
        err = float(m["scoreError"])
    except (TypeError, ValueError):
        err = float("nan")
    return m["score"], err, m["scoreUnit"], m.get("rawData", [])

rows, table = [], []
for r in load("assignor"):
    p = r["params"]
    s, e, unit, _ = score(r)
    rows.append({"bench": "assignor", "shape": p["shape"], "assignor": p["assignor"], "assignment": p["assignment"],
                 "ms_per_op": s, "error_ms": e})
    table.append((f"{p['assignor']} {p['assignment']} {p['shape']}", f"{s:.3f} ± {e:.3f} ms"))
for r in load("regex"):
    p = r["params"]
    s, e, unit, _ = score(r)
    rows.append({"bench": "regex", "shape": p["shape"], "topics": int(p["topicCount"]), "ms_per_op": s, "error_ms": e})
    table.append((f"regex 1 × {p['topicCount']} topics, {p['shape']} shape", f"{s:.3f} ± {e:.3f} ms"))
writer = open(os.path.join(out, "load-writer.txt")).read().strip() if os.path.exists(os.path.join(out, "load-writer.txt")) else None
for r in load("load"):
    name = r["params"]["log"]
    shape, n = name.rsplit("-", 1)
    n = int(n)
    s, e, unit, raw = score(r)
    runs = [x for fork in raw for x in fork]
    best = min(runs) if runs else s
    row = {"bench": "load", "log": name, "shape": shape, "records": n,
           "segments_written_by": writer if shape == "ringleader" else "kafka-serde",
           "kafka_ms_mean": s, "kafka_ms_error": e, "kafka_ms_runs": runs,
           "kafka_records_per_s_mean": n / (s / 1000), "kafka_records_per_s_best": n / (best / 1000)}
    line = f"Kafka {n / (s / 1000) / 1e6:.2f} M/s mean ({s:.0f} ms), best {n / (best / 1000) / 1e6:.2f} M/s"
    rl = os.path.join(out, f"ringleader-load-{name}.json")
    if os.path.exists(rl):
        j = json.load(open(rl))
        secs = sorted(j["seconds"])
        mean = sum(secs) / len(secs)
        row.update({"ringleader_s_runs": j["seconds"], "ringleader_records_per_s_mean": j["records"] / mean,
                    "ringleader_records_per_s_best": j["records"] / secs[0],
                    "ratio_ringleader_over_kafka_mean": (j["records"] / mean) / (n / (s / 1000))})
        line += f"; Ringleader {j['records'] / mean / 1e6:.2f} M/s mean, best {j['records'] / secs[0] / 1e6:.2f} M/s; ratio {row['ratio_ringleader_over_kafka_mean']:.2f}x"
    rows.append(row)
    label = "Ringleader's records (1,000 groups x 64 partitions)" if shape == "ringleader" else "Kafka's loading-benchmark records (1 group x 2,048 topics)"
    table.append((f"load {n:,}, {label}", line))

def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, shell=True).stdout.strip()
    except Exception:
        return ""
result = {"kafka_version": "4.4.0", "quick": quick, "loadavg_at_end": open("/proc/loadavg").read().split()[:3],
          "nproc": os.cpu_count(), "java": sh("java -version 2>&1 | head -1"), "pinning": "taskset -c 0",
          "heap": "-Xms1g -Xmx1g G1", "rows": rows}
json.dump(result, open(os.path.join(out, "results.json"), "w"), indent=2)
w = max((len(a) for a, _ in table), default=10)
print(f"\nKafka 4.4.0 under JMH on this machine (core 0; load average {' '.join(result['loadavg_at_end'])} at the end)")
for a, b in table:
    print(f"  {a:<{w}}  {b}")
print(f"\nresults: {os.path.join(out, 'results.json')}")
EOF

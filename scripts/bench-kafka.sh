#!/usr/bin/env bash
# Ringleader against the reference Apache Kafka 4.4.0 broker, in one run: the same clients (hbflood, loadgen,
# offsets-history — all in this repository) and the same load against each broker in turn, ratios side by side.
#
#   ./scripts/bench-kafka.sh                    every row (26 min on a loaded 2-core VM, after the build; Kafka's
#                                               jars from .cache/maven); docs/performance.md lists each row's share
#   ./scripts/bench-kafka.sh --quick            every row at reduced scale (~12 min), for a smoke check
#   ./scripts/bench-kafka.sh --rows kip848,rss  a subset
#
# Options:
#   --rows LIST          rows to run, comma-separated (all): hb, commit, kip848, converge, restart, rss
#   --brokers LIST       brokers to run, comma-separated (all): rl (Ringleader --cores 1), rl2 (--cores 2), kafka
#   --quick              reduced scale and short phases
#   --no-two-cores       same as --brokers rl,kafka
#   --connections N      connections (= members, one classic group each) for the heartbeat rows (1000)
#   --fixed-rate R       offered heartbeats/s for the latency row (5000)
#   --commit-conns L     connection counts for the commit rows (1,8,64)
#   --kip848-members N   KIP-848 members for the steady-state row (10000; 10 per group)
#   --converge-members N members of the one group of the convergence rows (1000; 2 partitions each)
#   --late-joiners K     members joining the stable group one after the other (10; --quick 2)
#   --restart-records N  offset-commit records of history before the restart (10000000)
#   --rss-members N      consumer-protocol members of the memory row (100000; 100 per group)
#   --kafka-rss-heap H   Kafka's -Xmx for the memory row (1g; the other rows use kafka-ref.sh's 768m)
#   --rss-ramp S         seconds over which the memory row's members join (60; --quick 10); 0 = all at once,
#                        a join storm (issue 16 item 5: storms stay under 2x the steady RSS)
#   --skip-build         use the binaries already in target/release
#   --out DIR            results directory (default target/bench-kafka)
#
# Setup: each broker runs alone, pinned to core 0 (`taskset -c 0`), every client pinned to core 1. Ringleader:
# --cores 1 (rl) or --cores 2 pinned to both cores (rl2: the broker may use both; the client then shares core 1
# with one shard), group.initial.rebalance.delay.ms=0 (only shortens group formation); Kafka:
# scripts/kafka-ref.sh (one KRaft node, -Xms256m -Xmx768m, Kafka's G1 flags) with the same delay setting. The rows
# that share a broker (hb, commit, kip848, converge) first get the same unmeasured warm-up on every broker
# (64 connections committing, 100 members heartbeating; 20 s + 10 s), which Kafka's JIT needs: without it its
# first commit rows ran 4x slower. restart and rss start a fresh broker of their own.
#
# Rows:
#   hb        classic Heartbeat v4 from --connections joined members (hbflood): saturation (1 in flight per
#             connection) and open-loop latency at --fixed-rate (coordinated-omission corrected).
#   commit    synchronous OffsetCommit v8 (hbflood --request commit: one partition, one group per connection,
#             1 in flight) at each --commit-conns. Who fsyncs: Ringleader acknowledges after fdatasync; a one-node
#             Kafka from the page cache (its log flush is periodic). So the rows run again against Ringleader
#             with the benchmark-only `--fsync=never`, the like-for-like comparison.
#   kip848    loadgen --protocol consumer, --kip848-members members (10 per group, 1 topic x 10 partitions), the
#             brokers' 5 s heartbeat interval, no commits, ramp-up 10 s; `--warmup 25s` leaves the join storm and
#             the final leave storm out: steady-state ConsumerGroupHeartbeat p50/p99/p99.9 over 35 s, and the
#             broker's CPU (cores) over that window and RSS at its end (loadgen --server-pid).
#   converge  loadgen --until-stable on one group of --converge-members members over one topic of 2 partitions per
#             member, both protocols: (a) every member joins at once: time until the group has converged (every
#             member stable, every partition owned, balanced to within one) and p50/p99 of join → stable with its
#             final assignment per member; (b) `--late-joiners K`: once converged, K members join one after the
#             other, each once the group converged again: join → joiner stable and join → group converged
#             (p50/p99 over K). Classic members heartbeat every 3 s (the Java default) and rejoin when told;
#             consumer-protocol members at the interval the broker returns.
#   restart   offsets-history fill: --restart-records records (requests of 1,000 partitions, round-robin over
#             1,000 groups, 16 connections x 4 in flight) into a fresh broker; a clean stop (SIGTERM); the same
#             broker started again on its data; offsets-history probe from the process's start: time until the
#             first group, and then every group, answers OffsetFetch with the history's final offsets (instead of
#             COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR). Also what each broker did to load (its log lines).
#   rss       loadgen --protocol consumer, --rss-members members (100 per group, 1 topic x 100 partitions), ramp-up
#             60 s, heartbeats every 20 s (overriding the broker's 5 s, so one core keeps up), a commit every 30 s,
#             1,000 connections, 120 s: broker RSS at the end (all members held) minus RSS before the run, per
#             member; for Kafka also the live heap (jcmd GC.class_histogram, a full GC) before the run and with
#             every member held. A broker whose members were not all stable at the end gets no value.
#   --quick: 1,000 KIP-848 members (25 s), 100 members per convergence group, 2 late joiners, 1 M records of
#             history over 100 groups, 10,000 memory-row members (ramp 10 s, heartbeats every 10 s, 50 s).
#
# Benchmarks never assert times: the script fails (exit 1, at the end) only if a run errs; every row still runs.
# Output: a table on stdout, DIR/results.json (one entry per row: each broker's figures and the ratio), raw
# JSON, loadgen reports and broker logs beside it, and how long each row took.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"

ROWS="hb,commit,kip848,converge,restart,rss"
BROKERS="rl,rl2,kafka"
QUICK=0
CONNS=1000
FIXED_RATE=5000
COMMIT_CONNS="1,8,64"
KIP848_MEMBERS=""
CONV_MEMBERS=""
LATE=""
RESTART_RECORDS=""
RSS_MEMBERS=""
KAFKA_RSS_HEAP=1g
BUILD=1
OUT="$TARGET_DIR/bench-kafka"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rows) ROWS="$2"; shift ;;
    --brokers) BROKERS="$2"; shift ;;
    --quick) QUICK=1 ;;
    --no-two-cores) BROKERS="rl,kafka" ;;
    --connections) CONNS="$2"; shift ;;
    --fixed-rate) FIXED_RATE="$2"; shift ;;
    --commit-conns) COMMIT_CONNS="$2"; shift ;;
    --kip848-members) KIP848_MEMBERS="$2"; shift ;;
    --converge-members) CONV_MEMBERS="$2"; shift ;;
    --late-joiners) LATE="$2"; shift ;;
    --restart-records) RESTART_RECORDS="$2"; shift ;;
    --rss-members) RSS_MEMBERS="$2"; shift ;;
    --kafka-rss-heap) KAFKA_RSS_HEAP="$2"; shift ;;
    --rss-ramp) RSS_RAMP_WANT="$2"; shift ;;
    --skip-build) BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench-kafka: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
for r in ${ROWS//,/ }; do
  [[ ",hb,commit,kip848,converge,restart,rss," == *",$r,"* ]] || { echo "bench-kafka: unknown row '$r'" >&2; exit 2; }
done
for b in ${BROKERS//,/ }; do
  [[ ",rl,rl2,kafka," == *",$b,"* ]] || { echo "bench-kafka: unknown broker '$b'" >&2; exit 2; }
done
row_on() { [[ ",$ROWS," == *",$1,"* ]]; }
broker_on() { [[ ",$BROKERS," == *",$1,"* ]]; }

if [[ $QUICK -eq 1 ]]; then
  SAT=4; RATE_SECS=4; WARM=1; WARMUP=6
  : "${KIP848_MEMBERS:=1000}" "${CONV_MEMBERS:=100}" "${LATE:=2}" "${RESTART_RECORDS:=1000000}" "${RSS_MEMBERS:=10000}"
  KIP_DURATION=25; KIP_WARMUP=12; KIP_RAMP=3
  RSS_RAMP=10; RSS_DURATION=50; RSS_GROUPS_OF=100; RSS_HB_MS=10000
  RESTART_GROUPS=100
else
  SAT=10; RATE_SECS=8; WARM=2; WARMUP=20
  : "${KIP848_MEMBERS:=10000}" "${CONV_MEMBERS:=1000}" "${LATE:=10}" "${RESTART_RECORDS:=10000000}" "${RSS_MEMBERS:=100000}"
  KIP_DURATION=60; KIP_WARMUP=25; KIP_RAMP=10
  RSS_RAMP=60; RSS_DURATION=120; RSS_GROUPS_OF=100; RSS_HB_MS=20000
  RESTART_GROUPS=1000
fi
RSS_RAMP=${RSS_RAMP_WANT:-$RSS_RAMP}
RESTART_PARTITIONS=1000
bench_need_cores 2
bench_environment

if [[ $BUILD -eq 1 ]]; then
  say "cargo build --release (ringleader, hbflood, offsets-history, loadgen)"
  cargo build --release -q -p ringleader-engine --bin ringleader -p ringleader-macro-bench --bin hbflood \
    --bin offsets-history -p ringleader-loadgen --bin loadgen
fi
RL="$BIN/ringleader"
HB="$BIN/hbflood"
LG="$BIN/loadgen"
OH="$BIN/offsets-history"
for b in "$RL" "$HB" "$LG" "$OH"; do [[ -x "$b" ]] || { echo "missing $b (build first)" >&2; exit 1; }; done
mkdir -p "$OUT"
rm -rf "$OUT"/*.json "$OUT"/*.log "$OUT"/lg-* "$OUT"/*-data
FAILED=()
TIMINGS="$OUT/timings.txt"
: >"$TIMINGS"

KDIR=""
bench_on_exit() { [[ -z "$KDIR" ]] || scripts/kafka-ref.sh stop --dir "$KDIR" >/dev/null 2>&1 || true; }

# run_step LABEL CMD...: run a client; a failure is recorded (and reported at the end), not fatal.
run_step() {
  local label=$1 rc=0; shift
  "$@" || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "bench-kafka: $label failed (exit $rc)" >&2
    FAILED+=("$label")
  fi
}

# timed ROW BROKER CMD...: run CMD and note how long it took.
timed() {
  local row=$1 broker=$2 t=$SECONDS; shift 2
  "$@"
  echo "$row $broker $((SECONDS - t))" >>"$TIMINGS"
}

kafka_start() { # DIR [heap]: sets KDIR, KADDR, KPID
  KDIR=$1; shift
  rm -rf "$KDIR"
  KADDR=$(KAFKA_REF_HEAP_OPTS="${1:--Xms256m -Xmx768m}" taskset -c 0 scripts/kafka-ref.sh start --dir "$KDIR" \
    --set group.initial.rebalance.delay.ms=0)
  KPID=$(cat "$KDIR/pid")
}
kafka_stop() { scripts/kafka-ref.sh stop --dir "$KDIR" >/dev/null; }

# broker_start NAME [TAG]: a fresh broker for NAME (rl, rl2, rl-nofsync, kafka), its data and log named NAME-TAG
# under OUT; sets ADDR, PID. BROKER_RESTART=1: start it again on the data and port it had (a restart; does not
# wait for it to listen).
broker_start() {
  local name=$1 tag=${2:+-$2}
  local cpus=0 cores=1 extra=()
  case "$name" in
    rl-nofsync) extra=(--fsync never) ;;
    rl2) cpus=0,1; cores=2 ;;
  esac
  if [[ $name == kafka ]]; then
    if [[ ${BROKER_RESTART:-0} -eq 1 ]]; then
      rm -f "$KDIR/pid"
      taskset -c 0 scripts/kafka-ref.sh start --dir "$KDIR" --keep-data >/dev/null &
      KSTARTER=$!
      local i
      for ((i = 0; i < 1000; i++)); do [[ -s "$KDIR/pid" ]] && break; sleep 0.01; done
      PID=$(cat "$KDIR/pid")
    else
      kafka_start "$OUT/kafka$tag" "${KAFKA_HEAP:-}"
      ADDR=$KADDR; PID=$KPID
    fi
  elif [[ ${BROKER_RESTART:-0} -eq 1 ]]; then
    RL_PORT_WANT=${ADDR##*:} RL_KEEP_DATA=1 RL_NO_WAIT=1 rl_start "$name$tag" "$cpus" "$cores" "$OUT" "${extra[@]}"
    PID=$RL_PID
  else
    rl_start "$name$tag" "$cpus" "$cores" "$OUT" "${extra[@]}"
    ADDR=$RL_ADDR; PID=$RL_PID
  fi
}
broker_stop() { if [[ $1 == kafka ]]; then kafka_stop; else rl_stop; fi; }

# ------------------------------------------------------------------------------------------------- rows
warm_up() { # NAME ADDR
  local name=$1 addr=$2
  run_step "$name warm-up" pin 1 "$HB" --target "$addr" --request commit --connections 64 --saturate-secs "$WARMUP" \
    --warmup-secs 0 --label "$name warm-up" --json "$OUT/$name-warmup-commit.json" 2>/dev/null
  run_step "$name warm-up" pin 1 "$HB" --target "$addr" --join --connections 100 --saturate-secs "$((WARMUP / 2))" \
    --warmup-secs 0 --group-prefix warm --label "$name warm-up" --json "$OUT/$name-warmup-heartbeat.json" 2>/dev/null
}

row_commit() { # NAME ADDR PID
  local name=$1 addr=$2 pid=$3 c
  for c in ${COMMIT_CONNS//,/ }; do
    run_step "$name commit $c" pin 1 "$HB" --target "$addr" --request commit --connections "$c" --saturate-secs "$SAT" \
      --warmup-secs "$WARM" --server-pid "$pid" --label "$name commit $c" --json "$OUT/$name-commit-$c.json"
  done
}

row_hb() { # NAME ADDR PID
  run_step "$1 heartbeat" pin 1 "$HB" --target "$2" --join --connections "$CONNS" --saturate-secs "$SAT" \
    --rates "$FIXED_RATE" --rate-secs "$RATE_SECS" --warmup-secs "$WARM" --server-pid "$3" \
    --label "$1 heartbeat" --json "$OUT/$1-heartbeat.json"
}

# loadgen NAME TAG ADDR [args...]: one loadgen run, report in OUT/lg-NAME-TAG, log beside it.
loadgen() {
  local name=$1 tag=$2 addr=$3; shift 3
  local dir="$OUT/lg-$name-$tag"
  run_step "$name $tag" pin 1 "$LG" --bootstrap "$addr" --cores 1 --quiet --out "$dir" \
    --group-prefix "$tag-$name-$RANDOM-" "$@" >"$dir.log" 2>&1
  tail -4 "$dir.log" | sed "s/^/  [$name $tag] /" >&2 || true
}

row_kip848() { # NAME ADDR PID
  loadgen "$1" kip848 "$2" --protocol consumer --groups $((KIP848_MEMBERS / 10)) --members-per-group 10 \
    --topics 1 --partitions 10 --topic-prefix kip848-t --commit-interval-ms 0 --duration "${KIP_DURATION}s" \
    --warmup "${KIP_WARMUP}s" --ramp-up "${KIP_RAMP}s" --server-pid "$3"
}

row_converge() { # NAME ADDR PID
  local name=$1 addr=$2 pid=$3 proto
  local common=(--groups 1 --members-per-group "$CONV_MEMBERS" --topics 1 --partitions $((CONV_MEMBERS * 2))
    --topic-prefix converge-t --commit-interval-ms 0 --until-stable --rebalance-timeout-ms 60000 --server-pid "$pid")
  for proto in classic consumer; do
    loadgen "$name" "storm-$proto" "$addr" --protocol "$proto" "${common[@]}" --duration 180s
    loadgen "$name" "late-$proto" "$addr" --protocol "$proto" "${common[@]}" --late-joiners "$LATE" --duration 300s
  done
}

row_restart() { # NAME (starts and stops its own broker)
  local name=$1 ch=(--groups "$RESTART_GROUPS" --partitions "$RESTART_PARTITIONS" --records "$RESTART_RECORDS")
  broker_start "$name" restart
  local addr=$ADDR
  run_step "$name restart fill" pin 1 "$OH" fill --target "$addr" "${ch[@]}" --json "$OUT/$name-restart-fill.json"
  broker_stop "$name"
  local dir
  if [[ $name == kafka ]]; then dir="$KDIR/data"; else dir="$RL_DATA"; fi
  du -sb "$dir"/__consumer_offsets-* 2>/dev/null | awk '{ s += $1 } END { print s + 0 }' >"$OUT/$name-restart-bytes.txt"
  [[ $name == kafka ]] || mv "$RL_LOG" "$OUT/$name-restart-before.log"
  # Start the same broker again on its data, and probe from its process's start.
  BROKER_RESTART=1 broker_start "$name" restart
  run_step "$name restart probe" pin 1 "$OH" probe --target "$addr" "${ch[@]}" --pid "$PID" \
    --json "$OUT/$name-restart-probe.json"
  if [[ $name == kafka ]]; then
    wait "$KSTARTER" || true
    # What Kafka did: its load lines, whether its cleaner ran, how many segments the partitions hold.
    {
      echo "clean shutdown before the restart: $(grep -c 'shut down completed' "$KDIR/broker-prev.log" || true) line(s)"
      echo "segments: $(find "$KDIR/data" -path '*__consumer_offsets-*' -name '*.log' | wc -l)"
      echo "cleaner checkpoint entries: $(sed -n '3,$p' "$KDIR/data/cleaner-offset-checkpoint" 2>/dev/null | grep -c __consumer_offsets || true)"
      grep -h 'Finished loading of metadata from __consumer_offsets' "$KDIR/broker.log" || true
    } >"$OUT/$name-restart-load.txt"
    kafka_stop
  else
    { grep -h 'loaded __consumer_offsets' "$RL_LOG" || true; } >"$OUT/$name-restart-load.txt"
    rl_stop
  fi
}

row_rss() { # NAME (starts and stops its own broker)
  local name=$1
  KAFKA_HEAP="-Xms256m -Xmx$KAFKA_RSS_HEAP" broker_start "$name" rss
  local addr=$ADDR pid=$PID
  sleep 2
  local idle
  idle=$(awk '/VmRSS/ { print $2 * 1024 }' "/proc/$pid/status")
  echo "$idle" >"$OUT/$name-rss-idle.txt"
  # Kafka: the live heap (a full GC) before the run, and with every member held, 15 s before they leave.
  local jpid=""
  if [[ $name == kafka ]]; then
    jcmd "$pid" GC.class_histogram >"$OUT/kafka-rss-histogram-idle.txt" 2>&1 || true
    (sleep $((RSS_DURATION - 15)); jcmd "$pid" GC.class_histogram >"$OUT/kafka-rss-histogram.txt" 2>&1 || true) &
    jpid=$!
  fi
  loadgen "$name" rss "$addr" --protocol consumer --groups $((RSS_MEMBERS / RSS_GROUPS_OF)) \
    --members-per-group "$RSS_GROUPS_OF" --topics 1 --partitions 100 --topic-prefix rss-t \
    --heartbeat-interval-ms "$RSS_HB_MS" --commit-interval-ms 30000 --connections 1000 --ramp-up "${RSS_RAMP}s" \
    --duration "${RSS_DURATION}s" --warmup "$((RSS_RAMP + 20))s" --server-pid "$pid"
  [[ -n "$jpid" ]] && wait "$jpid"
  broker_stop "$name"
}

# ----------------------------------------------------------------------------------------------- run them
LIVE=0
for r in hb commit kip848 converge; do row_on "$r" && LIVE=1; done

for b in rl rl2 kafka; do
  broker_on "$b" || continue
  if [[ $LIVE -eq 1 ]]; then
    case $b in
      rl) say "ringleader (--cores 1, fsync always)" ;;
      rl2) say "ringleader (--cores 2 on both cores, fsync always; the clients share core 1)" ;;
      kafka) say "kafka 4.4.0 (one KRaft node, core 0)" ;;
    esac
    broker_start "$b"
    # The commit warm-up runs first: on Kafka its set-up creates __consumer_offsets, which joins need.
    timed warm-up "$b" warm_up "$b" "$ADDR"
    row_on commit && timed commit "$b" row_commit "$b" "$ADDR" "$PID"
    row_on hb && timed hb "$b" row_hb "$b" "$ADDR" "$PID"
    row_on kip848 && timed kip848 "$b" row_kip848 "$b" "$ADDR" "$PID"
    row_on converge && timed converge "$b" row_converge "$b" "$ADDR" "$PID"
    broker_stop "$b"
    if [[ $b == rl ]] && row_on commit; then
      say "ringleader (--cores 1, --fsync=never: benchmark-only, page-cache acknowledgements like Kafka's)"
      broker_start rl-nofsync
      timed warm-up rl-nofsync warm_up rl-nofsync "$ADDR"
      timed commit rl-nofsync row_commit rl-nofsync "$ADDR" "$PID"
      broker_stop rl-nofsync
    fi
  fi
  if row_on restart; then
    say "$b: restart with $RESTART_RECORDS offset-commit records of history"
    timed restart "$b" row_restart "$b"
  fi
  if row_on rss; then
    say "$b: RSS with $RSS_MEMBERS consumer-protocol members"
    timed rss "$b" row_rss "$b"
  fi
done

# ---------------------------------------------------------------------------------------------- results
say "results"
python3 - "$OUT" "$COMMIT_CONNS" "$(load_average)" "$QUICK" "$KAFKA_RSS_HEAP" "$RSS_MEMBERS" <<'EOF'
import json, os, re, sys
out, conns, load, quick, kheap, rss_members = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4] == "1", sys.argv[5], int(sys.argv[6])
BROKERS = {"rl": "ringleader --cores 1", "rl2": "ringleader --cores 2", "kafka": "kafka 4.4.0"}

def load_json(p):
    try:
        return json.load(open(os.path.join(out, p)))
    except Exception:
        return None

def phase(d, mode):
    for p in (d or {}).get("phases", []):
        if p["mode"] == mode:
            return p
    return None

def lg(name, tag):
    return load_json(f"lg-{name}-{tag}/summary.json")

def r1(x, n=2):
    return None if x is None else round(x, n)

rows = []
def row(key, title, unit, better, values, details=None, note=None, failed=None):
    """values: broker key -> primary value (None = not run / no result). failed: broker keys whose run
    failed (errors above loadgen's limit, members never all stable): their value is left out, and so is
    the ratio, but the details say what happened."""
    failed = [b for b in (failed or []) if values.get(b) is not None or (details or {}).get(b)]
    values = {b: (None if b in failed else v) for b, v in values.items()}
    vals = {BROKERS.get(b, b): v for b, v in values.items() if v is not None}
    if not vals and not failed:
        return
    e = {"row": key, "title": title, "unit": unit, "better": better, "value": vals}
    if failed:
        e["failed"] = [BROKERS.get(b, b) for b in failed]
    if details:
        e["details"] = {BROKERS.get(b, b): d for b, d in details.items() if d is not None}
    k = values.get("kafka")
    ratio = {}
    for b in ("rl", "rl2", "rl-nofsync"):
        v = values.get(b)
        if v and k:
            ratio[BROKERS.get(b, b)] = round(v / k if better == "higher" else k / v, 2)
    if ratio:
        e["ratio_ringleader_better_by"] = ratio
    if note:
        e["note"] = note
    rows.append(e)

BROKERS["rl-nofsync"] = "ringleader --cores 1 --fsync=never"
names = ["rl", "rl-nofsync", "rl2", "kafka"]

# hb / commit (hbflood)
def lat(p):
    return None if not p else {k: r1(p["latency_us"][k] / 1000, 3) for k in ("p50", "p99", "p999")} | {
        "throughput_rps": r1(p["throughput_rps"], 0), "errors": p["errors"], "server_cpu": r1(p.get("server_cpu"))}
for c in conns:
    ph = {n: phase(load_json(f"{n}-commit-{c}.json"), "saturate") for n in names}
    row(f"commit_{c}", f"synchronous OffsetCommit v8, {c} connection(s), 1 in flight", "commits/s", "higher",
        {n: r1(p["throughput_rps"], 0) if p else None for n, p in ph.items()}, {n: lat(p) for n, p in ph.items()},
        "Ringleader acknowledges after fdatasync (fsync=never: from the page cache, like a one-node Kafka)")
ph = {n: phase(load_json(f"{n}-heartbeat.json"), "saturate") for n in names}
row("hb_saturation", "classic Heartbeat v4 saturation, 1,000 joined members, 1 in flight each", "heartbeats/s",
    "higher", {n: r1(p["throughput_rps"], 0) if p else None for n, p in ph.items()}, {n: lat(p) for n, p in ph.items()})
ph = {n: phase(load_json(f"{n}-heartbeat.json"), "rate") for n in names}
row("hb_fixed_rate_p99", "classic Heartbeat v4 at a fixed rate (open loop), p99", "ms", "lower",
    {n: r1(p["latency_us"]["p99"] / 1000, 3) if p else None for n, p in ph.items()}, {n: lat(p) for n, p in ph.items()})

# kip848 (loadgen)
def cgh(d):
    if not d:
        return None
    l = d["apis"]["ConsumerGroupHeartbeat"]["latency_us"]
    s = d.get("server") or {}
    return {"p50_ms": r1(l.get("p50", 0) / 1000, 3), "p99_ms": r1(l.get("p99", 0) / 1000, 3),
            "p99_9_ms": r1(l.get("p99_9", 0) / 1000, 3), "heartbeats": l.get("count"),
            "errors": d["totals"]["errors"], "stable_at_end": d["members"]["stable_at_end"],
            "members": d["members"]["total"], "broker_cpu_cores": s.get("cpu_cores_steady"),
            "broker_rss_mb": s.get("rss_mb_at_end_of_run"), "passed": d["passed"]}
kd = {n: cgh(lg(n, "kip848")) for n in names}
def bad(ds):
    return [n for n, d in ds.items() if d and (not d.get("passed") or d.get("stable_at_end", 1) < d.get("members", 0))]
row("kip848_p99", "KIP-848 steady state: ConsumerGroupHeartbeat p99 (5 s interval, join/leave storms left out)",
    "ms", "lower", {n: d and d["p99_ms"] for n, d in kd.items()}, kd, failed=bad(kd))
row("kip848_cpu", "KIP-848 steady state: broker CPU over the steady window", "cores", "lower",
    {n: d and d["broker_cpu_cores"] for n, d in kd.items()}, failed=bad(kd))
row("kip848_rss", "KIP-848 steady state: broker RSS at the end of the run", "MB", "lower",
    {n: d and d["broker_rss_mb"] for n, d in kd.items()}, failed=bad(kd))

# converge (loadgen --until-stable / --late-joiners)
for proto in ("classic", "consumer"):
    def storm(d):
        if not d or not d.get("group_convergence"):
            return None
        g = d["group_convergence"]
        pm = (g.get("initial") or {}).get("per_member_join_to_stable_us") or {}
        return {"group_converged_ms": g.get("initial_converged_ms"), "members": d["members"]["total"],
                "stable_at_end": d["members"]["stable_at_end"],
                "per_member_p50_ms": r1(pm.get("p50", 0) / 1000, 1) if pm.get("count") else None,
                "per_member_p99_ms": r1(pm.get("p99", 0) / 1000, 1) if pm.get("count") else None,
                "errors": d["totals"]["errors"], "passed": d["passed"]}
    sd = {n: storm(lg(n, f"storm-{proto}")) for n in names}
    row(f"converge_storm_{proto}", f"{proto}: every member of one group joins at once → group converged", "ms",
        "lower", {n: d and d["group_converged_ms"] for n, d in sd.items()}, sd, failed=bad(sd))
    row(f"converge_storm_{proto}_member_p99", f"{proto}: same, per member join → stable with its final assignment, p99",
        "ms", "lower", {n: d and d["per_member_p99_ms"] for n, d in sd.items()}, failed=bad(sd))
    def late(d):
        if not d or not d.get("group_convergence"):
            return None
        l = d["group_convergence"]["late_joiners"]
        j, g = l["joiner_join_to_stable_us"], l["join_to_group_converged_us"]
        f = lambda h, k: r1(h[k] / 1000, 1) if h.get("count") else None
        return {"completed": l["completed"], "requested": l["requested"], "members": d["members"]["total"],
                "stable_at_end": d["members"]["stable_at_end"],
                "joiner_p50_ms": f(j, "p50"), "joiner_p99_ms": f(j, "p99"),
                "group_p50_ms": f(g, "p50"), "group_p99_ms": f(g, "p99"),
                "events_ms": l["events_ms"], "errors": d["totals"]["errors"], "passed": d["passed"]}
    ld = {n: late(lg(n, f"late-{proto}")) for n in names}
    row(f"converge_late_{proto}", f"{proto}: one member joins a stable group → group converged again, p50", "ms",
        "lower", {n: d and d["group_p50_ms"] for n, d in ld.items()}, ld, failed=bad(ld))
    row(f"converge_late_{proto}_joiner", f"{proto}: same, the joiner's join → stable, p50", "ms", "lower",
        {n: d and d["joiner_p50_ms"] for n, d in ld.items()}, failed=bad(ld))

# restart (offsets-history)
def restart(n):
    f, p = load_json(f"{n}-restart-fill.json"), load_json(f"{n}-restart-probe.json")
    if not f and not p:
        return None
    try:
        b = int(open(os.path.join(out, f"{n}-restart-bytes.txt")).read())
    except Exception:
        b = None
    try:
        loadlog = open(os.path.join(out, f"{n}-restart-load.txt")).read().splitlines()
    except Exception:
        loadlog = []
    # What the broker did on start, from its own log lines.
    load = {"partitions": 0, "records_replayed": 0, "bytes_read": 0, "max_partition_ms": 0}
    for l in loadlog:
        m = re.search(r"Finished loading of metadata from __consumer_offsets-\d+ with epoch \d+ in (\d+)ms "
                      r"where (\d+)ms was spent in the scheduler\. Loaded (\d+) records which total to (\d+) bytes", l)
        if m:
            load["partitions"] += 1
            load["records_replayed"] += int(m[3])
            load["bytes_read"] += int(m[4])
            load["max_partition_ms"] = max(load["max_partition_ms"], int(m[1]))
            continue
        m = re.search(r"loaded __consumer_offsets-\d+ .*records=(\d+) bytes=(\d+) .*millis=(\d+) .*"
                      r"snapshot_offset=(-?\d+) snapshot_records=(\d+)", l)
        if m:
            load["partitions"] += 1
            load["records_replayed"] += int(m[1])
            load["bytes_read"] += int(m[2])
            load["max_partition_ms"] = max(load["max_partition_ms"], int(m[3]))
            load["snapshot_records"] = load.get("snapshot_records", 0) + int(m[5])
            load["partitions_from_a_snapshot"] = load.get("partitions_from_a_snapshot", 0) + (int(m[4]) >= 0)
            continue
        for key in ("segments", "cleaner checkpoint entries", "clean shutdown before the restart"):
            if l.startswith(key + ":"):
                load[key.replace(" ", "_")] = int(l.split(":")[1].split()[0])
    return {"records": (f or {}).get("records"), "fill_records_per_s": r1((f or {}).get("records_per_s"), 0),
            "offsets_bytes_on_disk": b, "listening_ms": (p or {}).get("listening_ms"),
            "first_group_ms": (p or {}).get("first_group_ms"), "all_groups_ms": (p or {}).get("all_groups_ms"),
            "not_yet_codes": (p or {}).get("not_yet_codes"), "load": load}
rd = {n: restart(n) for n in names}
row("restart_first_group", "restart with the history: process start → first group answers OffsetFetch", "ms",
    "lower", {n: d and d["first_group_ms"] for n, d in rd.items()}, rd)
row("restart_all_groups", "restart with the history: process start → every group answers", "ms", "lower",
    {n: d and d["all_groups_ms"] for n, d in rd.items()})
row("restart_fill", "writing the history: OffsetCommit records/s (1,000 per request, 16 connections x 4)",
    "records/s", "higher", {n: d and d["fill_records_per_s"] for n, d in rd.items()})

# rss (loadgen)
def rss(n):
    d = lg(n, "rss")
    if not d:
        return None
    try:
        idle = int(open(os.path.join(out, f"{n}-rss-idle.txt")).read())
    except Exception:
        idle = None
    s = d.get("server") or {}
    held = s.get("rss_mb_at_end_of_run")
    res = {"members": d["members"]["total"], "stable_at_end": d["members"]["stable_at_end"],
           "ever_stable": d["members"]["ever_stable"], "errors": d["totals"]["errors"], "passed": d["passed"],
           "idle_rss_mb": r1(idle / 1e6, 1) if idle else None, "held_rss_mb": held,
           "max_rss_mb": s.get("rss_mb_max_incl_drain"),
           "hb_p99_ms": r1(d["apis"]["ConsumerGroupHeartbeat"]["latency_us"].get("p99", 0) / 1000, 1)}
    if held and idle:
        res["rss_bytes_per_member"] = round((held * 1e6 - idle) / d["members"]["total"])
    if n == "kafka":
        res["heap"] = f"-Xms256m -Xmx{kheap}"
        def live(f):
            try:
                tot = [l for l in open(os.path.join(out, f)) if l.startswith("Total")]
                return int(tot[-1].split()[2])
            except Exception:
                return None
        held_heap, idle_heap = live("kafka-rss-histogram.txt"), live("kafka-rss-histogram-idle.txt")
        res["live_heap_mb_idle"] = idle_heap and r1(idle_heap / 1e6, 1)
        res["live_heap_mb_all_members_held"] = held_heap and r1(held_heap / 1e6, 1)
        if held_heap and idle_heap:
            res["live_heap_bytes_per_member"] = round((held_heap - idle_heap) / d["members"]["total"])
    return res
sd = {n: rss(n) for n in names}
row("rss_per_member", f"RSS per member, {rss_members:,} consumer-protocol members held", "bytes", "lower",
    {n: d and d.get("rss_bytes_per_member") for n, d in sd.items()}, sd, failed=bad(sd),
    note="a broker whose members were not all stable at the end did not hold the load: no value, see details")

timings = {}
for line in open(os.path.join(out, "timings.txt")):
    r, b, s = line.split()
    timings.setdefault(r, {})[BROKERS.get(b, b)] = int(s)
res = {"loadavg_at_end": load, "quick": quick, "rows": rows, "durations_s": timings,
       "ratio": "ratio_ringleader_better_by: ringleader/kafka for higher-is-better rows, kafka/ringleader for "
                "lower-is-better rows; > 1 means Ringleader is better"}
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=2)

cols = [b for b in ("rl", "rl-nofsync", "rl2", "kafka")
        if any(BROKERS[b] in r["value"] or BROKERS[b] in r.get("failed", []) for r in rows)]
def cell(v):
    return "-" if v is None else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.3g}")
print(f"\n{'row':44}{'unit':>10}" + "".join(f"{b:>12}" for b in cols) + "   ratio (>1: Ringleader better)")
for r in rows:
    ratios = ", ".join(f"{k.replace('ringleader ', '')}: {v}" for k, v in r.get("ratio_ringleader_better_by", {}).items())
    fails = f"   FAILED: {', '.join(r['failed'])} (see details)" if r.get("failed") else ""
    print(f"{r['row']:44}{r['unit']:>10}" + "".join(f"{cell(r['value'].get(BROKERS[b])):>12}" for b in cols) + f"   {ratios}{fails}")
print("\nrow durations (s): " + "; ".join(f"{r}: " + ", ".join(f"{b} {s}" for b, s in v.items()) for r, v in timings.items()))
print(f"load average at the end: {load}\nresults: {out}/results.json")
EOF

if [[ ${#FAILED[@]} -gt 0 ]]; then
  echo "bench-kafka: these runs failed (their rows are missing or partial): ${FAILED[*]}" >&2
  exit 1
fi

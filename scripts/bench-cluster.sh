#!/usr/bin/env bash
# Replicated commits, replicated produce and failover: one Ringleader node, three Ringleader nodes and three KRaft
# Kafka 4.4.0 nodes on loopback, in one run, with the same clients (hbflood, benches/cluster/produce.py,
# scripts/failover.py) on the same machine.
#
#   ./scripts/bench-cluster.sh                  every row (about 17 min on a loaded 2-core VM, after the build)
#   ./scripts/bench-cluster.sh --quick          shorter phases, 2 failover rounds (~9 min), for a smoke check
#   ./scripts/bench-cluster.sh --rows failover --systems rl3,kafka3
#
# Options:
#   --rows LIST          rows to run, comma-separated (all): commit, produce, failover
#   --systems LIST       systems, comma-separated (all): rl1 (one Ringleader node), rl3 (three Ringleader nodes),
#                        rl3-nofsync (the same with the benchmark-only --fsync=never: commit and produce rows
#                        only), kafka3
#   --commit-conns L     connection counts for the commit rows (1,8,64)
#   --produce-rf N       the produce row's replication factor on the three-node systems (default 3, the node
#                        count; 2 puts each partition on two of the three nodes)
#   --rounds R           failover rounds per cluster (5; --quick 2)
#   --quick              shorter phases (4 s measured, 8 s warm-up; produce 4 s after 2 s) and 2 rounds
#   --kafka-heap H       each Kafka node's heap options ("-Xms256m -Xmx512m")
#   --skip-build         use the binaries already in target/release
#   --out DIR            results directory (default target/bench-cluster)
#   BENCH_RINGLEADER=P   (environment) the ringleader binary to run instead of target/release/ringleader
#
# Setup: every broker process is pinned to core 0 (`taskset -c 0`): a cluster's three nodes share that core, as
# they share the machine; every client (hbflood, produce.py, failover.py) is pinned to core 1. Ringleader:
# `--cores 1` per node (one shard), group.initial.rebalance.delay.ms=0; a cluster's nodes get node.id 1-3, the same
# controller.quorum.voters and cluster.id (docs/replication.md): every `__consumer_offsets` partition (50) is a
# Raft group over the three nodes. Kafka: scripts/kafka-ref.sh start-cluster, three KRaft nodes each broker +
# controller, offsets.topic.replication.factor=3, default.replication.factor=3, min.insync.replicas=2,
# group.initial.rebalance.delay.ms=0, each JVM -Xms256m -Xmx512m with Kafka's G1 flags. Ports are picked free below
# the ephemeral range, so a node restarted on its ports finds them free. Every system first gets the same
# unmeasured warm-up: 64 connections committing in phases of 15 s (--quick 8 s) until a phase gains less than 10%
# over the one before (at least 2, at most 8; --quick 3), every phase's throughput kept in the results. Kafka's JIT
# needs it (scripts/bench-kafka.sh found its first commit rows 4x slower without one), and three JVMs compiling on
# one core need several phases: in a trial their 64-connection rate rose 414 -> 1,229 commits/s over six.
#
# Who waits for what before answering a commit: one Ringleader node, its own fdatasync; three Ringleader nodes, a
# majority of the partition's Raft replicas (the leader and one follower) having fdatasynced the entry (the
# leader's own fdatasync runs alongside the followers'); Kafka, the offsets partition's ISR (acks=all, at least
# min.insync.replicas=2) having the record in their page cache: Kafka does not fsync before acknowledging (its log
# flush is periodic). rl3-nofsync runs the Ringleader cluster with --fsync=never (benchmark-only: no fdatasync at
# all, acknowledged from the page cache like Kafka), the like-for-like comparison. The same holds for a produced
# batch (acks=all) on a topic of replication factor 3: Ringleader rl3 answers once a majority of the partition's
# Raft replicas have fdatasynced the entry holding it and the leader has written its topic log up to it (not
# synced: the Raft log is what a restart rebuilds it from; rl1: the node's own topic-log fdatasync; rl3-nofsync:
# no fdatasync at all, page cache); Kafka once the partition's ISR
# (at least min.insync.replicas=2) have it in their page cache.
#
# Rows:
#   commit    synchronous OffsetCommit v8 (hbflood --request commit --find-coordinator: one partition, one group
#             per connection, 1 in flight, each connection to its group's coordinator as FindCoordinator names
#             it, and to the new one after NOT_COORDINATOR) at each --commit-conns: commits/s, p50/p99 latency,
#             the brokers' CPU (all nodes of a cluster summed) per commit, and block writes completed on the
#             results' disk (/proc/diskstats, over the whole run) per commit. 10 s measured after 2 s.
#   produce   benches/cluster/produce.py: one confluent-kafka producer bootstrapped with all the system's nodes
#             creates a topic of 6 partitions with replication factor = the system's node count (rl1: 1; rl3,
#             rl3-nofsync, kafka3: 3, or --produce-rf) through AdminClient (retrying a create that times out: a Ringleader cluster's
#             metadata log may have no leader yet), waits until Metadata names a leader for every partition, then
#             produces 100-byte values without keys, acks=all, enable.idempotence=true, linger.ms=5, round-robin
#             over the partitions, at most 10,000 records outstanding (produced, not yet reported delivered; the
#             client's own buffer would otherwise grow to 100,000 and its wait dominate the latency):
#             records/s, MB/s (values), p50/p99 latency from each record's produce() call to its delivery
#             callback, and the brokers' CPU (all nodes summed, /proc/PID/stat as hbflood samples it for the
#             commit rows) per record. 10 s measured after 3 s (--quick 4 s after 2 s); run after the commit rows
#             (so Kafka's JIT is warm only if they ran too: alone, the 3 s are its whole warm-up).
#   failover  scripts/failover.py on each cluster (rl3, kafka3): one confluent-kafka client commits for one group
#             in a loop; each round the group's coordinator (the node every live node's FindCoordinator names) is
#             SIGKILLed; time from the kill until the next commit sent after it is acknowledged (by any node);
#             the node is restarted on its data and the next round waits until the cluster settled (Kafka: every
#             `__consumer_offsets` partition has its full ISR back). p50 and max over --rounds, and per round what
#             the survivors logged (Ringleader: when each learned the new leader of the group's partition; Kafka:
#             when the controller fenced the dead broker and when the new coordinator loaded the partition).
#             Kafka's defaults throughout: a SIGKILLed broker is noticed by the controller only when its
#             heartbeat session expires (broker.session.timeout.ms, 9 s), which is what its figure is made of.
#
# Benchmarks never assert times: the script fails (exit 1, at the end) only if a measured run errs. Output: a table
# on stdout and in DIR/summary.txt, DIR/results.json, the raw hbflood / failover JSON and every node's log beside
# it; a commit phase whose slowest round trip passed 1 s is flagged STALL with its slowest connections (group,
# broker). The machine may be shared: DIR/vmstat.txt (every second) and DIR/others.txt (processes above 20% CPU,
# every 10 s) say what else ran.
# Python for produce.py and failover.py: tests/clients/.venv (BENCH_PYTHON overrides it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"

ROWS="commit,produce,failover"
SYSTEMS="rl1,rl3,rl3-nofsync,kafka3"
COMMIT_CONNS="1,8,64"
QUICK=0
ROUNDS=""
KAFKA_HEAP="-Xms256m -Xmx512m"
BUILD=1
OUT="$TARGET_DIR/bench-cluster"
PRODUCE_RF=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rows) ROWS="$2"; shift ;;
    --systems) SYSTEMS="$2"; shift ;;
    --commit-conns) COMMIT_CONNS="$2"; shift ;;
    --produce-rf) PRODUCE_RF="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --quick) QUICK=1 ;;
    --kafka-heap) KAFKA_HEAP="$2"; shift ;;
    --skip-build) BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench-cluster: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -z "$PRODUCE_RF" || "$PRODUCE_RF" =~ ^[1-3]$ ]] || { echo "bench-cluster: --produce-rf wants 1, 2 or 3" >&2; exit 2; }
for r in ${ROWS//,/ }; do
  [[ ",commit,produce,failover," == *",$r,"* ]] || { echo "bench-cluster: unknown row '$r'" >&2; exit 2; }
done
for s in ${SYSTEMS//,/ }; do
  [[ ",rl1,rl3,rl3-nofsync,kafka3," == *",$s,"* ]] || { echo "bench-cluster: unknown system '$s'" >&2; exit 2; }
done
row_on() { [[ ",$ROWS," == *",$1,"* ]]; }
system_on() { [[ ",$SYSTEMS," == *",$1,"* ]]; }

if [[ $QUICK -eq 1 ]]; then
  SAT=4; WARM=1; WARMUP=8; WARM_MAX=3; PRODUCE_SECS=4; PRODUCE_WARM=2; : "${ROUNDS:=2}"
else
  SAT=10; WARM=2; WARMUP=15; WARM_MAX=8; PRODUCE_SECS=10; PRODUCE_WARM=3; : "${ROUNDS:=5}"
fi
bench_need_cores 2
bench_environment

PYTHON="${BENCH_PYTHON:-$REPO/tests/clients/.venv/bin/python}"
if row_on failover || row_on produce; then
  "$PYTHON" -c 'import confluent_kafka' 2>/dev/null \
    || { echo "bench-cluster: $PYTHON cannot import confluent_kafka (scripts/test.sh creates tests/clients/.venv; or set BENCH_PYTHON)" >&2; exit 1; }
fi

if [[ $BUILD -eq 1 ]]; then
  say "cargo build --release (ringleader, hbflood)"
  nice cargo build --release -q -p ringleader-engine --bin ringleader -p ringleader-macro-bench --bin hbflood
fi
# BENCH_RINGLEADER=PATH measures another build of the broker (an A/B of one change, same run conditions).
RL="${BENCH_RINGLEADER:-$BIN/ringleader}"
HB="$BIN/hbflood"
for b in "$RL" "$HB"; do [[ -x "$b" ]] || { echo "missing $b (build first)" >&2; exit 1; }; done
mkdir -p "$OUT"
rm -rf "$OUT"/*.json "$OUT"/*.log "$OUT"/*.disk "$OUT"/*.txt "$OUT"/*-data "$OUT"/rl3* "$OUT"/kafka3
FAILED=()
# What else ran meanwhile (the machine is shared): vmstat every second, and every 10 s the processes using
# more than 20% of a CPU.
vmstat -t 1 >"$OUT/vmstat.txt" 2>&1 &
bench_track $!
(while sleep 10; do
  echo "== $(date -u +%T)"
  ps -eo pid,pcpu,etime,args --sort=-pcpu --no-headers | awk '$2 > 20' | cut -c1-160 | head -8
done) >"$OUT/others.txt" 2>&1 &
bench_track $!
TIMINGS="$OUT/timings.txt"
: >"$TIMINGS"
T_START=$SECONDS

# run_step LABEL CMD...: run a client; a failure is recorded (and reported at the end), not fatal.
run_step() {
  local label=$1 rc=0; shift
  "$@" || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "bench-cluster: $label failed (exit $rc)" >&2
    FAILED+=("$label")
  fi
}

# timed ROW SYSTEM CMD...: run CMD and note how long it took.
timed() {
  local row=$1 sys=$2 t=$SECONDS; shift 2
  "$@"
  echo "$row $sys $((SECONDS - t))" >>"$TIMINGS"
}

# free_low_port: a free loopback port in 20000-32767, below the ephemeral range (a node restarted on its ports
# must not find one taken by an outgoing connection), not in $USED_PORTS.
USED_PORTS=""
free_low_port() {
  local p
  p=$(python3 - "$USED_PORTS" <<'PY'
import random, socket, sys
used = set(sys.argv[1].split())
for _ in range(500):
    p = random.randrange(20000, 32768)
    if str(p) in used:
        continue
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            continue
    print(p)
    break
else:
    sys.exit("no free port")
PY
)
  USED_PORTS+=" $p"
  echo "$p"
}

# ------------------------------------------------------------------------------------- the three systems
# Each start sets ADDR (where hbflood bootstraps), BOOTSTRAP (every node, comma-separated: produce.py), NODE_COUNT,
# PIDS (comma-separated, for the CPU samples) and, for a cluster, NODES_JSON (failover.py's description of its
# nodes).
CL_DIR=""
KDIR=""

# rl_cluster_start NAME [serve args...]: three Ringleader nodes in OUT/NAME, pinned to core 0.
rl_cluster_start() {
  local name=$1; shift
  CL_DIR="$OUT/$name"
  rm -rf "$CL_DIR"
  mkdir -p "$CL_DIR"
  local ports=() vports=() n voters=""
  for n in 1 2 3; do ports+=("$(free_low_port)"); vports+=("$(free_low_port)"); done
  for n in 1 2 3; do voters+="${voters:+,}$n@127.0.0.1:${vports[n - 1]}"; done
  local entries=()
  for n in 1 2 3; do
    local argv=(taskset -c 0 "$RL" serve --listen "127.0.0.1:${ports[n - 1]}" --data-dir "$CL_DIR/node$n"
      --cores 1 --set group.initial.rebalance.delay.ms=0 --set "node.id=$n" --set "controller.quorum.voters=$voters"
      --set cluster.id=bench-cluster "$@")
    # Leader changes are logged at debug: failover.py reads when each survivor learned the new leader.
    NO_COLOR=1 RUST_LOG=info,engine::runtime::replicated=debug "${argv[@]}" >"$CL_DIR/node$n.log" 2>&1 &
    echo $! >"$CL_DIR/node$n.pid"
    entries+=("$(python3 -c 'import json, sys; print(json.dumps({"id": int(sys.argv[1]), "addr": sys.argv[2],
      "pidfile": sys.argv[3], "log": sys.argv[4], "restart": sys.argv[5:]}))' "$n" "127.0.0.1:${ports[n - 1]}" \
      "$CL_DIR/node$n.pid" "$CL_DIR/node$n.log" "${argv[@]}")")
  done
  (IFS=,; echo "{\"kind\": \"ringleader\", \"nodes\": [${entries[*]}]}") >"$CL_DIR/nodes.json"
  NODES_JSON="$CL_DIR/nodes.json"
  for n in 1 2 3; do
    local i
    for ((i = 0; i < 1200; i++)); do
      grep -q "listening on" "$CL_DIR/node$n.log" && break
      kill -0 "$(cat "$CL_DIR/node$n.pid")" 2>/dev/null || { tail -20 "$CL_DIR/node$n.log" >&2; echo "node $n exited at start" >&2; return 1; }
      sleep 0.05
    done
  done
  ADDR="127.0.0.1:${ports[0]}"
  BOOTSTRAP="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
  NODE_COUNT=3
  PIDS=$(cat "$CL_DIR"/node{1,2,3}.pid | paste -sd,)
}

# rl_cluster_stop: a clean stop (SIGTERM) of every node of the cluster started last (by pid file: failover.py
# restarts nodes and writes their new pids there).
rl_cluster_stop() {
  [[ -n "$CL_DIR" ]] || return 0
  local f
  for f in "$CL_DIR"/node*.pid; do [[ -f "$f" ]] && stop_pid "$(cat "$f")" 30; done
  CL_DIR=""
}

kafka_cluster_start() {
  KDIR="$OUT/kafka3"
  rm -rf "$KDIR"
  ADDR=$(KAFKA_REF_HEAP_OPTS="$KAFKA_HEAP" taskset -c 0 scripts/kafka-ref.sh start-cluster --dir "$KDIR" \
    --set group.initial.rebalance.delay.ms=0)
  BOOTSTRAP=$ADDR
  NODE_COUNT=3
  ADDR=${ADDR%%,*}
  PIDS=$(cat "$KDIR"/node{1,2,3}/pid | paste -sd,)
  python3 - "$KDIR" "$KAFKA_HEAP" >"$KDIR/nodes.json" <<'PY'
import json, sys
d, heap = sys.argv[1], sys.argv[2]
nodes = [{"id": n, "addr": "127.0.0.1:" + open(f"{d}/node{n}/port").read().strip(), "pidfile": f"{d}/node{n}/pid",
          "log": f"{d}/node{n}/broker.log",
          "restart": ["env", f"KAFKA_REF_HEAP_OPTS={heap}", "taskset", "-c", "0", "scripts/kafka-ref.sh", "start",
                      "--dir", f"{d}/node{n}", "--keep-data"]} for n in (1, 2, 3)]
print(json.dumps({"kind": "kafka", "nodes": nodes}, indent=1))
PY
  NODES_JSON="$KDIR/nodes.json"
}
kafka_cluster_stop() {
  [[ -n "$KDIR" ]] || return 0
  scripts/kafka-ref.sh stop-cluster --dir "$KDIR" >/dev/null || true
  KDIR=""
}

bench_on_exit() { rl_cluster_stop || true; kafka_cluster_stop || true; }

system_start() { # NAME
  case "$1" in
    rl1) rl_start rl1 0 1 "$OUT"; ADDR=$RL_ADDR; BOOTSTRAP=$RL_ADDR; NODE_COUNT=1; PIDS=$RL_PID ;;
    rl3) rl_cluster_start rl3 ;;
    rl3-nofsync) rl_cluster_start rl3-nofsync --fsync never ;;
    kafka3) kafka_cluster_start ;;
  esac
}
system_stop() { # NAME
  case "$1" in
    rl1) rl_stop ;;
    rl3|rl3-nofsync) rl_cluster_stop ;;
    kafka3) kafka_cluster_stop ;;
  esac
}

# ------------------------------------------------------------------------------------------------- rows
# warm_up NAME: phases of WARMUP seconds, 64 connections committing, until one gains less than 10% over the one
# before (at least 2, at most WARM_MAX): three JVMs sharing one core take minutes to compile their hot paths.
warm_up() { # NAME
  local k prev=0 cur
  for ((k = 1; k <= WARM_MAX; k++)); do
    # Errors here (a Kafka cluster still electing the new offsets topic's leaders answers
    # COORDINATOR_NOT_AVAILABLE) are kept in the JSON but fail nothing: the phase is not measured.
    pin 1 "$HB" --target "$ADDR" --find-coordinator --request commit --connections 64 \
      --saturate-secs "$WARMUP" --warmup-secs 0 --server-pid "$PIDS" --group-prefix "warm$k-" \
      --label "$1 warm-up $k" --json "$OUT/$1-warmup-$k.json" || echo "  warm-up $k had errors (unmeasured)" >&2
    cur=$(json_get "$OUT/$1-warmup-$k.json" phases.0.throughput_rps 0)
    echo "  warm-up $k: $cur commits/s" >&2
    if ((k >= 2)) && python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 1.1 * float(sys.argv[2]) else 1)' "$cur" "$prev"; then
      break
    fi
    prev=$cur
  done
}

# Block writes completed on the device holding OUT (/proc/diskstats), around each commit run: what a commit costs
# the disk (fdatasync-bound writes on Ringleader; Kafka's are page-cache write-back).
DISK=$(basename "$(df --output=source "$OUT" | tail -1)")
disk_writes() { awk -v d="$DISK" '$3 == d { print $8 }' /proc/diskstats; }

row_commit() { # NAME
  local c w0
  for c in ${COMMIT_CONNS//,/ }; do
    w0=$(disk_writes)
    run_step "$1 commit $c" pin 1 "$HB" --target "$ADDR" --find-coordinator --request commit --connections "$c" \
      --saturate-secs "$SAT" --warmup-secs "$WARM" --server-pid "$PIDS" --label "$1 commit $c" \
      --json "$OUT/$1-commit-$c.json"
    echo "$(( $(disk_writes) - w0 )) $((SAT + WARM))" >"$OUT/$1-commit-$c.disk"
  done
}

# row_produce NAME: produce.py's JSON line to OUT/NAME-produce.json.
row_produce() { # NAME
  run_step "$1 produce" pin 1 "$PYTHON" benches/cluster/produce.py --bootstrap "$BOOTSTRAP" --topic bench-produce \
    --partitions 6 --replication-factor "$(( NODE_COUNT > 1 && ${PRODUCE_RF:-0} > 0 ? PRODUCE_RF : NODE_COUNT ))" --duration "$PRODUCE_SECS" --warmup "$PRODUCE_WARM" \
    --value-bytes 100 --linger-ms 5 --window 10000 --server-pid "$PIDS" --label "$1 produce" \
    >"$OUT/$1-produce.json"
}

row_failover() { # NAME
  run_step "$1 failover" pin 1 "$PYTHON" scripts/failover.py --nodes "$NODES_JSON" --rounds "$ROUNDS" \
    --label "$1" --out "$OUT/$1-failover.json"
}

# ---------------------------------------------------------------------------------------------- run them
for s in rl1 rl3 rl3-nofsync kafka3; do
  system_on "$s" || continue
  want_failover=0
  [[ $s == rl3 || $s == kafka3 ]] && row_on failover && want_failover=1
  row_on commit || row_on produce || [[ $want_failover -eq 1 ]] || continue
  case $s in
    rl1) say "ringleader, one node (--cores 1, fsync always)" ;;
    rl3) say "ringleader, three nodes (--cores 1 each, fsync always, all on core 0)" ;;
    rl3-nofsync) say "ringleader, three nodes, --fsync=never (benchmark-only: page-cache acknowledgements like Kafka's)" ;;
    kafka3) say "kafka 4.4.0, three KRaft nodes (broker + controller each, $KAFKA_HEAP, all on core 0)" ;;
  esac
  timed start "$s" system_start "$s"
  echo "  bootstrap $ADDR, pids $PIDS" >&2
  if row_on commit; then
    timed warm-up "$s" warm_up "$s"
    timed commit "$s" row_commit "$s"
  fi
  if row_on produce; then
    say "$s: produce, 6 partitions, replication factor $NODE_COUNT, ${PRODUCE_SECS} s after ${PRODUCE_WARM} s"
    timed produce "$s" row_produce "$s"
  fi
  if [[ $want_failover -eq 1 ]]; then
    say "$s: failover, $ROUNDS rounds"
    timed failover "$s" row_failover "$s"
  fi
  system_stop "$s"
done

# ---------------------------------------------------------------------------------------------- results
say "results"
python3 - "$OUT" "$COMMIT_CONNS" "$(load_average)" "$QUICK" "$KAFKA_HEAP" "$((SECONDS - T_START))" <<'EOF' | tee "$OUT/summary.txt"
import json, os, sys
out, conns, load, quick, kheap, took = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4] == "1", sys.argv[5], int(sys.argv[6])
NAMES = {"rl1": "RL 1 node", "rl3": "RL 3 nodes", "rl3-nofsync": "RL 3 nofsync", "kafka3": "Kafka 3 nodes"}
systems = list(NAMES)

def load_json(p):
    try:
        return json.load(open(os.path.join(out, p)))
    except Exception:
        return None

def sat(s, c):
    d = load_json(f"{s}-commit-{c}.json")
    for p in (d or {}).get("phases", []):
        if p["mode"] == "saturate":
            return p
    return None

rows = []  # (key, label, unit, {system: value}, better)
for c in conns:
    ph = {s: sat(s, c) for s in systems}
    rows.append((f"commit_{c}_rate", f"commits/s, {c} conn", "1/s", {s: p and p["throughput_rps"] for s, p in ph.items()}, "higher"))
    rows.append((f"commit_{c}_p50", f"  p50, {c} conn", "ms", {s: p and p["latency_us"]["p50"] / 1000 for s, p in ph.items()}, "lower"))
    rows.append((f"commit_{c}_p99", f"  p99, {c} conn", "ms", {s: p and p["latency_us"]["p99"] / 1000 for s, p in ph.items()}, "lower"))
    rows.append((f"commit_{c}_cpu", f"  broker CPU per commit, {c} conn", "us", {s: p and p.get("server_cpu") and p["throughput_rps"] and
                 p["server_cpu"] / p["throughput_rps"] * 1e6 for s, p in ph.items()}, "lower"))
    def disk(s, p):
        try:
            w, secs = map(int, open(os.path.join(out, f"{s}-commit-{c}.disk")).read().split())
        except Exception:
            return None
        return w / (p["throughput_rps"] * secs) if p and p["throughput_rps"] else None
    rows.append((f"commit_{c}_disk", f"  disk writes per commit (approx.), {c} conn", "", {s: disk(s, p) for s, p in ph.items()}, "lower"))
pr = {s: load_json(f"{s}-produce.json") for s in systems}
def lat(d, q):
    return d and (d.get("latency_ms") or {}).get(q)
rows.append(("produce_rate", "produce: records/s (6 part., acks=all)", "1/s", {s: d and d.get("records_per_s") for s, d in pr.items()}, "higher"))
rows.append(("produce_mbps", "  MB/s (100-byte values)", "MB/s", {s: d and d.get("mb_per_s") for s, d in pr.items()}, "higher"))
rows.append(("produce_p50", "  p50, produce() -> delivery", "ms", {s: lat(d, "p50") for s, d in pr.items()}, "lower"))
rows.append(("produce_p99", "  p99, produce() -> delivery", "ms", {s: lat(d, "p99") for s, d in pr.items()}, "lower"))
rows.append(("produce_cpu", "  broker CPU per record", "us", {s: d and d.get("server_cpu_us_per_record") for s, d in pr.items()}, "lower"))
fo = {s: load_json(f"{s}-failover.json") for s in systems}
rows.append(("failover_p50", "failover: kill -> next commit, p50", "ms", {s: d and d.get("recovery_ms_p50") for s, d in fo.items()}, "lower"))
rows.append(("failover_max", "failover: kill -> next commit, max", "ms", {s: d and d.get("recovery_ms_max") for s, d in fo.items()}, "lower"))

cols = [s for s in systems if any(r[3].get(s) is not None for r in rows)]
def cell(v):
    return "-" if v is None else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.3g}")
lines = [f"{'row':46}{'unit':>6}" + "".join(f"{NAMES[s]:>15}" for s in cols) + "   RL 3 nodes vs Kafka 3 nodes (>1: RL better)"]
res_rows = []
for key, label, unit, vals, better in rows:
    if all(vals.get(s) is None for s in cols):
        continue
    a, k = vals.get("rl3"), vals.get("kafka3")
    ratio = None
    if a and k and not key.endswith("_disk"):
        ratio = round(a / k if better == "higher" else k / a, 2)
    lines.append(f"{label:46}{unit:>6}" + "".join(f"{cell(vals.get(s)):>15}" for s in cols) + (f"   {ratio}" if ratio else ""))
    res_rows.append({"row": key, "title": label.strip(), "unit": unit, "better": better,
                     "value": {s: (round(v, 3) if v is not None else None) for s, v in vals.items()},
                     "ratio_rl3_vs_kafka3": ratio})

# warm-up throughputs (a JIT still warming shows as a second phase well above the first)
warm = {s: [round(p["throughput_rps"]) for k in range(1, 20) for p in (load_json(f"{s}-warmup-{k}.json") or {}).get("phases", [])]
        for s in systems}
warm = {s: v for s, v in warm.items() if v}
errs = {}
for s in systems:
    for c in conns:
        p = sat(s, c)
        if p and (p["errors"] or p.get("relocations")):
            errs[f"{s} commit {c}"] = {"errors": p["errors"], "codes": p["error_codes"], "relocations": p.get("relocations")}
for s, d in pr.items():
    if d and (d.get("error") or d.get("errors")):
        errs[f"{s} produce"] = {"errors": d.get("errors"), "codes": d.get("error_codes"), "error": d.get("error")}
lines.append("")
if warm:
    lines.append("warm-up (64 connections, phases until one gains < 10%, commits/s): " + "; ".join(f"{NAMES[s]} {v}" for s, v in warm.items()))
if errs:
    lines.append(f"errors / reconnections in the measured commit and produce phases: {errs}")
for s, d in pr.items():
    if d and d.get("records_per_s"):
        lines.append(f"produce {NAMES[s]}: replication factor {d['replication_factor']}, {d['records']:,} records in "
                     f"{d['measured_s']} s, max latency {d['latency_ms']['max']:.0f} ms; every partition led "
                     f"{d.get('leaders_s')} s after the first create ({d.get('create_attempts')} attempt(s))")
for s in systems:
    for c in conns:
        p = sat(s, c)
        if p and p["latency_us"]["max"] > 1e6:
            lines.append(f"STALL: {NAMES[s]} commit {c}: max {p['latency_us']['max'] / 1e6:.1f} s; slowest connections: "
                         + ", ".join(f"{x['group']} on {x['broker']} {x['max_ms']:.0f} ms" for x in p.get("slowest_connections", [])))
for s, d in fo.items():
    if not d:
        continue
    lines.append(f"failover {NAMES[s]}: {len(d['rounds'])} rounds, kill -> next acknowledged commit (ms): "
                 + ", ".join(str(r["recovery_ms"]) for r in d["rounds"])
                 + f"; last acknowledged {d['last_acked']}, committed at the end {d['committed_at_end']}"
                 + (" (LOST)" if d["lost_commits"] else "") + (f"; FAILED: {d['failed']}" if d.get("failed") else ""))
    for r in d["rounds"]:
        extra = " (the KRaft leader too)" if r.get("killed_was_kraft_leader") else ""
        lines.append(f"  round {r['round']}: killed node {r['killed']}{extra} -> coordinator {r['new_coordinator']}, "
                     f"{r['recovery_ms']} ms; survivors' log (s after the kill): {r['events_s']}")
timings = {}
for line in open(os.path.join(out, "timings.txt")):
    r, s, t = line.split()
    timings.setdefault(s, {})[r] = int(t)
lines.append("")
lines.append("durations (s): " + "; ".join(f"{s}: " + ", ".join(f"{r} {t}" for r, t in v.items()) for s, v in timings.items())
             + f"; whole run {took} s")
lines.append(f"load average at the end: {load}")
lines.append("pinning: every broker process on core 0 (a cluster's three nodes share it), hbflood, produce.py and failover.py on core 1")
lines.append("acknowledgements: Ringleader fdatasyncs on each node before it counts towards the majority (RL 3 nofsync: "
             "benchmark-only, no fdatasync); Kafka acknowledges once the ISR has the record in its page cache (no fsync)")
print("\n".join(lines))
json.dump({"quick": quick, "kafka_heap": kheap, "loadavg_at_end": load, "rows": res_rows, "warm_up_rps": warm,
           "commit_errors": errs, "produce": pr, "failover": fo, "durations_s": timings, "whole_run_s": took},
          open(os.path.join(out, "results.json"), "w"), indent=2)
EOF
echo "results: $OUT/summary.txt, $OUT/results.json" >&2

if [[ ${#FAILED[@]} -gt 0 ]]; then
  echo "bench-cluster: these runs failed (their rows are missing or partial): ${FAILED[*]}" >&2
  exit 1
fi

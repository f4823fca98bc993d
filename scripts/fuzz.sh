#!/usr/bin/env bash
# Run every cargo-fuzz target (or the ones named) for a bounded time, one after the other, one
# job each, and print per target: time, executions, exec/s, coverage (edges) and features, corpus
# size, and crashes (with the artifact to reproduce).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     # default 60 s, every target
#   RSS_MB=4096 scripts/fuzz.sh 300 frame_decode          # RSS cap (default 2048 MiB)
#   CARGO_FUZZ="cargo +nightly fuzz" scripts/fuzz.sh      # use the nightly toolchain instead
#
# Inputs: fuzz/seeds/<target>/ (committed) and fuzz/corpus/<target>/ (local, gitignored; new
# units go there, so repeated runs build on each other). Logs: fuzz/logs/<target>.log.
# Exits 1 if any target crashed (or failed to run), 0 otherwise.
set -uo pipefail

cd "$(dirname "$0")/../fuzz"

SECS=${1:-60}
shift || true
RSS_MB=${RSS_MB:-2048}
MAX_LEN=${MAX_LEN:-8192}
# A stable toolchain runs cargo-fuzz's nightly-only flags with RUSTC_BOOTSTRAP=1.
export RUSTC_BOOTSTRAP=1
read -r -a FUZZ <<<"${CARGO_FUZZ:-cargo fuzz}"

if [ $# -gt 0 ]; then
    TARGETS=("$@")
else
    mapfile -t TARGETS < <("${FUZZ[@]}" list)
fi

"${FUZZ[@]}" build || { echo "fuzz: build failed" >&2; exit 1; }

mkdir -p logs
summary=()
failed=0
for t in "${TARGETS[@]}"; do
    mkdir -p "corpus/$t" "seeds/$t" "artifacts/$t"
    log="logs/$t.log"
    echo "== $t: ${SECS}s" >&2
    start=$(date +%s)
    "${FUZZ[@]}" run "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$SECS" -rss_limit_mb="$RSS_MB" -max_len="$MAX_LEN" -timeout=10 \
        -print_final_stats=1 >"$log" 2>&1
    rc=$?
    elapsed=$(($(date +%s) - start))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    # The last status line: "#N <EVENT> cov: C ft: F corp: U/S lim: ... exec/s: E rss: R".
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$last")
    crashes=$(grep -c 'Test unit written to' "$log")
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | head -1)
    if [ "$crashes" -gt 0 ] || [ "$rc" -ne 0 ]; then
        failed=1
        [ -z "$artifact" ] && artifact="exit $rc, see fuzz/$log"
    fi
    summary+=("$(printf '%-20s %6ss %12s %8s %7s %7s %12s %3s %s' "$t" "$elapsed" \
        "${runs:--}" "${eps:--}" "${cov:--}" "${ft:--}" "${corp:--}" "$crashes" "${artifact:-}")")
done

printf '\n%-20s %7s %12s %8s %7s %7s %12s %3s %s\n' target time runs exec/s cov ft corpus crash artifact
printf '%s\n' "${summary[@]}"
exit "$failed"

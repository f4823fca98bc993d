#!/usr/bin/env bash
# The consensus-library spike of issue 19: one replicated log (3 replicas in one process, TCP on
# 127.0.0.1, 100-byte entries, one fdatasync per persisted batch) on tikv's raft crate and on
# openraft 0.9, K concurrent proposers on the leader, interleaved in one run so both see the same
# machine. Prints one line per library, K and round; see docs/replication.md for what we read.
#   ROUNDS=2 KS=1,8,64 scripts/raft-spike.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rounds="${ROUNDS:-2}"
export KS="${KS:-1,8,64}"
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
for c in raftrs openraft; do
  (cd "$root/benches/raft-spike/$c" && cargo build --release --locked -q)
done
for r in $(seq 1 "$rounds"); do
  echo "# round $r"
  SPIKE_DATA="$data/raftrs" "$root/benches/raft-spike/raftrs/target/release/raftrs-spike" 2>&1
  SPIKE_DATA="$data/openraft" FLUSH=inline "$root/benches/raft-spike/openraft/target/release/openraft-spike" 2>&1 | sed 's/^openraft /openraft-inline /'
  SPIKE_DATA="$data/openraft" FLUSH=thread "$root/benches/raft-spike/openraft/target/release/openraft-spike" 2>&1 | sed 's/^openraft /openraft-thread /'
done

#!/usr/bin/env bash
# Disk-fault campaign (needs root: it mounts a 64 MiB tmpfs as the broker's data dir):
# the filesystem fills up, then turns read-only, while a producer (acks=all) and a group commit.
# Clients must get clear errors, the broker must log them and keep running, service must resume
# when space returns / the filesystem is writable, and nothing acknowledged may be lost (checked
# after a restart). Figures go to docs/reliability.md.
#
#   ./scripts/disk-faults.sh [--skip-build]
#
# Uses tests/clients/.venv (created by scripts/test.sh) for confluent-kafka.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/ringleader"
[[ "${1:-}" == "--skip-build" ]] || cargo build --release -p ringleader-engine
[[ $(id -u) -eq 0 ]] || { echo "disk-faults.sh needs root (mount)" >&2; exit 2; }
WORK="${CARGO_TARGET_DIR:-$REPO/target}/disk-faults"
umount "$WORK/mnt" 2>/dev/null || true
rm -rf "$WORK" && mkdir -p "$WORK/mnt"
mount -t tmpfs -o size=64m tmpfs "$WORK/mnt"
trap 'umount "$WORK/mnt" 2>/dev/null || true' EXIT
"$REPO/tests/clients/.venv/bin/python" "$REPO/scripts/disk_faults.py" "$BIN" "$WORK"

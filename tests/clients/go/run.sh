#!/usr/bin/env bash
# franz-go (kgo + kadm) client tests for Ringleader: each test starts the real `ringleader serve` binary
# (RINGLEADER_BIN, default <repo>/target/release/ringleader, which must already be built) on a free 127.0.0.1 port.
#
#   tests/clients/go/run.sh [go test args...]        e.g. run.sh -run TestAdmin -v
#
# To check the tests themselves against Apache Kafka instead, start the reference broker with the settings
# Ringleader gets (harness_test.go: brokerSets) and point KAFKA_BOOTSTRAP at it:
#
#   addr=$(scripts/kafka-ref.sh start --dir /tmp/kref --set group.initial.rebalance.delay.ms=0 \
#            --set group.consumer.heartbeat.interval.ms=1000 --set group.consumer.min.heartbeat.interval.ms=1000)
#   KAFKA_BOOTSTRAP=$addr tests/clients/go/run.sh
#   scripts/kafka-ref.sh stop --dir /tmp/kref
#
# RINGLEADER_LOG_DIR=DIR keeps each test's broker log and franz-go log in DIR (otherwise they go to a temporary
# directory and their tails are printed when a test fails).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
export GOMODCACHE="$REPO/.cache/go/mod"
export GOCACHE="$REPO/.cache/go/build"
export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
cd "$HERE"

command -v go >/dev/null || { echo "go-tests: go not found" >&2; exit 1; }

ok=0
for attempt in 1 2 3 4; do
  if go mod download; then ok=1; break; fi
  echo "go-tests: go mod download failed (attempt $attempt)" >&2
  sleep $((attempt * 5))
done
[[ $ok == 1 ]] || { echo "go-tests: could not download the Go modules" >&2; exit 1; }

go vet ./...
go test -count=1 -timeout 15m "$@" ./...

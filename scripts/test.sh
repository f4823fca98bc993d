#!/usr/bin/env bash
# Ringleader's full test run: Rust build + unit/integration tests, then the real-client
# interop suites against the release binary: Python (confluent-kafka, kafka-python, aiokafka,
# kcat, and Kafka's own tools), Node (kafkajs), Java (the Apache Kafka client, Kafka's tools, and
# the differential tests against the reference Kafka broker) and Go (franz-go).
#
#   ./scripts/test.sh                 everything (what CI runs)
#   ./scripts/test.sh --clients-only  skip cargo; use an existing binary (RINGLEADER_BIN or target/release)
#   ./scripts/test.sh --rust-only     only the cargo build + cargo test steps
#
# Extra arguments after `--` go to pytest, e.g. ./scripts/test.sh --clients-only -- -k kcat
# The reference broker (scripts/kafka-ref.sh) and the Java suite resolve from Maven Central into
# .cache/maven, the Go suite's modules go to .cache/go: both inside the repository, ignored by git.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

RUN_RUST=1
RUN_CLIENTS=1
PYTEST_EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --clients-only) RUN_RUST=0 ;;
    --rust-only) RUN_CLIENTS=0 ;;
    --) shift; PYTEST_EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

START=$SECONDS
FAILED=()
section() {
  printf '\n==================== %s  [+%ds] ====================\n' "$1" "$((SECONDS - START))"
}
trap 'rc=$?; if [[ $rc -ne 0 ]]; then printf "\n!!!!! scripts/test.sh FAILED (exit %d) after %ds\n" "$rc" "$((SECONDS - START))"; fi' EXIT

TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
export RINGLEADER_BIN="${RINGLEADER_BIN:-$TARGET_DIR/release/ringleader}"

if [[ $RUN_RUST -eq 1 ]]; then
  section "cargo build --release --workspace"
  cargo build --release --workspace

  # Release for tests too: the dependencies built above are reused, so on 2 cores this is
  # much cheaper than compiling the whole dependency tree a second time in the dev profile.
  section "cargo test --release --workspace"
  cargo test --release --workspace
fi

if [[ $RUN_CLIENTS -eq 0 ]]; then
  section "done (rust only)"
  exit 0
fi

section "real-client tests: prerequisites"
if [[ ! -x "$RINGLEADER_BIN" ]]; then
  echo "ringleader binary not found at $RINGLEADER_BIN" >&2
  exit 1
fi
echo "binary: $RINGLEADER_BIN"
if ! command -v kcat >/dev/null 2>&1; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "kcat missing: installing it with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq kcat >/dev/null
  else
    echo "WARNING: kcat not installed; its test will be skipped (it fails under CI=true)" >&2
  fi
fi
command -v kcat >/dev/null 2>&1 && echo "kcat: $(command -v kcat)"

# The security tests (test_security.py, SecurityTest, AclDiffTest) make their certificates with openssl at
# test time (scripts/gen-test-certs.sh); without it they would fail, so say so here.
command -v openssl >/dev/null 2>&1 || { echo "openssl not found: the security tests make their certificates with it" >&2; exit 1; }
echo "openssl: $(openssl version)"

for tool in java mvn go; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found: the Java, Go and reference-broker tests need it" >&2; exit 1; }
done
echo "java: $(java -version 2>&1 | sed -n 1p); $(mvn -v 2>/dev/null | sed -n 1p); $(go version)"

# Reference brokers left behind by a test that was killed must not outlive the run.
cleanup_reference_brokers() {
  pkill -f "kafka\.Kafka ${REPO}/" 2>/dev/null || true
}
trap 'rc=$?; cleanup_reference_brokers; if [[ $rc -ne 0 ]]; then printf "\n!!!!! scripts/test.sh FAILED (exit %d) after %ds\n" "$rc" "$((SECONDS - START))"; fi' EXIT

section "reference broker: resolve Apache Kafka 4.4.0 from Maven Central (scripts/kafka-ref.sh)"
# Once, before the suites start brokers in parallel: the classpath file is cached under .cache/.
"$REPO/scripts/kafka-ref.sh" classpath >/dev/null
echo "kafka $(ls "$REPO"/.cache/maven/org/apache/kafka/kafka_2.13/ 2>/dev/null | tr '\n' ' ')"

section "python venv + pip install (tests/clients/requirements.txt)"
VENV="$REPO/tests/clients/.venv"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip
# confluent-kafka must come as a manylinux wheel with its bundled librdkafka (no source build).
"$VENV/bin/python" -m pip install --disable-pip-version-check -q \
  --only-binary confluent-kafka -r "$REPO/tests/clients/requirements.txt"
"$VENV/bin/python" - <<'EOF'
import confluent_kafka, kafka, aiokafka, pytest
print(f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}), "
      f"kafka-python {kafka.__version__}, aiokafka {aiokafka.__version__}, pytest {pytest.__version__}")
EOF

section "pytest tests/clients"
# pytest.ini in tests/clients sets a per-test timeout; --timeout here makes it explicit.
# -n 2: two worker processes (2 cores); a worker that crashes (librdkafka abort) is replaced
# and only its current test fails.
# Broker logs of each test stay under target/client-tests/ (shown inline for failed tests).
LOGS="$TARGET_DIR/client-tests"
mkdir -p "$TARGET_DIR"
if ! "$VENV/bin/python" -m pytest "$REPO/tests/clients" -q --timeout=120 -n 2 --max-worker-restart=50 \
    --basetemp="$LOGS" "${PYTEST_EXTRA[@]}"; then
  echo "pytest FAILED; broker logs: $LOGS/*/test_*/ringleader*.log" >&2
  FAILED+=("pytest tests/clients")
fi

section "node: npm ci (tests/clients/node)"
cd "$REPO/tests/clients/node"
npm ci --no-audit --no-fund --loglevel=error

section "node: npm test (kafkajs)"
npm test || FAILED+=("npm test (tests/clients/node)")

cd "$REPO"
section "java: mvn test (tests/clients/java: Java client, Kafka's tools, differential tests)"
# Surefire keeps each class's output under tests/clients/java/target/surefire-reports; brokers'
# logs and data stay under target/java-tests/.
MVN=(mvn -B -Dstyle.color=never -Dmaven.repo.local="$REPO/.cache/maven" -f "$REPO/tests/clients/java/pom.xml")
mvn_ok=0
for attempt in 1 2 3; do
  # Resolve first (retried: Maven Central over a flaky network), so a test failure is not retried.
  if "${MVN[@]}" -q dependency:resolve dependency:resolve-plugins >/dev/null; then mvn_ok=1; break; fi
  echo "mvn dependency resolution failed (attempt $attempt)" >&2
  sleep $((attempt * 5))
done
if [[ $mvn_ok -eq 1 ]] && "${MVN[@]}" test; then
  :
else
  echo "java tests FAILED; reports: tests/clients/java/target/surefire-reports/" >&2
  FAILED+=("mvn test (tests/clients/java)")
fi

section "go: franz-go (tests/clients/go/run.sh)"
"$REPO/tests/clients/go/run.sh" || FAILED+=("go test (tests/clients/go)")

if [[ ${#FAILED[@]} -gt 0 ]]; then
  section "FAILED: ${FAILED[*]}"
  exit 1
fi
section "all tests passed"

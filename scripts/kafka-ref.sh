#!/usr/bin/env bash
# The reference broker: Apache Kafka 4.4.0 from Maven Central jars (no distribution tarball), run as one KRaft
# node (broker + controller) on free loopback ports with a data directory of its own. Differential tests and
# benchmarks compare Ringleader against it; Kafka's own tools run from the same classpath.
#
#   scripts/kafka-ref.sh start [--dir DIR] [--port P] [--set key=value]... [--feature name=level]...
#                              [--listener NAME:PROTOCOL]...
#                                                prints the bootstrap address
#   scripts/kafka-ref.sh start --dir DIR --keep-data   restart on DIR's data and server.properties (same ports)
#   scripts/kafka-ref.sh stop [--dir DIR]
#   scripts/kafka-ref.sh start-cluster [--dir DIR] [--nodes N] [--set key=value]...
#                                                N KRaft nodes (3), prints the bootstrap list
#   scripts/kafka-ref.sh stop-cluster [--dir DIR]
#   scripts/kafka-ref.sh tool NAME [args...]     NAME: consumer-groups, dump-log, storage, topics, configs,
#                                                transactions, acls, metadata-quorum, leader-election,
#                                                delete-records, log-dirs, reassign-partitions
#   scripts/kafka-ref.sh classpath               resolves the jars (once) and prints the classpath
#
# DIR (default target/kafka-ref) holds server.properties, data/, broker.log, pid and port; several brokers run
# side by side with different DIRs. `--set` lines go after the defaults, so they override them
# (e.g. --set group.initial.rebalance.delay.ms=0). `--feature` goes to the storage format, so the cluster starts
# at that finalized feature level (e.g. --feature transaction.version=1: the Java client then speaks
# transactions v1, as it does against Ringleader). Maven's repository is .cache/maven inside the project.
# `start` wipes DIR/data and formats it; `--keep-data` instead starts the broker again on what a previous
# run left (after `stop`, a clean shutdown), with that run's server.properties, and keeps its log as
# broker-prev.log.
#
# `--listener NAME:PROTOCOL` (e.g. SASL_SSL:SASL_SSL) adds a listener on a free loopback port next to PLAINTEXT
# (which stays the bootstrap address printed, and the inter-broker listener): it goes into listeners,
# advertised.listeners and listener.security.protocol.map, and DIR/listeners gets a line NAME=127.0.0.1:PORT.
# The listener's own settings (ssl.*, sasl.enabled.mechanisms, listener.name.<name>.<mechanism>.sasl.jaas.config)
# come with --set. The security tests run the reference broker this way.
#
# `start-cluster` runs N nodes (default 3) of one KRaft cluster on loopback, each broker + controller, in
# DIR/node1 .. DIR/nodeN (DIR default target/kafka-ref-cluster): one cluster id, `controller.quorum.voters` naming
# every node's controller port, and replication at N: offsets.topic.replication.factor, default.replication.factor
# and the transaction / share state topics at N, min.insync.replicas (and the state topics' min ISR) at 2 (1 when
# N < 3). Ports are picked free below the ephemeral range, so a node restarted on its ports does not find one taken
# by an outgoing connection. Every node starts at once (none finishes starting before a quorum of controllers
# is up), then the script waits for all. Each DIR/nodeK is an ordinary DIR: `stop --dir DIR/nodeK` and
# `start --dir DIR/nodeK --keep-data` stop and restart one node (its peers keep running). DIR/bootstrap holds the
# bootstrap list. `stop-cluster` stops every node. Same JVM settings as `start` (KAFKA_REF_HEAP_OPTS applies to
# each node).
#
# JVM settings: the broker runs with -Xms256m -Xmx768m and Kafka's own GC flags from bin/kafka-run-class.sh
# (G1, MaxGCPauseMillis=20, InitiatingHeapOccupancyPercent=35, ExplicitGCInvokesConcurrent); Kafka's default heap
# is 1 GiB, 768 MiB leaves room for Ringleader, a client JVM and the tests on a 2-core, 24 GiB machine. Tools run
# with -Xmx256m (Kafka's tool default), the serial GC and C1 only (-XX:TieredStopAtLevel=1) because they live for
# a second and start-up dominates. KAFKA_REF_HEAP_OPTS / KAFKA_REF_JVM_OPTS replace the broker's heap / extra flags.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_VERSION=4.4.0
POM="$REPO/tests/reference/pom.xml"
M2="${RINGLEADER_MAVEN_REPO:-$REPO/.cache/maven}"
CACHE="$REPO/.cache/kafka-ref"
LOG4J="$REPO/tests/reference/log4j2.properties"

# A node of start-cluster that fails to start stops the ones already launched (CLUSTER_STARTING=1).
die() {
  echo "kafka-ref: $*" >&2
  if [[ ${CLUSTER_STARTING:-0} -eq 1 ]]; then CLUSTER_STARTING=0; stop_cluster_nodes; fi
  exit 1
}

java_bin() {
  if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then echo "$JAVA_HOME/bin/java"; else command -v java || die "java not found"; fi
}

# The classpath file is keyed by the pom's content, so editing the pom re-resolves.
classpath() {
  local key cp_file
  key=$(sha256sum "$POM" | cut -c1-16)
  cp_file="$CACHE/classpath-$KAFKA_VERSION-$key.txt"
  if [[ ! -s "$cp_file" ]]; then
    mkdir -p "$CACHE"
    command -v mvn >/dev/null || die "mvn not found (Maven 3.8+ is needed to fetch Kafka's jars)"
    local attempt
    for attempt in 1 2 3; do
      if mvn -B -q -Dstyle.color=never -f "$POM" -Dmaven.repo.local="$M2" dependency:build-classpath \
          -Dmdep.outputFile="$cp_file.tmp" >&2; then
        mv "$cp_file.tmp" "$cp_file"
        break
      fi
      echo "kafka-ref: mvn failed (attempt $attempt)" >&2
      sleep $((attempt * 5))
    done
    [[ -s "$cp_file" ]] || die "could not resolve Kafka $KAFKA_VERSION from Maven Central"
  fi
  # The log4j2 configuration directory goes first so it is found as a resource too.
  printf '%s:%s\n' "$(dirname "$LOG4J")" "$(cat "$cp_file")"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

main_class() {
  case "$1" in
    consumer-groups) echo org.apache.kafka.tools.consumer.group.ConsumerGroupCommand ;;
    dump-log) echo org.apache.kafka.tools.DumpLogSegments ;;
    storage) echo kafka.tools.StorageTool ;;
    topics) echo org.apache.kafka.tools.TopicCommand ;;
    configs) echo org.apache.kafka.tools.ConfigCommand ;;
    transactions) echo org.apache.kafka.tools.TransactionsCommand ;;
    acls) echo org.apache.kafka.tools.AclCommand ;;
    metadata-quorum) echo org.apache.kafka.tools.MetadataQuorumCommand ;;
    leader-election) echo org.apache.kafka.tools.LeaderElectionCommand ;;
    delete-records) echo org.apache.kafka.tools.DeleteRecordsCommand ;;
    log-dirs) echo org.apache.kafka.tools.LogDirsCommand ;;
    reassign-partitions) echo org.apache.kafka.tools.reassign.ReassignPartitionsCommand ;;
    *) die "unknown tool '$1' (consumer-groups, dump-log, storage, topics, configs, transactions, acls, metadata-quorum, leader-election, delete-records, log-dirs, reassign-partitions)" ;;
  esac
}

run_tool() {
  local name="$1"; shift
  local cls cp
  cls=$(main_class "$name")
  cp=$(classpath)
  exec "$(java_bin)" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$LOG4J" -Dkafka.ref.log.level=WARN -cp "$cp" "$cls" "$@"
}

parse_dir_args() {
  DIR="$REPO/target/kafka-ref"
  PORT=""
  SETS=()
  FEATURES=()
  KEEP_DATA=0
  LISTENERS=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --dir) DIR="$2"; shift ;;
      --port) PORT="$2"; shift ;;
      --keep-data) KEEP_DATA=1 ;;
      --listener) [[ "$2" =~ ^[A-Z][A-Z0-9_]*:(PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL)$ ]] \
                    || die "--listener wants NAME:PROTOCOL (PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), got '$2'"
                  LISTENERS+=("$2"); shift ;;
      --set) [[ "$2" == *=* ]] || die "--set wants key=value, got '$2'"; SETS+=("$2"); shift ;;
      --feature) [[ "$2" == *=* ]] || die "--feature wants name=level, got '$2'"; FEATURES+=(--feature "$2"); shift ;;
      *) die "unknown argument: $1" ;;
    esac
    shift
  done
  mkdir -p "$DIR"
  DIR="$(cd "$DIR" && pwd)"
}

is_running() {
  [[ -f "$DIR/pid" ]] && kill -0 "$(cat "$DIR/pid")" 2>/dev/null
}

start() {
  parse_dir_args "$@"
  if is_running; then
    die "a reference broker already runs from $DIR (pid $(cat "$DIR/pid")); stop it first"
  fi
  local cp java
  cp=$(classpath)
  java=$(java_bin)
  local jvm_common=(-Djava.awt.headless=true -Dlog4j2.configurationFile="$LOG4J")
  if [[ $KEEP_DATA -eq 1 ]]; then
    [[ -f "$DIR/server.properties" && -d "$DIR/data" ]] || die "--keep-data: no previous broker in $DIR"
    [[ -z "$PORT" && ${#SETS[@]} -eq 0 && ${#FEATURES[@]} -eq 0 && ${#LISTENERS[@]} -eq 0 ]] \
      || die "--keep-data keeps the previous server.properties and features: no --port/--set/--feature/--listener"
    PORT=$(sed -n 's|^listeners=PLAINTEXT://127.0.0.1:\([0-9]*\),.*|\1|p' "$DIR/server.properties")
    [[ -n "$PORT" ]] || die "--keep-data: no PLAINTEXT listener in $DIR/server.properties"
    [[ -f "$DIR/broker.log" ]] && mv "$DIR/broker.log" "$DIR/broker-prev.log"
    rm -f "$DIR/port"
    launch "$cp" "$java" "${jvm_common[@]}"
    return
  fi
  [[ -n "$PORT" ]] || PORT=$(free_port)
  local cport
  cport=$(free_port)
  while [[ "$cport" == "$PORT" ]]; do cport=$(free_port); done
  rm -rf "$DIR/data" "$DIR/broker.log" "$DIR/port" "$DIR/listeners"
  # Extra listeners: each on a free port distinct from the others.
  local extra_l="" extra_a="" extra_m="" spec lport used=" $PORT $cport "
  for spec in "${LISTENERS[@]+"${LISTENERS[@]}"}"; do
    lport=$(free_port)
    while [[ "$used" == *" $lport "* ]]; do lport=$(free_port); done
    used+="$lport "
    extra_l+=",${spec%%:*}://127.0.0.1:$lport"
    extra_a+=",${spec%%:*}://127.0.0.1:$lport"
    extra_m+=",$spec"
    echo "${spec%%:*}=127.0.0.1:$lport" >> "$DIR/listeners"
  done
  {
    echo "process.roles=broker,controller"
    echo "node.id=1"
    echo "controller.quorum.voters=1@127.0.0.1:$cport"
    echo "listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$cport$extra_l"
    echo "advertised.listeners=PLAINTEXT://127.0.0.1:$PORT$extra_a"
    echo "controller.listener.names=CONTROLLER"
    echo "inter.broker.listener.name=PLAINTEXT"
    echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT$extra_m"
    echo "log.dirs=$DIR/data"
    echo "num.partitions=1"
    echo "offsets.topic.replication.factor=1"
    echo "transaction.state.log.replication.factor=1"
    echo "transaction.state.log.min.isr=1"
    echo "share.coordinator.state.topic.replication.factor=1"
    echo "share.coordinator.state.topic.min.isr=1"
    echo "group.initial.rebalance.delay.ms=3000"
    local kv
    for kv in "${SETS[@]+"${SETS[@]}"}"; do echo "$kv"; done
  } > "$DIR/server.properties"

  # Kafka's storage tool formats the log directory for this cluster id (KRaft needs it before the first start).
  local cluster_id
  cluster_id=$("$java" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "${jvm_common[@]}" -Dkafka.ref.log.level=WARN \
    -cp "$cp" kafka.tools.StorageTool random-uuid)
  "$java" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "${jvm_common[@]}" -Dkafka.ref.log.level=WARN \
    -cp "$cp" kafka.tools.StorageTool format -t "$cluster_id" -c "$DIR/server.properties" \
    "${FEATURES[@]+"${FEATURES[@]}"}" >"$DIR/format.log" 2>&1 \
    || { cat "$DIR/format.log" >&2; die "kafka-storage format failed"; }
  launch "$cp" "$java" "${jvm_common[@]}"
}

# launch CLASSPATH JAVA JVM_FLAGS...: start the broker of $DIR on $PORT and wait until it has started.
launch() {
  launch_bg "$@"
  wait_started
}

# launch_bg CLASSPATH JAVA JVM_FLAGS...: start the broker of $DIR, without waiting.
launch_bg() {
  local cp=$1 java=$2; shift 2
  local jvm_common=("$@")
  # shellcheck disable=SC2086
  nohup "$java" ${KAFKA_REF_HEAP_OPTS:--Xms256m -Xmx768m} -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent ${KAFKA_REF_JVM_OPTS:-} \
    "${jvm_common[@]}" -cp "$cp" kafka.Kafka "$DIR/server.properties" >"$DIR/broker.log" 2>&1 </dev/null &
  echo $! > "$DIR/pid"
}

# wait_started: until the broker of $DIR logs that it has started (120 s), then print its address.
wait_started() {
  local deadline=$((SECONDS + 120))
  until grep -q "Kafka Server started" "$DIR/broker.log" 2>/dev/null; do
    if ! is_running; then
      tail -n 40 "$DIR/broker.log" >&2
      die "the reference broker exited during start-up (log: $DIR/broker.log)"
    fi
    if (( SECONDS > deadline )); then
      tail -n 40 "$DIR/broker.log" >&2
      stop_dir
      die "the reference broker did not start within 120 s (log: $DIR/broker.log)"
    fi
    sleep 0.2
  done
  echo "$PORT" > "$DIR/port"
  echo "127.0.0.1:$PORT"
}

stop_dir() {
  is_running || { rm -f "$DIR/pid"; return 0; }
  local pid
  pid=$(cat "$DIR/pid")
  kill -TERM "$pid" 2>/dev/null || true
  local i
  for i in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$DIR/pid" "$DIR/port"
}

stop() {
  parse_dir_args "$@"
  stop_dir
}

# A free loopback port in 20000-32767 (below the ephemeral range) that is not in $USED_PORTS.
free_low_port() {
  python3 - "${USED_PORTS:-}" <<'PY'
import random, socket, sys
used = set(sys.argv[1].split())
for _ in range(500):
    p = random.randrange(20000, 32768)
    if str(p) in used:
        continue
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            continue
    print(p)
    break
else:
    sys.exit("no free port")
PY
}

parse_cluster_args() {
  CDIR="$REPO/target/kafka-ref-cluster"
  NODES=3
  SETS=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --dir) CDIR="$2"; shift ;;
      --nodes) [[ "$2" =~ ^[1-9][0-9]?$ ]] || die "--nodes wants a count, got '$2'"; NODES="$2"; shift ;;
      --set) [[ "$2" == *=* ]] || die "--set wants key=value, got '$2'"; SETS+=("$2"); shift ;;
      *) die "unknown argument: $1" ;;
    esac
    shift
  done
  mkdir -p "$CDIR"
  CDIR="$(cd "$CDIR" && pwd)"
}

start_cluster() {
  parse_cluster_args "$@"
  local k
  for ((k = 1; k <= NODES; k++)); do
    DIR="$CDIR/node$k"
    if is_running; then die "node $k already runs from $DIR (pid $(cat "$DIR/pid")); stop-cluster first"; fi
  done
  local cp java
  cp=$(classpath)
  java=$(java_bin)
  local jvm_common=(-Djava.awt.headless=true -Dlog4j2.configurationFile="$LOG4J")
  local ports=() cports=() p
  USED_PORTS=""
  for ((k = 1; k <= NODES; k++)); do
    p=$(free_low_port); USED_PORTS+=" $p"; ports+=("$p")
    p=$(free_low_port); USED_PORTS+=" $p"; cports+=("$p")
  done
  local voters="" bootstrap=""
  for ((k = 1; k <= NODES; k++)); do
    voters+="${voters:+,}$k@127.0.0.1:${cports[k - 1]}"
    bootstrap+="${bootstrap:+,}127.0.0.1:${ports[k - 1]}"
  done
  local rf=$NODES isr=2
  [[ $NODES -ge 3 ]] || isr=1
  local cluster_id
  cluster_id=$("$java" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "${jvm_common[@]}" -Dkafka.ref.log.level=WARN \
    -cp "$cp" kafka.tools.StorageTool random-uuid)
  for ((k = 1; k <= NODES; k++)); do
    DIR="$CDIR/node$k"
    mkdir -p "$DIR"
    rm -rf "$DIR/data" "$DIR/broker.log" "$DIR/broker-prev.log" "$DIR/port" "$DIR/listeners"
    {
      echo "process.roles=broker,controller"
      echo "node.id=$k"
      echo "controller.quorum.voters=$voters"
      echo "listeners=PLAINTEXT://127.0.0.1:${ports[k - 1]},CONTROLLER://127.0.0.1:${cports[k - 1]}"
      echo "advertised.listeners=PLAINTEXT://127.0.0.1:${ports[k - 1]}"
      echo "controller.listener.names=CONTROLLER"
      echo "inter.broker.listener.name=PLAINTEXT"
      echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
      echo "log.dirs=$DIR/data"
      echo "num.partitions=1"
      echo "offsets.topic.replication.factor=$rf"
      echo "default.replication.factor=$rf"
      echo "min.insync.replicas=$isr"
      echo "transaction.state.log.replication.factor=$rf"
      echo "transaction.state.log.min.isr=$isr"
      echo "share.coordinator.state.topic.replication.factor=$rf"
      echo "share.coordinator.state.topic.min.isr=$isr"
      echo "group.initial.rebalance.delay.ms=3000"
      local kv
      for kv in "${SETS[@]+"${SETS[@]}"}"; do echo "$kv"; done
    } > "$DIR/server.properties"
    "$java" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "${jvm_common[@]}" -Dkafka.ref.log.level=WARN \
      -cp "$cp" kafka.tools.StorageTool format -t "$cluster_id" -c "$DIR/server.properties" >"$DIR/format.log" 2>&1 \
      || { cat "$DIR/format.log" >&2; die "kafka-storage format failed for node $k"; }
  done
  CLUSTER_STARTING=1
  for ((k = 1; k <= NODES; k++)); do
    DIR="$CDIR/node$k"
    PORT=${ports[k - 1]}
    launch_bg "$cp" "$java" "${jvm_common[@]}"
  done
  for ((k = 1; k <= NODES; k++)); do
    DIR="$CDIR/node$k"
    PORT=${ports[k - 1]}
    wait_started >/dev/null
  done
  CLUSTER_STARTING=0
  echo "$bootstrap" > "$CDIR/bootstrap"
  echo "$bootstrap"
}

stop_cluster_nodes() {
  local d
  for d in "$CDIR"/node*; do
    [[ -d "$d" ]] || continue
    DIR=$d
    stop_dir
  done
}

stop_cluster() {
  parse_cluster_args "$@"
  stop_cluster_nodes
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
  start) start "$@" ;;
  stop) stop "$@" ;;
  tool) [[ $# -gt 0 ]] || die "tool wants a name"; run_tool "$@" ;;
  classpath) classpath ;;
  start-cluster) start_cluster "$@" ;;
  stop-cluster) stop_cluster "$@" ;;
  -h|--help|"") sed -n '2,48p' "$0" ;;
  *) die "unknown command '$cmd' (start, stop, start-cluster, stop-cluster, tool, classpath)" ;;
esac

package dev.ringleader.kafkajmh;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.message.OffsetFetchRequestData;
import org.apache.kafka.common.message.OffsetFetchResponseData;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.requests.TransactionResult;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.internals.LogContext;
import org.apache.kafka.coordinator.common.runtime.CoordinatorExecutor;
import org.apache.kafka.coordinator.common.runtime.CoordinatorLoader;
import org.apache.kafka.coordinator.common.runtime.CoordinatorLoaderImpl;
import org.apache.kafka.coordinator.common.runtime.CoordinatorPlayback;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorTimer;
import org.apache.kafka.coordinator.common.runtime.SnapshottableCoordinator;
import org.apache.kafka.coordinator.group.GroupConfigManager;
import org.apache.kafka.coordinator.group.GroupCoordinatorConfig;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.GroupCoordinatorShard;
import org.apache.kafka.coordinator.group.metrics.GroupCoordinatorMetrics;
import org.apache.kafka.coordinator.group.modern.share.ShareGroupConfig;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;
import org.apache.kafka.timeline.SnapshotRegistry;

import com.yammer.metrics.core.MetricsRegistry;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Kafka 4.4 loading a {@code __consumer_offsets} partition the way a broker does when it becomes the partition's
 * coordinator: {@code CoordinatorLoaderImpl} reads the {@code UnifiedLog} in {@code offsets.load.buffer.size}
 * chunks, deserializes every record with {@code GroupCoordinatorRecordSerde} and replays it into a fresh
 * {@code GroupCoordinatorShard} through {@code SnapshottableCoordinator}, committing every 16,384 offsets
 * ({@code DEFAULT_COMMIT_INTERVAL_OFFSETS}). Kafka's own {@code GroupCoordinatorShardLoadingBenchmark} drives the
 * same classes from an in-memory mock log; here the log is real: Kafka's {@code UnifiedLog} opened over segment
 * files on disk (read through the page cache, as a restart finds them).
 *
 * <p>The segments come from outside: {@code -Drl.jmh.offsets=DIR}, with {@code DIR/<log>/*.log} for each value of
 * the {@code log} parameter, {@code <shape>-<records>}:
 * <ul>
 *   <li>{@code ringleader-N}: Ringleader's replay-bench records (1,000 groups × 64 partitions of one topic, batches
 *   of 1,000), written by its {@code offset_log} example, so Kafka loads the very bytes Ringleader's bench loads;</li>
 *   <li>{@code kafka-N}: the records of Kafka's loading benchmark (one group, 2,048 topics, batches of 2,048),
 *   written by {@link WriteOffsetLog}, to reproduce Kafka's published rate on this machine.</li>
 * </ul>
 * Opening the log in the trial set-up recovers every segment (Kafka validates each batch's CRC and rebuilds the
 * indexes); the set-up fails unless Kafka accepts every record. Each invocation loads the whole partition into a new
 * shard and is checked afterwards; records/s = records / time.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
public class OffsetLoadBench {

    @Param({"ringleader-2000000"})
    public String log;

    private long records;
    private boolean kafkaShape;

    private static final TopicPartition TP = new TopicPartition("__consumer_offsets", 0);

    private Path workDir;
    private KafkaScheduler logScheduler;
    private UnifiedLog unifiedLog;
    private GroupCoordinatorConfig config;

    private GroupCoordinatorMetrics metrics;
    private GroupCoordinatorShard shard;
    private CountingPlayback playback;
    private CoordinatorLoaderImpl<CoordinatorRecord> loader;
    private CoordinatorLoader.LoadSummary summary;

    @Setup(Level.Trial)
    public void openLog() throws IOException {
        String base = System.getProperty("rl.jmh.offsets");
        if (base == null) throw new IllegalStateException("-Drl.jmh.offsets=DIR (with DIR/" + log + "/*.log) is required");
        int dash = log.lastIndexOf('-');
        kafkaShape = switch (log.substring(0, Math.max(dash, 0))) {
            case "ringleader" -> false;
            case "kafka" -> true;
            default -> throw new IllegalArgumentException("log: ringleader-N or kafka-N, not " + log);
        };
        records = Long.parseLong(log.substring(dash + 1));
        Path source = Path.of(base, log);
        List<Path> segments = new ArrayList<>();
        try (Stream<Path> files = Files.list(source)) {
            files.filter(p -> p.getFileName().toString().endsWith(".log")).sorted().forEach(segments::add);
        }
        if (segments.isEmpty()) throw new IllegalStateException("no .log segments in " + source);

        // A copy, so the indexes and checkpoints Kafka writes on opening never touch the source.
        workDir = Files.createTempDirectory("kafka-jmh-offsets");
        Path partitionDir = Files.createDirectory(workDir.resolve(TP.topic() + "-" + TP.partition()));
        for (Path s : segments) Files.copy(s, partitionDir.resolve(s.getFileName()));

        logScheduler = new KafkaScheduler(1, true, "kafka-jmh-log-");
        logScheduler.startup();
        // __consumer_offsets is compacted; nothing here runs the cleaner.
        LogConfig logConfig = new LogConfig(Map.of("cleanup.policy", "compact"));
        unifiedLog = UnifiedLog.create(partitionDir.toFile(), logConfig, 0L, 0L, logScheduler, new BrokerTopicStats(),
            Time.SYSTEM, 60_000, new ProducerStateManagerConfig(86_400_000, false), 600_000,
            new LogDirFailureChannel(1), false, Optional.empty());
        if (unifiedLog.logEndOffset() != records) {
            throw new IllegalStateException("Kafka recovered " + unifiedLog.logEndOffset() + " of " + records + " records from " + source);
        }
        // A leader that has everything committed: the high watermark at the log end, as after a restart.
        unifiedLog.updateHighWatermark(unifiedLog.logEndOffset());
        config = GroupCoordinatorConfig.fromProps(Map.of());
    }

    @Setup(Level.Invocation)
    public void newShard() {
        LogContext logContext = new LogContext();
        SnapshotRegistry snapshotRegistry = new SnapshotRegistry(logContext);
        metrics = new GroupCoordinatorMetrics(new MetricsRegistry(), new Metrics());
        shard = new GroupCoordinatorShard.Builder(config, new GroupConfigManager(config, ShareGroupConfig.fromProps(Map.of())))
            .withAuthorizerPlugin(Optional.empty())
            .withLogContext(logContext)
            .withSnapshotRegistry(snapshotRegistry)
            .withTime(Time.SYSTEM)
            .withTimer(new NoTimer())
            .withExecutor(new NoExecutor())
            .withCoordinatorMetrics(metrics)
            .withTopicPartition(TP)
            .build();
        playback = new CountingPlayback(new SnapshottableCoordinator<>(logContext, snapshotRegistry, shard, TP));
        loader = new CoordinatorLoaderImpl<>(Time.SYSTEM, tp -> Optional.of(unifiedLog), tp -> Optional.of(unifiedLog.logEndOffset()),
            new GroupCoordinatorRecordSerde(), config.offsetsLoadBufferSize(), CoordinatorLoaderImpl.DEFAULT_COMMIT_INTERVAL_OFFSETS);
    }

    @Benchmark
    public CoordinatorLoader.LoadSummary load() throws Exception {
        summary = loader.load(TP, playback).get();
        return summary;
    }

    @TearDown(Level.Invocation)
    public void checkAndClose() throws Exception {
        loader.close();
        if (summary == null || summary.numRecords() != records || playback.replayed != records) {
            throw new IllegalStateException("loaded " + (summary == null ? 0 : summary.numRecords()) + " records, replayed "
                + playback.replayed + ", expected " + records);
        }
        checkOffsets();
        metrics.close();
        summary = null;
    }

    /**
     * The shard must hold what the records say. Ringleader's shape: record i commits offset i for group-(i % 1000),
     * partition i % 64 of "orders" (benches/src/lib.rs, offset_commits::commit_record), so the last record of each
     * (group, partition) holds its offset; one group's 64 partitions are checked. Kafka's shape: test-group holds
     * offset 0 for partition 0 of each topic-j; ten topics are checked.
     */
    private void checkOffsets() {
        String group = kafkaShape ? "test-group" : "group-7";
        List<OffsetFetchRequestData.OffsetFetchRequestTopics> topics = new ArrayList<>();
        if (kafkaShape) {
            for (int t = 0; t < 10; t++) {
                topics.add(new OffsetFetchRequestData.OffsetFetchRequestTopics().setName("topic-" + t).setPartitionIndexes(List.of(0)));
            }
        } else {
            List<Integer> partitions = new ArrayList<>();
            for (int p = 0; p < 64; p++) partitions.add(p);
            topics.add(new OffsetFetchRequestData.OffsetFetchRequestTopics().setName("orders").setPartitionIndexes(partitions));
        }
        OffsetFetchResponseData.OffsetFetchResponseGroup response = shard.fetchOffsets(
            new OffsetFetchRequestData.OffsetFetchRequestGroup().setGroupId(group).setTopics(topics), Long.MAX_VALUE);
        int checked = 0;
        for (OffsetFetchResponseData.OffsetFetchResponseTopics t : response.topics()) {
            for (OffsetFetchResponseData.OffsetFetchResponsePartitions p : t.partitions()) {
                long expected = kafkaShape ? 0 : -1;
                for (long i = records - 1; !kafkaShape && i >= 0 && i >= records - 64_000; i--) {
                    if (i % 1000 == 7 && i % 64 == p.partitionIndex()) {
                        expected = i;
                        break;
                    }
                }
                if (p.committedOffset() != expected) {
                    throw new IllegalStateException(group + " " + t.name() + "-" + p.partitionIndex() + " at "
                        + p.committedOffset() + ", expected " + expected);
                }
                checked++;
            }
        }
        if (checked != (kafkaShape ? 10 : 64)) throw new IllegalStateException("checked " + checked + " offsets of " + group);
    }

    @TearDown(Level.Trial)
    public void closeLog() throws Exception {
        unifiedLog.close();
        logScheduler.shutdown();
        try (Stream<Path> files = Files.walk(workDir)) {
            files.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        } catch (UncheckedIOException e) {
            // Leaving a temporary directory behind is not worth failing the run.
        }
    }

    /** Forwards to the coordinator and counts the records that reached it (the loader skips unknown types). */
    static final class CountingPlayback implements CoordinatorPlayback<CoordinatorRecord> {
        private final CoordinatorPlayback<CoordinatorRecord> inner;
        long replayed;

        CountingPlayback(CoordinatorPlayback<CoordinatorRecord> inner) {
            this.inner = inner;
        }

        @Override
        public void replay(long offset, long producerId, short producerEpoch, CoordinatorRecord record) {
            replayed++;
            inner.replay(offset, producerId, producerEpoch, record);
        }

        @Override
        public void replayEndTransactionMarker(long producerId, short producerEpoch, TransactionResult result) {
            inner.replayEndTransactionMarker(producerId, producerEpoch, result);
        }

        @Override
        public void updateLastWrittenOffset(long offset) {
            inner.updateLastWrittenOffset(offset);
        }

        @Override
        public void updateLastCommittedOffset(long offset) {
            inner.updateLastCommittedOffset(offset);
        }
    }

    /** Loading offset commits schedules no timeout; if one ever is, the run fails instead of dropping it. */
    static final class NoTimer implements CoordinatorTimer<CoordinatorRecord> {
        @Override
        public void schedule(String key, long delay, TimeUnit unit, boolean retry, TimeoutOperation<CoordinatorRecord> op) {
            throw new UnsupportedOperationException("timer " + key + " scheduled during the load");
        }

        @Override
        public void schedule(String key, long delay, TimeUnit unit, boolean retry, long retryBackoff, TimeoutOperation<CoordinatorRecord> op) {
            throw new UnsupportedOperationException("timer " + key + " scheduled during the load");
        }

        @Override
        public void scheduleIfAbsent(String key, long delay, TimeUnit unit, boolean retry, TimeoutOperation<CoordinatorRecord> op) {
            throw new UnsupportedOperationException("timer " + key + " scheduled during the load");
        }

        @Override
        public void cancel(String key) {
        }

        @Override
        public boolean isScheduled(String key) {
            return false;
        }
    }

    /** Likewise for background tasks. */
    static final class NoExecutor implements CoordinatorExecutor<CoordinatorRecord> {
        @Override
        public <R> boolean schedule(String key, TaskRunnable<R> task, TaskOperation<CoordinatorRecord, R> operation) {
            throw new UnsupportedOperationException("task " + key + " scheduled during the load");
        }

        @Override
        public boolean isScheduled(String key) {
            return false;
        }

        @Override
        public void cancel(String key) {
        }
    }
}

package dev.ringleader.kafkajmh;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordHelpers;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.OffsetAndMetadata;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * Writes {@link OffsetLoadBench}'s input with Kafka's own serde, into one segment file:
 * <ul>
 *   <li>{@code ringleader} shape, the fallback for a machine without the Rust toolchain: the same logical records as
 *   Ringleader's {@code offset_log} example (record i commits offset i for group-(i % 1000), partition i % 64 of
 *   "orders", commit time 1,700,000,000,000 + i, batches of 1,000);</li>
 *   <li>{@code kafka} shape, the records of Kafka's own GroupCoordinatorShardLoadingBenchmark (the source of its
 *   published loading rate), so that rate can be reproduced here: one group, "test-group", committing offset 0
 *   (leader epoch 0, commit time 0, a topic id) for partition 0 of topic-0 .. topic-2047, batches of 2,048 that each
 *   repeat those 2,048 keys.</li>
 * </ul>
 * {@code java ... dev.ringleader.kafkajmh.WriteOffsetLog DIR RECORDS [ringleader|kafka]}
 */
public final class WriteOffsetLog {
    public static void main(String[] args) throws IOException {
        if (args.length < 2 || args.length > 3) {
            System.err.println("usage: WriteOffsetLog DIR RECORDS [ringleader|kafka]");
            System.exit(2);
        }
        Path dir = Path.of(args[0]);
        long n = Long.parseLong(args[1]);
        boolean kafkaShape = switch (args.length == 3 ? args[2] : "ringleader") {
            case "ringleader" -> false;
            case "kafka" -> true;
            default -> throw new IllegalArgumentException("shape: ringleader or kafka, not " + args[2]);
        };
        int batchSize = kafkaShape ? 2048 : 1000;
        Uuid topicId = Uuid.randomUuid();
        if (n <= 0 || Files.exists(dir)) {
            System.err.println("RECORDS must be positive and DIR must not exist yet");
            System.exit(2);
        }
        Files.createDirectories(dir);
        GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
        try (FileChannel out = FileChannel.open(dir.resolve("00000000000000000000.log"), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            for (long base = 0; base < n; base += batchSize) {
                int count = (int) Math.min(batchSize, n - base);
                SimpleRecord[] batch = new SimpleRecord[count];
                for (int j = 0; j < count; j++) {
                    long i = base + j;
                    CoordinatorRecord r = kafkaShape
                        ? GroupCoordinatorRecordHelpers.newOffsetCommitRecord("test-group", "topic-" + j, 0,
                            new OffsetAndMetadata(0L, OptionalInt.of(0), "", 0L, OptionalLong.empty(), topicId))
                        : GroupCoordinatorRecordHelpers.newOffsetCommitRecord("group-" + (i % 1000), "orders", (int) (i % 64),
                            new OffsetAndMetadata(i, OptionalInt.empty(), "", 1_700_000_000_000L + i, OptionalLong.empty(), Uuid.ZERO_UUID));
                    batch[j] = new SimpleRecord(0L, serde.serializeKey(r), serde.serializeValue(r));
                }
                ByteBuffer bytes = MemoryRecords.withRecords(base, Compression.NONE, batch).buffer();
                while (bytes.hasRemaining()) out.write(bytes);
            }
        }
        System.out.println("WriteOffsetLog: " + n + " records (" + (kafkaShape ? "kafka" : "ringleader") + " shape) in " + dir);
    }
}

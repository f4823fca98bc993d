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
 * The fallback writer of {@link OffsetLoadBench}'s input, for a machine without the Rust toolchain: the same logical
 * records as Ringleader's {@code offset_log} example (record i commits offset i for group-(i % 1000), partition
 * i % 64 of "orders", commit time 1,700,000,000,000 + i, batches of 1,000), encoded by Kafka's own serde into one
 * segment file. {@code java ... dev.ringleader.kafkajmh.WriteOffsetLog DIR RECORDS}
 */
public final class WriteOffsetLog {
    public static void main(String[] args) throws IOException {
        if (args.length != 2) {
            System.err.println("usage: WriteOffsetLog DIR RECORDS");
            System.exit(2);
        }
        Path dir = Path.of(args[0]);
        long n = Long.parseLong(args[1]);
        if (n <= 0 || Files.exists(dir)) {
            System.err.println("RECORDS must be positive and DIR must not exist yet");
            System.exit(2);
        }
        Files.createDirectories(dir);
        GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
        try (FileChannel out = FileChannel.open(dir.resolve("00000000000000000000.log"), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            for (long base = 0; base < n; base += 1000) {
                int count = (int) Math.min(1000, n - base);
                SimpleRecord[] batch = new SimpleRecord[count];
                for (int j = 0; j < count; j++) {
                    long i = base + j;
                    CoordinatorRecord r = GroupCoordinatorRecordHelpers.newOffsetCommitRecord("group-" + (i % 1000), "orders", (int) (i % 64),
                        new OffsetAndMetadata(i, OptionalInt.empty(), "", 1_700_000_000_000L + i, OptionalLong.empty(), Uuid.ZERO_UUID));
                    batch[j] = new SimpleRecord(0L, serde.serializeKey(r), serde.serializeValue(r));
                }
                ByteBuffer bytes = MemoryRecords.withRecords(base, Compression.NONE, batch).buffer();
                while (bytes.hasRemaining()) out.write(bytes);
            }
        }
        System.out.println("WriteOffsetLog: " + n + " records in " + dir);
    }
}

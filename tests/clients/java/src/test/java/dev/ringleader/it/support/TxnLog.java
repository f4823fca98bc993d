package dev.ringleader.it.support;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Partitions of a broker's data directory as Kafka's own `kafka-dump-log` prints them, batch by batch and record by
 * record, each line split into its `name: value` fields (the parse the transaction differential compares). Kept
 * apart from normalisation: what must differ between two brokers is the caller's to name.
 *
 * One tool run covers every partition of a call (a JVM start is most of its cost).
 */
public final class TxnLog {
    private TxnLog() {}

    private static final Pattern FIELD = Pattern.compile("(\\w+): (\\S+)");

    /** One record line: its `name: value` fields, and the key and payload the decoder printed (null when none). */
    public record Rec(Map<String, String> fields, String key, String payload) {}

    /** One batch line and the record lines under it. */
    public record Batch(Map<String, String> header, List<Rec> records) {}

    /**
     * Every `.log` segment of each partition directory of `dataDir` whose name starts with one of `prefixes` (and
     * holds at least one byte), dumped with `flags` (e.g. `--transaction-log-decoder`): partition directory name →
     * its batches in offset order. Partitions with nothing written are left out.
     */
    public static Map<String, List<Batch>> dump(Path dataDir, List<String> prefixes, String... flags) {
        List<String> files = new ArrayList<>();
        try (Stream<Path> dirs = Files.list(dataDir)) {
            for (Path d : dirs.sorted().toList()) {
                String name = d.getFileName().toString();
                if (!Files.isDirectory(d) || prefixes.stream().noneMatch(p -> name.startsWith(p))) {
                    continue;
                }
                try (Stream<Path> s = Files.list(d)) {
                    for (Path f : s.filter(p -> p.getFileName().toString().endsWith(".log")).sorted().toList()) {
                        if (Files.size(f) > 0) {
                            files.add(f.toString());
                        }
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Map<String, List<Batch>> out = new TreeMap<>();
        if (files.isEmpty()) {
            return out;
        }
        List<String> args = new ArrayList<>(List.of(flags));
        args.add("--files");
        args.add(String.join(",", files));
        ReferenceKafka.ToolResult r = ReferenceKafka.tool("dump-log", args.toArray(String[]::new));
        if (r.exitCode() != 0 || r.stdout().contains("Exception") || r.stderr().contains("Exception")
                || r.stdout().contains("Failed to decode")) {
            throw new AssertionError("kafka-dump-log " + String.join(" ", flags) + " failed on " + files + ":\n"
                    + r.stdout() + r.stderr());
        }
        List<Batch> current = null;
        Batch batch = null;
        for (String line : r.stdout().split("\n")) {
            if (line.startsWith("Dumping ")) {
                String partition = Path.of(line.substring("Dumping ".length()).strip()).getParent().getFileName()
                        .toString();
                current = out.computeIfAbsent(partition, k -> new ArrayList<>());
                batch = null;
            } else if (line.startsWith("baseOffset: ")) {
                batch = new Batch(fields(line), new ArrayList<>());
                current.add(batch);
            } else if (line.startsWith("| offset: ")) {
                String head = line.substring(2);
                String key = null;
                String payload = null;
                int k = head.indexOf(" key: ");
                if (k >= 0) {
                    String rest = head.substring(k + " key: ".length());
                    head = head.substring(0, k);
                    int p = rest.indexOf(" payload: ");
                    if (p >= 0) {
                        key = rest.substring(0, p);
                        payload = rest.substring(p + " payload: ".length()).strip();
                    } else {
                        key = rest.strip();
                    }
                }
                batch.records().add(new Rec(fields(head), key, payload));
            }
        }
        return out;
    }

    private static Map<String, String> fields(String line) {
        Map<String, String> out = new LinkedHashMap<>();
        Matcher m = FIELD.matcher(line);
        while (m.find()) {
            out.put(m.group(1), m.group(2));
        }
        return out;
    }
}

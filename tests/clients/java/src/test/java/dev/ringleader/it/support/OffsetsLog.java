package dev.ringleader.it.support;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.node.TextNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A `__consumer_offsets` partition as Kafka's own `kafka-dump-log --offsets-decoder` prints it, record by record, with
 * what must differ between two brokers replaced by stable names: member ids (M1, M2, ... by first appearance), topic
 * ids (T1, ...), timestamps, the metadata hash (it hashes topic ids) and the per-JVM counter in a client id.
 */
public final class OffsetsLog {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern RECORD = Pattern.compile("^\\| offset: (\\d+) .* key: (\\{.*\\}) payload: (.*)$");

    /** One record: its offset, its normalised key and value (null for a tombstone). */
    public record Entry(long offset, String key, String value) {
        public String type() {
            try {
                return JSON.readTree(key).path("type").asText();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public String toString() {
            return offset + " " + key + " -> " + (value == null ? "<tombstone>" : value);
        }
    }

    private final Map<String, String> names = new HashMap<>();
    private final java.util.Set<String> dropped;

    private OffsetsLog(java.util.Set<String> dropped) {
        this.dropped = dropped;
    }

    /** Every `.log` segment of `partitionDir`, in offset order, dumped by Kafka's tool and normalised. */
    public static List<Entry> read(Path partitionDir) {
        return read(partitionDir, java.util.Set.of());
    }

    /** As {@link #read(Path)}, leaving out the value fields named in `dropped` (a known difference, named by the caller). */
    public static List<Entry> read(Path partitionDir, java.util.Set<String> dropped) {
        List<String> files;
        try (Stream<Path> s = Files.list(partitionDir)) {
            files = s.filter(p -> p.getFileName().toString().endsWith(".log")).sorted().map(Path::toString).toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (files.isEmpty()) {
            throw new AssertionError("no segment in " + partitionDir);
        }
        ReferenceKafka.ToolResult r = ReferenceKafka.tool("dump-log", "--offsets-decoder", "--files", String.join(",", files));
        if (r.exitCode() != 0 || r.stdout().contains("Exception") || r.stderr().contains("Exception")) {
            throw new AssertionError("kafka-dump-log failed on " + files + ":\n" + r.stdout() + r.stderr());
        }
        return new OffsetsLog(dropped).parse(r.stdout());
    }

    private List<Entry> parse(String dump) {
        List<Entry> out = new ArrayList<>();
        for (String line : dump.split("\n")) {
            Matcher m = RECORD.matcher(line);
            if (!m.matches()) {
                continue;
            }
            try {
                JsonNode key = normalise(JSON.readTree(m.group(2)));
                String payload = m.group(3).strip();
                String value = payload.equals("null") || payload.equals("<DELETE>") ? null
                        : normalise(JSON.readTree(payload)).toString();
                out.add(new Entry(Long.parseLong(m.group(1)), key.toString(), value));
            } catch (IOException e) {
                throw new AssertionError("kafka-dump-log printed a record that is not JSON: " + line, e);
            }
        }
        return out;
    }

    private JsonNode normalise(JsonNode node) {
        if (node.isObject()) {
            ObjectNode o = (ObjectNode) node;
            Iterator<Map.Entry<String, JsonNode>> it = o.fields();
            List<Map.Entry<String, JsonNode>> fields = new ArrayList<>();
            it.forEachRemaining(fields::add);
            for (Map.Entry<String, JsonNode> f : fields) {
                String k = f.getKey();
                JsonNode v = f.getValue();
                if (dropped.contains(k)) {
                    o.remove(k);
                } else if (v.isTextual() && (k.equals("memberId") || k.equals("leader"))) {
                    o.set(k, new TextNode(name("M", v.asText())));
                } else if (v.isTextual() && k.equals("topicId")) {
                    o.set(k, new TextNode(name("T", v.asText())));
                } else if (k.endsWith("Timestamp") || k.endsWith("TimestampMs")) {
                    o.set(k, new TextNode("<ts>"));
                } else if (k.equals("metadataHash") && v.asLong() != 0) {
                    o.set(k, new TextNode("<hash>"));
                } else if (k.equals("clientId") && v.isTextual()) {
                    o.set(k, new TextNode(v.asText().replaceAll("-\\d+$", "-N")));
                } else {
                    o.set(k, normalise(v));
                }
            }
            // A classic group's members are in hash order in Kafka's record (`ClassicGroup.members` is a HashMap
            // keyed by member id), and member ids differ between brokers: compare them by their normalised id.
            if (o.get("members") instanceof com.fasterxml.jackson.databind.node.ArrayNode members && members.size() > 1) {
                List<JsonNode> sorted = new ArrayList<>();
                members.forEach(sorted::add);
                sorted.sort(java.util.Comparator.comparing(m -> m.path("memberId").asText()));
                members.removeAll();
                sorted.forEach(members::add);
            }
        } else if (node.isArray()) {
            for (int i = 0; i < node.size(); i++) {
                ((com.fasterxml.jackson.databind.node.ArrayNode) node).set(i, normalise(node.get(i)));
            }
        }
        return node;
    }

    private String name(String prefix, String id) {
        if (id.isEmpty()) {
            return id;
        }
        return names.computeIfAbsent(prefix + id, k -> prefix + (names.keySet().stream().filter(n -> n.startsWith(prefix)).count() + 1));
    }
}

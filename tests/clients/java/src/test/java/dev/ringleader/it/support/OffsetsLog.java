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
 * ids (T1, ...), timestamps and the per-JVM counter in a client id. The metadata hash stays as written: it hashes topic
 * ids, so a caller compares it through {@link #metadataHash} of the log's own topic id.
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

    /** A partition's records, and the topic id each normalised name (`T1`, ...) stands for, in Kafka's base64 form. */
    public record Log(List<Entry> entries, Map<String, String> topicIds) {}

    /**
     * Every `.log` segment of `partitionDir`, in offset order, dumped by Kafka's tool and normalised, leaving out the
     * value fields named in `dropped` (a known difference, named by the caller).
     */
    public static Log read(Path partitionDir, java.util.Set<String> dropped) {
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
        OffsetsLog l = new OffsetsLog(dropped);
        List<Entry> entries = l.parse(r.stdout());
        Map<String, String> topicIds = new HashMap<>();
        l.names.forEach((raw, name) -> {
            if (raw.startsWith("T")) {
                topicIds.put(name, raw.substring(1));
            }
        });
        return new Log(entries, topicIds);
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

    /**
     * Kafka's consumer-group metadata hash of one subscribed topic with no racks (`Utils.computeTopicHash` and
     * `computeGroupHash`, KIP-1101): XXH3-64 over magic 0, the id's halves, the name, the partition count and each
     * partition index, then XXH3-64 over that hash.
     */
    public static long metadataHash(String base64TopicId, String topic, int partitions) {
        org.apache.kafka.common.Uuid id = org.apache.kafka.common.Uuid.fromString(base64TopicId);
        var h = com.dynatrace.hash4j.hashing.Hashing.xxh3_64().hashStream()
                .putByte((byte) 0)
                .putLong(id.getMostSignificantBits())
                .putLong(id.getLeastSignificantBits())
                .putString(topic)
                .putInt(partitions);
        for (int i = 0; i < partitions; i++) {
            h = h.putInt(i);
        }
        long topicHash = h.getAsLong();
        return com.dynatrace.hash4j.hashing.Hashing.xxh3_64().hashStream().putLong(topicHash).getAsLong();
    }

    private String name(String prefix, String id) {
        if (id.isEmpty()) {
            return id;
        }
        return names.computeIfAbsent(prefix + id, k -> prefix + (names.keySet().stream().filter(n -> n.startsWith(prefix)).count() + 1));
    }
}

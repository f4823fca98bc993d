package dev.ringleader.kafkajmh;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.TopicRecord;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.coordinator.common.runtime.CoordinatorMetadataImage;
import org.apache.kafka.coordinator.common.runtime.KRaftCoordinatorMetadataImage;
import org.apache.kafka.coordinator.group.modern.consumer.ResolvedRegularExpression;
import org.apache.kafka.coordinator.group.modern.consumer.TopicRegexResolver;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataProvenance;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * Kafka 4.4's resolution of a consumer group's regular expressions against the topics of a metadata image
 * ({@code TopicRegexResolver.resolveRegularExpressions}, what {@code GroupMetadataManager} runs off the request path
 * when a regex member joins or the image changes): one regex against 10,000 topics, no authorizer. Two shapes:
 * <ul>
 *   <li>{@code kafka}: Kafka's {@code RegexResolutionBenchmark} (jmh-benchmarks/.../coordinator/): topics
 *   {@code word_word_i} from 20 words, the regex {@code .*word.*} (here from a fixed seed, so runs compare);</li>
 *   <li>{@code ringleader}: the {@code coordinator_regex} criterion bench's topics {@code <prefix>-events-i} over ten
 *   prefixes and the regex {@code orders-events-[0-9]+}, matching 1,000 of them.</li>
 * </ul>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
public class RegexBench {

    private static final Logger LOG = LoggerFactory.getLogger(RegexBench.class);

    private static final List<String> WORDS = List.of(
        "data", "stream", "queue", "analytics", "service", "event", "log", "cloud", "process", "system",
        "message", "broker", "partition", "key", "value", "cluster", "zookeeper", "replication", "topic", "producer");

    private static final List<String> PREFIXES = List.of(
        "orders", "payments", "users", "audit", "clicks", "views", "carts", "stock", "mail", "logs");

    @Param({"kafka", "ringleader"})
    public String shape;

    @Param({"10000"})
    public int topicCount;

    private CoordinatorMetadataImage image;
    private Set<String> regexes;
    private TopicRegexResolver resolver;

    @Setup(Level.Trial)
    public void setup() {
        Random random = new Random(16);
        List<String> names = new ArrayList<>(topicCount);
        for (int i = 0; i < topicCount; i++) {
            names.add(switch (shape) {
                case "kafka" -> WORDS.get(random.nextInt(WORDS.size())) + "_" + WORDS.get(random.nextInt(WORDS.size())) + "_" + i;
                case "ringleader" -> PREFIXES.get(i % PREFIXES.size()) + "-events-" + i;
                default -> throw new IllegalArgumentException("shape: kafka or ringleader, not " + shape);
            });
        }
        MetadataDelta delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
        for (int i = 0; i < names.size(); i++) {
            delta.replay(new TopicRecord().setTopicId(new Uuid(0L, i + 1L)).setName(names.get(i)));
        }
        image = new KRaftCoordinatorMetadataImage(delta.apply(MetadataProvenance.EMPTY));
        regexes = Set.of(shape.equals("kafka") ? ".*" + WORDS.get(random.nextInt(WORDS.size())) + ".*" : "orders-events-[0-9]+");
        resolver = new TopicRegexResolver(Optional::empty, Time.SYSTEM);

        // The measured call must match what the regex says.
        String regex = regexes.iterator().next();
        long expected = names.stream().filter(n -> n.matches(regex)).count();
        int got = run().get(regex).topics().size();
        if (got != expected || got == 0) {
            throw new IllegalStateException(regex + " resolved to " + got + " topics, expected " + expected);
        }
    }

    @Benchmark
    public Map<String, ResolvedRegularExpression> run() {
        return resolver.resolveRegularExpressions(null, "my-group-id", LOG, image, regexes);
    }
}

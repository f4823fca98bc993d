package dev.ringleader.it.support;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Java client configuration shared by the tests: bounded timeouts, loopback only. */
public final class Clients {
    private Clients() {}

    public static final Duration CALL = Duration.ofSeconds(30);

    public static Admin admin(Broker b) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrap());
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "java-admin-" + b.kind());
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        return Admin.create(p);
    }

    public static Properties consumerProps(Broker b, String group, String protocol) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrap());
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 10000);
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 1000);
        }
        return p;
    }

    public static KafkaProducer<String, String> producer(Broker b, Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrap());
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    public static void createTopic(Admin admin, String name, int partitions) throws Exception {
        createTopic(admin, name, partitions, Map.of());
    }

    public static void createTopic(Admin admin, String name, int partitions, Map<String, String> configs)
            throws Exception {
        admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(configs))).all()
                .get(CALL.toSeconds(), java.util.concurrent.TimeUnit.SECONDS);
    }

    /** Produces `count` records keyed k0..k(n-1) (so both brokers see the same partitioning); returns their metadata. */
    public static List<RecordMetadata> produceKeyed(Broker b, String topic, int count) throws Exception {
        List<RecordMetadata> out = new ArrayList<>();
        try (KafkaProducer<String, String> p = producer(b, Map.of())) {
            List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, "k" + i, "v" + i)));
            }
            p.flush();
            for (var f : fs) {
                out.add(f.get(CALL.toSeconds(), java.util.concurrent.TimeUnit.SECONDS));
            }
        }
        return out;
    }

    /** Polls `condition` every 50 ms until it holds; fails naming `what` after `timeout`. */
    public static void waitUntil(Duration timeout, String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + timeout.toSeconds() + " s waiting for " + what);
            }
            RingleaderBroker.sleep(50);
        }
    }
}

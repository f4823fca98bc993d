package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.ringleader.it.support.Broker;
import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.ReferenceKafka;
import dev.ringleader.it.support.Repo;
import dev.ringleader.it.support.RingleaderBroker;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Produced;
import org.junit.jupiter.api.Test;

/**
 * Kafka Streams 4.4 with processing.guarantee=exactly_once_v2 on Ringleader: a word count (repartition by word, a
 * counting state store with its changelog, all created by Streams through CreateTopics) over lines produced in two
 * halves. Instance A processes the first half; instance B of the same application starts and A is closed, so B
 * takes over A's tasks (restoring the store from the changelog); B processes the second half. The output, read with
 * read_committed, holds for every word exactly the counts 1, 2, …, n in order (the record cache is off, so every
 * update is emitted): a duplicate or lost update across the handover shows as a repeated or missing count.
 *
 * Against the reference broker: `-Dtxn.broker=kafka`. Streams needs, besides transactions (FindCoordinator key type
 * 1, InitProducerId with a transactional.id, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn), CreateTopics
 * with configs for its internal topics, DeleteRecords (repartition purge) and read_committed Fetch / ListOffsets.
 */
class StreamsEosTest {
    static final String IN = "wc-lines";
    static final String OUT = "wc-counts";
    static final String APP = "wc-eos";

    @Test
    void wordCountExactlyOnceAcrossAnInstanceHandover() throws Exception {
        boolean kafka = System.getProperty("txn.broker", "ringleader").equals("kafka");
        try (Broker b = kafka ? ReferenceKafka.start("streams", "group.initial.rebalance.delay.ms=0")
                : RingleaderBroker.start("streams", "group.initial.rebalance.delay.ms=0")) {
            try (Admin a = Clients.admin(b)) {
                Clients.createTopic(a, IN, 3);
                Clients.createTopic(a, OUT, 3);
            }
            List<String> lines = new ArrayList<>();
            String[] words = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"};
            for (int i = 0; i < 120; i++) {
                lines.add(words[i % 7] + " " + words[(i * 3) % 7] + " " + words[(i * 5 + 1) % 7]);
            }
            Map<String, Long> expected = new TreeMap<>();
            for (String l : lines) {
                for (String w : l.split(" ")) {
                    expected.merge(w, 1L, Long::sum);
                }
            }
            Map<String, Long> firstHalf = new TreeMap<>();
            for (String l : lines.subList(0, 60)) {
                for (String w : l.split(" ")) {
                    firstHalf.merge(w, 1L, Long::sum);
                }
            }

            KafkaStreams a = start(b, "a");
            try {
                produce(b, lines.subList(0, 60));
                waitForCounts(b, firstHalf, "instance A: the first half counted");
                KafkaStreams bInstance = start(b, "b");
                try {
                    a.close(Duration.ofSeconds(30));
                    produce(b, lines.subList(60, 120));
                    Map<String, List<Long>> seen = waitForCounts(b, expected, "instance B: the second half counted");
                    for (var e : expected.entrySet()) {
                        List<Long> want = new ArrayList<>();
                        for (long n = 1; n <= e.getValue(); n++) {
                            want.add(n);
                        }
                        assertEquals(want, seen.get(e.getKey()), "every count of " + e.getKey() + " exactly once, in order");
                    }
                } finally {
                    bInstance.close(Duration.ofSeconds(30));
                }
            } finally {
                a.close(Duration.ofSeconds(30));
            }
        }
    }

    static KafkaStreams start(Broker b, String name) {
        StreamsBuilder sb = new StreamsBuilder();
        sb.<String, String>stream(IN)
                .flatMapValues(v -> Arrays.asList(v.split(" ")))
                .groupBy((k, w) -> w)
                .count()
                .toStream()
                .to(OUT, Produced.with(Serdes.String(), Serdes.Long()));
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, APP);
        p.put(StreamsConfig.CLIENT_ID_CONFIG, APP + "-" + name);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrap());
        // `-Dstreams.guarantee=at_least_once` runs the same without transactions: a way to tell a missing
        // transaction feature from anything else Streams needs (not the test's claim: only exactly_once_v2 is).
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, System.getProperty("streams.guarantee", StreamsConfig.EXACTLY_ONCE_V2));
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.STATE_DIR_CONFIG, Repo.scratch("streams-state-" + name).toString());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10_000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1_000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        KafkaStreams s = new KafkaStreams(sb.build(), p);
        s.start();
        Clients.waitUntil(Duration.ofSeconds(60), "streams instance " + name + " RUNNING (is " + s.state() + ")",
                () -> s.state() == KafkaStreams.State.RUNNING);
        return s;
    }

    static void produce(Broker b, List<String> lines) throws Exception {
        try (KafkaProducer<String, String> p = Clients.producer(b, Map.of())) {
            for (int i = 0; i < lines.size(); i++) {
                p.send(new ProducerRecord<>(IN, "line-" + i, lines.get(i)));
            }
            p.flush();
        }
    }

    /** Reads the whole output with read_committed until the last count of every word is `want`; every count in order. */
    static Map<String, List<Long>> waitForCounts(Broker b, Map<String, Long> want, String what) {
        Properties p = Clients.consumerProps(b, "unused", "classic");
        p.remove(ConsumerConfig.GROUP_ID_CONFIG);
        p.remove(ConsumerConfig.GROUP_PROTOCOL_CONFIG);
        p.remove(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG);
        p.remove(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
        Map<String, List<Long>> seen = new TreeMap<>();
        try (KafkaConsumer<String, Long> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = List.of(new TopicPartition(OUT, 0), new TopicPartition(OUT, 1), new TopicPartition(OUT, 2));
            c.assign(tps);
            c.seekToBeginning(tps);
            Clients.waitUntil(Duration.ofSeconds(60), what + ": last counts " + want, () -> {
                for (ConsumerRecord<String, Long> r : c.poll(Duration.ofMillis(200))) {
                    seen.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
                }
                Map<String, Long> last = new HashMap<>();
                seen.forEach((k, v) -> last.put(k, v.get(v.size() - 1)));
                return last.equals(want);
            });
        }
        return seen;
    }
}

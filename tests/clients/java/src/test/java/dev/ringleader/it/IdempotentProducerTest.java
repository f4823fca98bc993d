package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.RingleaderBroker;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

/**
 * The Java producer with its defaults (`enable.idempotence=true`, `acks=all`, retries) sending without pause while
 * the broker restarts twice, once cleanly (SIGTERM) and once killed (SIGKILL): every acknowledged record is in the log
 * exactly once, in send order per partition, and nothing is in the log twice — the retries of batches that reached
 * the disk before the restart are recognised by their producer id and sequence.
 */
class IdempotentProducerTest {
    @Test
    void noDuplicatesAcrossRestarts() throws Exception {
        String topic = "idem";
        try (RingleaderBroker b = RingleaderBroker.start("idempotent")) {
            try (Admin a = Clients.admin(b)) {
                Clients.createTopic(a, topic, 3);
            }
            Map<Integer, List<Integer>> acked = new ConcurrentHashMap<>();
            AtomicInteger sent = new AtomicInteger();
            List<Exception> failures = Collections.synchronizedList(new ArrayList<>());
            AtomicBoolean running = new AtomicBoolean(true);
            Thread sender = new Thread(() -> {
                Map<String, Object> extra = new HashMap<>();
                extra.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
                extra.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120_000);
                extra.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 5_000);
                extra.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 100);
                extra.put(ProducerConfig.LINGER_MS_CONFIG, 5);
                try (KafkaProducer<String, String> p = Clients.producer(b, extra)) {
                    while (running.get()) {
                        int n = sent.getAndIncrement();
                        p.send(new ProducerRecord<>(topic, "k" + (n % 7), Integer.toString(n)), (md, e) -> {
                            if (e != null) {
                                failures.add(e);
                            } else {
                                acked.computeIfAbsent(md.partition(), k -> Collections.synchronizedList(new ArrayList<>())).add(n);
                            }
                        });
                        if (n % 50 == 0) {
                            Thread.sleep(5);
                        }
                    }
                    p.flush();
                } catch (Exception e) {
                    failures.add(e);
                }
            }, "idempotent-sender");
            sender.start();
            Clients.waitUntil(Duration.ofSeconds(60), "some records acknowledged", () -> total(acked) > 2000);
            b.restart();
            Clients.waitUntil(Duration.ofSeconds(120), "records acknowledged after the clean restart",
                    () -> total(acked) > 6000);
            b.crashAndRestart();
            int before = total(acked);
            Clients.waitUntil(Duration.ofSeconds(120), "records acknowledged after the crash",
                    () -> total(acked) > before + 4000);
            running.set(false);
            sender.join(150_000);
            assertTrue(failures.isEmpty(), "send failures: " + failures.subList(0, Math.min(5, failures.size())));

            // Read everything back and compare with what was acknowledged.
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrap());
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            Map<Integer, List<Integer>> logged = new HashMap<>();
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1),
                        new TopicPartition(topic, 2));
                c.assign(tps);
                c.seekToBeginning(tps);
                Map<TopicPartition, Long> ends = c.endOffsets(tps);
                Clients.waitUntil(Duration.ofSeconds(60), "reading the log to its end", () -> {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        logged.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(Integer.parseInt(r.value()));
                    }
                    return tps.stream().allMatch(tp -> c.position(tp) >= ends.get(tp));
                });
            }
            int dupes = 0;
            for (var e : logged.entrySet()) {
                Set<Integer> seen = new TreeSet<>();
                for (int v : e.getValue()) {
                    if (!seen.add(v)) {
                        dupes++;
                    }
                }
            }
            assertEquals(0, dupes, "records in the log twice");
            for (int part = 0; part < 3; part++) {
                List<Integer> ack = new ArrayList<>(acked.getOrDefault(part, List.of()));
                List<Integer> log = logged.getOrDefault(part, List.of());
                assertEquals(ack, log, "partition " + part + ": the log is exactly the acknowledged records, in order");
            }
            assertTrue(total(acked) > 10_000, "acknowledged " + total(acked));
        }
    }

    private static int total(Map<Integer, List<Integer>> m) {
        return m.values().stream().mapToInt(List::size).sum();
    }
}

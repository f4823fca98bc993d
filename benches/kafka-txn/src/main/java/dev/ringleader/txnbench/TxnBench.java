package dev.ringleader.txnbench;

import java.io.FileWriter;
import java.io.IOException;
import java.io.Writer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Transactions per second with the Java client: N producer threads, each with its own transactional.id, loop
 * beginTransaction, R sends of small values to a topic of 16 partitions, sendOffsetsToTransaction (one partition
 * of an input topic, for a group of its own: {@code new ConsumerGroupMetadata(group)}), commitTransaction.
 * Counts the transactions completed inside a measured window after a warm-up and records each whole
 * transaction's time (begin to commit returned), p50/p99/max over the window. The producer config is the client's
 * default apart from the transactional.id (so acks=all, idempotence, linger.ms=5, retry.backoff.ms=100;
 * commitTransaction flushes) unless --producer-config overrides some.
 *
 * <pre>
 * TxnBench --bootstrap HOST:PORT --producers N [--warmup-secs 5] [--secs 15] [--records 10] [--value-bytes 100]
 *          [--partitions 16] [--run-id ID] [--label L] [--json FILE] [--producer-config k=v,k=v]
 * </pre>
 *
 * Prints one line and writes JSON: txns_per_s, latency ms, the broker's finalized transaction.version (which
 * decides whether the client speaks transactions v1 or v2), and what went wrong: failed transactions (aborted
 * and retried), fenced producers, and the producers' own record retry/error counts.
 */
public final class TxnBench {
    private TxnBench() {}

    static final class Worker implements Runnable {
        final int id;
        final KafkaProducer<byte[], byte[]> producer;
        final String group;
        final TopicPartition input;
        final String topic;
        final int records;
        final byte[] value;
        long[] lat = new long[1 << 14]; // microseconds, transactions completed in the window
        int n;
        long failed;
        String fatal;
        final List<String> errors = new ArrayList<>();

        Worker(int id, KafkaProducer<byte[], byte[]> producer, String group, TopicPartition input, String topic,
               int records, byte[] value) {
            this.id = id;
            this.producer = producer;
            this.group = group;
            this.input = input;
            this.topic = topic;
            this.records = records;
            this.value = value;
        }

        static volatile long measureFrom;
        static volatile long measureTo;
        static CountDownLatch go;

        @Override
        public void run() {
            try {
                go.await();
            } catch (InterruptedException e) {
                return;
            }
            ConsumerGroupMetadata meta = new ConsumerGroupMetadata(group);
            long offset = 0;
            byte[] key = ("p" + id).getBytes();
            while (true) {
                long t0 = System.nanoTime();
                if (t0 >= measureTo) {
                    break;
                }
                try {
                    producer.beginTransaction();
                    for (int i = 0; i < records; i++) {
                        // Keyless records spread over the partitions (the sticky partitioner moves per batch); the
                        // key-less send is what a consume-transform-produce loop with no keys does.
                        producer.send(new ProducerRecord<>(topic, null, value));
                    }
                    offset++;
                    producer.sendOffsetsToTransaction(Map.of(input, new OffsetAndMetadata(offset)), meta);
                    producer.commitTransaction();
                } catch (org.apache.kafka.common.errors.ProducerFencedException
                         | org.apache.kafka.common.errors.OutOfOrderSequenceException
                         | org.apache.kafka.common.errors.AuthorizationException e) {
                    fatal = e.toString();
                    note(e);
                    break;
                } catch (RuntimeException e) {
                    failed++;
                    note(e);
                    try {
                        producer.abortTransaction();
                    } catch (RuntimeException e2) {
                        fatal = "abort failed: " + e2;
                        note(e2);
                        break;
                    }
                    continue;
                }
                long t1 = System.nanoTime();
                if (t1 >= measureFrom && t1 < measureTo) {
                    if (n == lat.length) {
                        lat = Arrays.copyOf(lat, n * 2);
                    }
                    lat[n++] = (t1 - t0) / 1000;
                }
            }
        }

        private void note(Exception e) {
            if (errors.size() < 5) {
                errors.add(e.toString());
            }
            System.err.println("producer " + id + ": " + e);
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opt = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("usage: --name value ... (got " + args[i] + ")");
            }
            opt.put(args[i].substring(2), args[i + 1]);
        }
        String bootstrap = req(opt, "bootstrap");
        int producers = Integer.parseInt(req(opt, "producers"));
        double warmup = Double.parseDouble(opt.getOrDefault("warmup-secs", "5"));
        double secs = Double.parseDouble(opt.getOrDefault("secs", "15"));
        int records = Integer.parseInt(opt.getOrDefault("records", "10"));
        int valueBytes = Integer.parseInt(opt.getOrDefault("value-bytes", "100"));
        int partitions = Integer.parseInt(opt.getOrDefault("partitions", "16"));
        String runId = opt.getOrDefault("run-id", Long.toString(System.currentTimeMillis() % 1_000_000));
        String label = opt.getOrDefault("label", bootstrap);
        String outTopic = opt.getOrDefault("topic", "txn-bench-out");
        String inTopic = opt.getOrDefault("input-topic", "txn-bench-in");
        List<String> producerSets = opt.containsKey("producer-config")
                ? List.of(opt.get("producer-config").split(",")) : List.of();

        // Topics (both with `partitions` partitions), idempotently, and the broker's transaction.version.
        short tv;
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            for (String t : List.of(outTopic, inTopic)) {
                try {
                    admin.createTopics(List.of(new NewTopic(t, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof TopicExistsException)) {
                        throw e;
                    }
                }
            }
            FeatureMetadata fm = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS);
            FinalizedVersionRange r = fm.finalizedFeatures().get("transaction.version");
            tv = r == null ? 0 : r.maxVersionLevel();
        }

        byte[] value = new byte[valueBytes];
        Arrays.fill(value, (byte) 'x');
        List<Worker> workers = new ArrayList<>();
        long initStart = System.nanoTime();
        for (int i = 0; i < producers; i++) {
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "txn-bench-" + runId + "-" + i);
            p.put(ProducerConfig.CLIENT_ID_CONFIG, "txn-bench-" + i);
            for (String kv : producerSets) {
                p.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
            }
            KafkaProducer<byte[], byte[]> prod =
                    new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
            prod.initTransactions();
            workers.add(new Worker(i, prod, "txn-bench-" + runId + "-g" + i, new TopicPartition(inTopic, i % partitions),
                    outTopic, records, value));
        }
        double initMs = (System.nanoTime() - initStart) / 1e6;

        Worker.go = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (Worker w : workers) {
            Thread t = new Thread(w, "txn-producer-" + w.id);
            t.start();
            threads.add(t);
        }
        long start = System.nanoTime();
        Worker.measureFrom = start + (long) (warmup * 1e9);
        Worker.measureTo = Worker.measureFrom + (long) (secs * 1e9);
        Worker.go.countDown();
        for (Thread t : threads) {
            t.join();
        }

        // Whatever the producers retried or failed internally, from their own metrics.
        double retries = 0, recordErrors = 0;
        long failed = 0;
        int fenced = 0;
        List<String> errors = new ArrayList<>();
        long total = 0;
        for (Worker w : workers) {
            for (Map.Entry<MetricName, ? extends Metric> m : w.producer.metrics().entrySet()) {
                if (!m.getKey().group().equals("producer-metrics")) {
                    continue;
                }
                Object v = m.getValue().metricValue();
                if (!(v instanceof Double)) {
                    continue;
                }
                if (m.getKey().name().equals("record-retry-total")) {
                    retries += (Double) v;
                } else if (m.getKey().name().equals("record-error-total")) {
                    recordErrors += (Double) v;
                }
            }
            failed += w.failed;
            if (w.fatal != null) {
                fenced++;
            }
            for (String e : w.errors) {
                if (errors.size() < 10) {
                    errors.add("producer " + w.id + ": " + e);
                }
            }
            total += w.n;
        }
        for (Worker w : workers) {
            w.producer.close(java.time.Duration.ofSeconds(10));
        }
        long[] all = new long[(int) total];
        int k = 0;
        for (Worker w : workers) {
            System.arraycopy(w.lat, 0, all, k, w.n);
            k += w.n;
        }
        Arrays.sort(all);
        double tps = total / secs;
        double p50 = pct(all, 0.50), p99 = pct(all, 0.99), p999 = pct(all, 0.999);
        double max = all.length == 0 ? Double.NaN : all[all.length - 1] / 1000.0;
        System.out.printf(Locale.ROOT,
                "%s: %d producers, transaction.version %d: %d txns in %.1f s = %.1f txns/s; txn p50 %.3f ms, "
                        + "p99 %.3f ms, p99.9 %.3f ms, max %.3f ms; failed txns %d, fatal producers %d, "
                        + "record retries %.0f, record errors %.0f; initTransactions for all %.0f ms%n",
                label, producers, tv, total, secs, tps, p50, p99, p999, max, failed, fenced, retries, recordErrors,
                initMs);
        String json = opt.get("json");
        if (json != null) {
            try (Writer out = new FileWriter(json)) {
                out.write(String.format(Locale.ROOT,
                        "{\"label\": %s, \"bootstrap\": %s, \"producers\": %d, \"transaction_version\": %d, "
                                + "\"producer_config\": %s, \"records_per_txn\": %d, \"value_bytes\": %d, \"partitions\": %d, "
                                + "\"warmup_s\": %s, \"secs\": %s, \"txns\": %d, \"txns_per_s\": %.2f, "
                                + "\"p50_ms\": %.4f, \"p99_ms\": %.4f, \"p999_ms\": %.4f, \"max_ms\": %.4f, "
                                + "\"failed_txns\": %d, \"fatal_producers\": %d, \"record_retries\": %.0f, "
                                + "\"record_errors\": %.0f, \"init_ms\": %.1f, \"errors\": [%s]}%n",
                        q(label), q(bootstrap), producers, tv, q(String.join(",", producerSets)), records, valueBytes, partitions, warmup, secs, total,
                        tps, p50, p99, p999, max, failed, fenced, retries, recordErrors, initMs,
                        String.join(", ", errors.stream().map(TxnBench::q).toList())));
            }
        }
        System.exit(fenced > 0 || total == 0 ? 1 : 0);
    }

    private static double pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        int i = (int) Math.ceil(p * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))] / 1000.0;
    }

    private static String q(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    private static String req(Map<String, String> opt, String k) {
        String v = opt.get(k);
        if (v == null) {
            throw new IllegalArgumentException("--" + k + " is required");
        }
        return v;
    }
}

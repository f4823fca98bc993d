package dev.ringleader.it.support;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The reference broker, Apache Kafka 4.4.0, started and stopped through scripts/kafka-ref.sh (so tests run it exactly
 * as a developer does). Starting one takes several seconds, so tests share {@link #shared()} where the group ids they
 * use keep them apart, and start one of their own where they read its `__consumer_offsets` log.
 */
public final class ReferenceKafka implements Broker {
    private static ReferenceKafka shared;

    private final Path dir;
    private final String bootstrap;
    private final java.util.Map<String, String> listeners = new java.util.HashMap<>();

    private ReferenceKafka(Path dir, String bootstrap) {
        this.dir = dir;
        this.bootstrap = bootstrap;
    }

    /** One broker with `group.initial.rebalance.delay.ms=0` for the whole test run, stopped when the JVM exits. */
    public static synchronized ReferenceKafka shared() {
        if (shared == null) {
            shared = start("shared", "group.initial.rebalance.delay.ms=0");
            ReferenceKafka s = shared;
            Runtime.getRuntime().addShutdownHook(new Thread(s::close));
        }
        return shared;
    }

    public static ReferenceKafka start(String name, String... sets) {
        return start(name, List.of(), sets);
    }

    /**
     * A broker whose storage is formatted with each `name=level` of `features` (`kafka-storage format --feature`),
     * so the cluster starts at those finalized levels (e.g. `transaction.version=1`) instead of the release's
     * defaults, with each `key=value` of `sets` in its server.properties.
     */
    public static ReferenceKafka start(String name, List<String> features, String... sets) {
        return start(name, features, List.of(), sets);
    }

    /**
     * As {@link #start(String, List, String...)}, with an extra listener for each name of `listeners` (named as its
     * security protocol, e.g. SASL_SSL) on a free port: `kafka-ref.sh start --listener NAME:NAME`.
     */
    public static ReferenceKafka start(String name, List<String> features, List<String> listeners, String... sets) {
        Path dir = Repo.scratch("kafka-" + name);
        List<String> argv = new ArrayList<>(List.of(Repo.kafkaRefScript().toString(), "start", "--dir", dir.toString()));
        for (String l : listeners) {
            argv.add("--listener");
            argv.add(l + ":" + l);
        }
        for (String kv : sets) {
            argv.add("--set");
            argv.add(kv);
        }
        for (String f : features) {
            argv.add("--feature");
            argv.add(f);
        }
        String out = run(argv, 240);
        String[] lines = out.strip().split("\n");
        String bootstrap = lines[lines.length - 1].strip();
        if (!bootstrap.startsWith("127.0.0.1:")) {
            throw new IllegalStateException("kafka-ref.sh start printed no address:\n" + out);
        }
        ReferenceKafka k = new ReferenceKafka(dir, bootstrap);
        if (!listeners.isEmpty()) {
            try {
                for (String line : java.nio.file.Files.readAllLines(dir.resolve("listeners"))) {
                    int eq = line.indexOf('=');
                    k.listeners.put(line.substring(0, eq), line.substring(eq + 1));
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return k;
    }

    @Override
    public String listener(String name) {
        String a = listeners.get(name);
        if (a == null) {
            return Broker.super.listener(name);
        }
        return a;
    }

    /** Runs `scripts/kafka-ref.sh tool NAME args...` and returns its stdout (stderr is appended on failure). */
    public static ToolResult tool(String name, String... args) {
        List<String> argv = new ArrayList<>(List.of(Repo.kafkaRefScript().toString(), "tool", name));
        argv.addAll(List.of(args));
        return ToolResult.run(argv, 120);
    }

    private static String run(List<String> argv, int timeoutS) {
        ToolResult r = ToolResult.run(argv, timeoutS);
        if (r.exitCode() != 0) {
            throw new IllegalStateException(String.join(" ", argv) + " exited with " + r.exitCode() + ":\n"
                    + r.stdout() + r.stderr());
        }
        return r.stdout();
    }

    @Override
    public String bootstrap() {
        return bootstrap;
    }

    @Override
    public String kind() {
        return "kafka";
    }

    @Override
    public Path logDir() {
        return dir.resolve("data");
    }

    /**
     * SIGKILL the broker (no shutdown) and start it again on the same data directory and port
     * (`kafka-ref.sh start --keep-data`): how a test proves against Kafka what it does to Ringleader with
     * {@link RingleaderBroker#crashAndRestart()}.
     */
    public synchronized void crashAndRestart() {
        try {
            long pid = Long.parseLong(java.nio.file.Files.readString(dir.resolve("pid")).strip());
            ProcessHandle.of(pid).ifPresent(h -> {
                h.destroyForcibly();
                h.onExit().orTimeout(30, TimeUnit.SECONDS).join();
            });
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        String out = run(List.of(Repo.kafkaRefScript().toString(), "start", "--dir", dir.toString(), "--keep-data"), 240);
        if (!out.strip().endsWith(bootstrap)) {
            throw new IllegalStateException("the reference broker came back on another address:\n" + out);
        }
    }

    @Override
    public synchronized void close() {
        run(List.of(Repo.kafkaRefScript().toString(), "stop", "--dir", dir.toString()), 60);
    }

    @Override
    public String toString() {
        return "kafka@" + bootstrap;
    }

    /** The outcome of one external command. */
    public record ToolResult(int exitCode, String stdout, String stderr) {
        static ToolResult run(List<String> argv, int timeoutS) {
            try {
                Process p = new ProcessBuilder(argv).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                        .start();
                // Drain both streams concurrently so neither fills its pipe and stalls the child.
                var out = java.util.concurrent.CompletableFuture.supplyAsync(() -> readAll(p.getInputStream()));
                var err = java.util.concurrent.CompletableFuture.supplyAsync(() -> readAll(p.getErrorStream()));
                if (!p.waitFor(timeoutS, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                    throw new IllegalStateException(String.join(" ", argv) + " did not finish within " + timeoutS + " s");
                }
                return new ToolResult(p.exitValue(), out.join(), err.join());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }

        private static String readAll(java.io.InputStream in) {
            try (in) {
                return new String(in.readAllBytes(), StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }
}

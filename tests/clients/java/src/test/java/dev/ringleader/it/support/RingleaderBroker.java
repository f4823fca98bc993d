package dev.ringleader.it.support;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** One `ringleader serve` process on a free loopback port with a data directory of its own; restartable. */
public final class RingleaderBroker implements Broker {
    private final Path dir;
    private final Path dataDir;
    private final Path log;
    private final int port;
    private final List<String> sets;
    /** Extra listeners (named as their security protocol) and their ports, kept across restarts. */
    private final java.util.LinkedHashMap<String, Integer> listeners = new java.util.LinkedHashMap<>();
    private Process process;

    private RingleaderBroker(String name, List<String> sets) {
        this.dir = Repo.scratch("ringleader-" + name);
        this.dataDir = dir.resolve("data");
        this.log = dir.resolve("ringleader.log");
        this.port = Repo.freePort();
        this.sets = List.copyOf(sets);
    }

    /**
     * A broker with an extra listener for each name of `listeners` (SSL, SASL_SSL, SASL_PLAINTEXT: each its own
     * security protocol under Kafka's default listener.security.protocol.map) on a free port, next to PLAINTEXT
     * on {@link #bootstrap()}.
     */
    public static RingleaderBroker startWithListeners(String name, List<String> listeners, String... sets) {
        RingleaderBroker b = new RingleaderBroker(name, List.of(sets));
        for (String l : listeners) {
            int p = Repo.freePort();
            while (p == b.port || b.listeners.containsValue(p)) {
                p = Repo.freePort();
            }
            b.listeners.put(l, p);
        }
        b.launch();
        return b;
    }

    @Override
    public String listener(String name) {
        Integer p = listeners.get(name);
        if (p == null) {
            return Broker.super.listener(name);
        }
        return "127.0.0.1:" + p;
    }

    /** Starts a broker; each `key=value` is passed as `--set key=value`. */
    public static RingleaderBroker start(String name, String... sets) {
        RingleaderBroker b = new RingleaderBroker(name, List.of(sets));
        b.launch();
        return b;
    }

    private void launch() {
        List<String> argv = new ArrayList<>(List.of(Repo.binary().toString(), "serve",
                "--listen", "127.0.0.1:" + port, "--data-dir", dataDir.toString()));
        if (!listeners.isEmpty()) {
            // --listen replaces the PLAINTEXT listener's address; the others come from `listeners`.
            StringBuilder ls = new StringBuilder("listeners=PLAINTEXT://127.0.0.1:" + port);
            listeners.forEach((n, p) -> ls.append(',').append(n).append("://127.0.0.1:").append(p));
            argv.add("--set");
            argv.add(ls.toString());
        }
        for (String kv : sets) {
            argv.add("--set");
            argv.add(kv);
        }
        long offset;
        try {
            Files.createDirectories(dataDir);
            Files.writeString(log, "===== " + String.join(" ", argv) + "\n", StandardCharsets.UTF_8,
                    java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.APPEND);
            offset = Files.size(log);
            ProcessBuilder pb = new ProcessBuilder(argv)
                    .redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
            pb.environment().put("NO_COLOR", "1");
            process = pb.start();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        String needle = "listening on 127.0.0.1:" + port;
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (true) {
            if (logSince(offset).contains(needle)) {
                return;
            }
            if (!process.isAlive()) {
                throw new IllegalStateException("ringleader exited with " + process.exitValue()
                        + " before listening; log " + log + ":\n" + tail());
            }
            if (System.nanoTime() > deadline) {
                process.destroyForcibly();
                throw new IllegalStateException("ringleader did not listen within 30 s; log " + log + ":\n" + tail());
            }
            sleep(50);
        }
    }

    private String logSince(long offset) {
        try {
            byte[] all = Files.readAllBytes(log);
            return new String(all, (int) Math.min(offset, all.length), (int) Math.max(0, all.length - offset),
                    StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "";
        }
    }

    public String tail() {
        String all = logSince(0);
        return all.length() > 6000 ? all.substring(all.length() - 6000) : all;
    }

    @Override
    public String bootstrap() {
        return "127.0.0.1:" + port;
    }

    @Override
    public String kind() {
        return "ringleader";
    }

    @Override
    public Path logDir() {
        return dataDir;
    }

    public Path logFile() {
        return log;
    }

    /** SIGTERM and wait; returns the exit code. */
    public int stop() {
        if (process == null) {
            return 0;
        }
        process.destroy();
        try {
            if (!process.waitFor(20, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                throw new IllegalStateException("ringleader did not stop within 20 s of SIGTERM:\n" + tail());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
        int rc = process.exitValue();
        process = null;
        return rc;
    }

    /** SIGKILL (no shutdown at all) and a start on the same port and data directory. */
    public void crashAndRestart() {
        kill();
        launch();
    }

    /** SIGKILL (no shutdown at all) and wait for the process to be gone. */
    public void kill() {
        if (process != null) {
            process.destroyForcibly();
            try {
                process.waitFor(20, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
            process = null;
        }
    }

    /** Starts a broker stopped by {@link #kill()} again, on the same port and data directory. */
    public void startAgain() {
        if (process != null && process.isAlive()) {
            throw new IllegalStateException(this + " is still running");
        }
        launch();
    }

    public boolean alive() {
        return process != null && process.isAlive();
    }

    /** A clean stop (exit code 0 is required) and a start on the same port and data directory. */
    public void restart() {
        int rc = stop();
        if (rc != 0) {
            throw new IllegalStateException("ringleader exited with " + rc + " on SIGTERM:\n" + tail());
        }
        launch();
    }

    @Override
    public void close() {
        if (process != null && process.isAlive()) {
            stop();
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    @Override
    public String toString() {
        return "ringleader@" + bootstrap();
    }
}

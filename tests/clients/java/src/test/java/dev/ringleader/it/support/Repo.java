package dev.ringleader.it.support;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;

/** Where things are: the repository, the ringleader binary, scratch directories for this run. */
public final class Repo {
    private Repo() {}

    private static final AtomicInteger SCRATCH = new AtomicInteger();

    public static Path root() {
        String p = System.getProperty("ringleader.repo");
        if (p == null) {
            p = System.getenv().getOrDefault("RINGLEADER_REPO", "../../..");
        }
        return Path.of(p).toAbsolutePath().normalize();
    }

    public static Path binary() {
        String env = System.getenv("RINGLEADER_BIN");
        Path bin = env != null ? Path.of(env) : root().resolve("target/release/ringleader");
        if (!Files.isExecutable(bin)) {
            throw new IllegalStateException("ringleader binary not found at " + bin
                    + " (cargo build --release, or set RINGLEADER_BIN)");
        }
        return bin;
    }

    public static Path kafkaRefScript() {
        return root().resolve("scripts/kafka-ref.sh");
    }

    /** A fresh directory under target/java-tests/ (kept after the run, for the logs). */
    public static Path scratch(String name) {
        Path dir = root().resolve("target/java-tests")
                .resolve(ProcessHandle.current().pid() + "-" + SCRATCH.incrementAndGet() + "-" + name);
        try {
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return dir;
    }

    /**
     * Ports {@link #freePort} handed out, never handed out twice in one JVM: one may still be free only because what
     * it went to has not bound it yet (a cluster's voter ports until its nodes start; a node's client port picked
     * between them once took node 2's voter port, and both listeners shared it). A few hundred per run.
     */
    private static final java.util.Set<Integer> HANDED_OUT = java.util.concurrent.ConcurrentHashMap.newKeySet();

    /** A free loopback port below the ephemeral range, so a restart on the same port finds it free. */
    public static int freePort() {
        java.util.Random rng = new java.util.Random(System.nanoTime() ^ ProcessHandle.current().pid());
        for (int i = 0; i < 200; i++) {
            int port = 20000 + rng.nextInt(12000);
            if (HANDED_OUT.contains(port)) {
                continue; // free only because whoever it was handed to has not bound it yet
            }
            try (ServerSocket s = new ServerSocket(port, 1, InetAddress.getLoopbackAddress())) {
                HANDED_OUT.add(port);
                return port;
            } catch (IOException taken) {
                // try another
            }
        }
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}

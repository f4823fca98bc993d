package dev.ringleader.it.support;

import java.nio.file.Path;

/** A broker a test talks to: Ringleader or the reference Kafka broker. */
public interface Broker extends AutoCloseable {
    /** host:port for bootstrap.servers. */
    String bootstrap();

    /** "ringleader" or "kafka", for messages and for side-by-side output. */
    String kind();

    /** The directory that holds the `__consumer_offsets-<p>` partition directories. */
    Path logDir();

    /** host:port of the extra listener `name` (e.g. SASL_SSL), for brokers started with extra listeners. */
    default String listener(String name) {
        throw new IllegalStateException(kind() + " was started without extra listeners (asked for " + name + ")");
    }

    /** Stop the process (SIGTERM, bounded wait). */
    @Override
    void close();
}

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

    /** Stop the process (SIGTERM, bounded wait). */
    @Override
    void close();
}

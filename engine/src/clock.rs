//! Wall-clock time, read in one place: Kafka's commit timestamps, record timestamps and group
//! deadlines are wall time in milliseconds. State machines never call this; their shells do and
//! pass `now` in.

/// Milliseconds since the Unix epoch: Kafka's commit timestamps and deadlines use wall time.
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

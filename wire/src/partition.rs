//! Group id → `__consumer_offsets` partition, exactly as Kafka computes it, so that the records a
//! group writes land in the same partition number they would on Kafka.
//! (`GroupCoordinatorService.partitionFor`; `clients/.../common/utils/Utils.java` `abs`.)

/// Java's `String.hashCode`: `h = 31*h + c` over UTF-16 code units with i32 wrap-around.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// `abs(hash) % partitions`, where Kafka's `Utils.abs(Integer.MIN_VALUE)` is 0 (not negative).
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    debug_assert!(partitions > 0);
    let h = java_string_hash(group_id);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_java_hash_code() {
        // Values computed with Java's "...".hashCode().
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99162322);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // A non-BMP character counts as two UTF-16 units: "😀" = \uD83D\uDE00.
        assert_eq!(java_string_hash("😀"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn seed_walkthrough_partitions() {
        // Reference §10: g-classic lives on partition 18 of 50, g-consumer on 32.
        assert_eq!(partition_for("g-classic", 50), 18);
        assert_eq!(partition_for("g-consumer", 50), 32);
        // abs(Integer.MIN_VALUE) is 0 in Kafka's Utils.abs.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
    }
}

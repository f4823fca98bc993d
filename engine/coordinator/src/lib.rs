//! `coordinator`: Ringleader's group coordinator as pure state machines.
//!
//! Owns: the classic and consumer (KIP-848) group protocols, the server assignors, committed
//! offsets and their expiry (`group`), the `__consumer_offsets` records they produce and replay
//! (their byte codecs are `wire::records`), snapshot capture in slices (`snapshot_build`), the
//! topics view a request is handled against (`topics`), and the sans-IO partition core — one
//! partition's coordinator and durability protocol (`partition_core`) — that the broker's runtime
//! and the simulator both drive, and the transaction coordinator of one `__transaction_state`
//! partition (`txn`).
//!
//! Must not: do I/O, read a clock (`now` is passed in), spawn tasks, or depend on the runtime:
//! this crate has no glommio, no files and no sockets, and cannot import `engine`. Everything here
//! is deterministic given its inputs, which is what lets the simulator replay a seed exactly.

pub mod group;
pub mod partition_core;
pub mod snapshot_build;
pub mod topics;
pub mod txn;

/// A random UUID in Kafka's URL-safe base64 form without padding (22 characters), as Kafka
/// prints member and cluster ids (`Uuid.randomUuid().toString()`).
pub fn random_base64_uuid() -> String {
    base64_uuid(uuid::Uuid::new_v4())
}

/// `id` in Kafka's URL-safe base64 form without padding.
pub fn base64_uuid(id: uuid::Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(22);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for b in id.into_bytes() {
        acc = (acc << 8) | b as u32;
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            out.push(ALPHABET[((acc >> bits) & 63) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (6 - bits)) & 63) as usize] as char);
    }
    out
}

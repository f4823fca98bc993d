//! Bytes off a socket → `FrameDecoder` → `decode_request` → (if it decoded) `encode_request` →
//! `decode_request` again. Errors are expected; what must never happen is a panic that escapes,
//! an abort (allocation failure), a decoded request that does not re-encode, or a re-encoding
//! that decodes to something else.
//!
//! `decode_request` contains decoder panics on purpose (the generated decoders panic with
//! "capacity overflow" on array lengths that cannot be represented); `wire_check::contained`
//! records panics raised inside it instead of letting libfuzzer-sys abort, and a contained panic
//! is a finding unless it is that known capacity overflow.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ringleader_fuzz::wire_check::check_request_frame;
use std::sync::OnceLock;
use wire::codec::KNOWN_API_KEYS;
use wire::kafka_protocol::messages::ApiKey;
use wire::{ApiRange, FrameDecoder, Versions};

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<std::alloc::System> =
    wire::alloc::GuardedAlloc(std::alloc::System);

/// `socket.request.max.bytes` for the fuzzer: small, so large claimed frames are rejected early.
const MAX_FRAME: i32 = 1 << 20;

/// Every api key the codec knows, at the versions the `kafka-protocol` crate claims (which
/// includes a few its structs refuse, e.g. OffsetCommit 10: those must fail cleanly too).
fn versions() -> &'static Versions {
    static V: OnceLock<Versions> = OnceLock::new();
    V.get_or_init(|| {
        let ranges: Vec<ApiRange> = KNOWN_API_KEYS
            .iter()
            .map(|&k| {
                let r = ApiKey::try_from(k).expect("known key").valid_versions();
                ApiRange {
                    api_key: k,
                    min: r.min,
                    max: r.max,
                }
            })
            .collect();
        Versions::new(&ranges)
    })
}

fuzz_target!(|data: &[u8]| {
    let decoder = FrameDecoder::new(MAX_FRAME);
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = decoder.decode(&mut buf) {
        check_request_frame(&frame, versions());
    }
});

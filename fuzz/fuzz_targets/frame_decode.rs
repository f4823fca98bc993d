//! Bytes off a socket → `FrameDecoder` → `decode_request` → (if it decoded) `encode_request` →
//! `decode_request` again. Errors are expected; what must never happen is a panic that escapes,
//! an abort (allocation failure), a decoded request that does not re-encode, or a re-encoding
//! that decodes to something else.
//!
//! `decode_request` contains decoder panics on purpose (the generated decoders panic with
//! "capacity overflow" on array lengths that cannot be represented). libfuzzer-sys makes every
//! panic an abort, so this target installs a panic hook that records panics raised inside
//! `decode_request` instead; a contained panic is then a finding unless it is that known
//! capacity overflow.

#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use std::cell::{Cell, RefCell};
use std::sync::OnceLock;
use wire::codec::{encode_request, KNOWN_API_KEYS};
use wire::kafka_protocol::messages::ApiKey;
use wire::{decode_request, ApiRange, DecodeError, FrameDecoder, Versions};

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<std::alloc::System> =
    wire::alloc::GuardedAlloc(std::alloc::System);

/// `socket.request.max.bytes` for the fuzzer: small, so large claimed frames are rejected early.
const MAX_FRAME: i32 = 1 << 20;

thread_local! {
    static IN_DECODE: Cell<bool> = const { Cell::new(false) };
    static CONTAINED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Every api key the codec knows, at the versions the `kafka-protocol` crate claims (which
/// includes a few its structs refuse, e.g. OffsetCommit 10: those must fail cleanly too).
fn versions() -> &'static Versions {
    static V: OnceLock<Versions> = OnceLock::new();
    V.get_or_init(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_DECODE.with(Cell::get) {
                let msg = match info.payload().downcast_ref::<&str>() {
                    Some(s) => (*s).to_owned(),
                    None => info
                        .payload()
                        .downcast_ref::<String>()
                        .cloned()
                        .unwrap_or_default(),
                };
                let at = info.location().map(|l| l.to_string()).unwrap_or_default();
                CONTAINED.with(|c| *c.borrow_mut() = Some(format!("{msg} at {at}")));
            } else {
                prev(info); // libfuzzer-sys: print and abort
            }
        }));
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

fn decode(frame: &Bytes) -> Result<(wire::RequestHeader, wire::Request), DecodeError> {
    IN_DECODE.with(|f| f.set(true));
    let result = decode_request(frame, versions());
    IN_DECODE.with(|f| f.set(false));
    if let Some(msg) = CONTAINED.with(|c| c.borrow_mut().take()) {
        assert!(
            msg.contains("capacity overflow"),
            "decoder panicked (contained by decode_request): {msg}"
        );
    }
    result.map_err(|(_, e)| e)
}

/// kafka-protocol 0.18 keeps an unknown tag >= 2^31 under a negative `i32` key; its encoders
/// count it in the tagged-field total but write only keys `0..`, so re-encoding such a request
/// yields a malformed frame. The broker never re-encodes requests, so this is tolerated here
/// (and pinned by `tag_above_i32_max_is_not_re_encoded` in wire/tests/roundtrip.rs).
fn has_negative_tag(req: &wire::Request) -> bool {
    format!("{req:?}").contains("unknown_tagged_fields: {-")
}

fn check_frame(frame: &Bytes) {
    let Ok((header, req)) = decode(frame) else {
        return;
    };
    let mut out = BytesMut::new();
    if let Err(e) = encode_request(&header, &req, &mut out) {
        panic!("decoded request does not re-encode: {e:#}\n{header:?}\n{req:?}");
    }
    let again = out.split_off(4).freeze();
    match decode(&again) {
        Ok((h2, r2)) if h2 == header && r2 == req => {}
        _ if has_negative_tag(&req) => {}
        Ok((h2, r2)) => {
            assert_eq!(h2, header, "header changed across re-encoding");
            assert_eq!(r2, req, "request changed across re-encoding");
        }
        Err(e) => panic!("re-encoded request does not decode: {e}\n{req:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let decoder = FrameDecoder::new(MAX_FRAME);
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = decoder.decode(&mut buf) {
        check_frame(&frame);
    }
});

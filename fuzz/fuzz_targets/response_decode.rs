//! Every response decoder of the served APIs: what the `ringleader groups` admin client (and the
//! load generator) run on bytes a broker sent them.
//!
//! Input: two selector bytes (see `ringleader_fuzz::served`), then a response frame without its
//! length prefix (correlation id, response header, body), as `decode_response` takes it. Errors
//! are expected; a panic that escapes `decode_response`, an abort, or a contained decoder panic
//! other than the known "capacity overflow" is a finding. A response that decodes must re-encode
//! with `encode_response` and decode again to the same value.
//!
//! Seeds: the golden response frames of `wire/tests/golden/*.hex` (see `wire/tests/fuzz_seeds.rs`).

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ringleader_fuzz::served::select;
use ringleader_fuzz::wire_check::contained;
use wire::codec::decode_response;
use wire::encode_response;

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<std::alloc::System> =
    wire::alloc::GuardedAlloc(std::alloc::System);

fuzz_target!(|data: &[u8]| {
    let Some((api_key, version, frame)) = select(data) else {
        return;
    };
    let frame = bytes::Bytes::copy_from_slice(frame);
    let Ok((cid, resp)) = contained(|| decode_response(api_key, version, &frame)) else {
        return;
    };
    let mut out = BytesMut::new();
    if let Err(e) = encode_response(cid, version, &resp, &mut out) {
        panic!("decoded response does not re-encode: {e:#}\n{resp:?}");
    }
    let again = out.split_off(4).freeze();
    // kafka-protocol 0.18 keeps an unknown tag >= 2^31 under a negative key and cannot re-encode
    // it (see `wire_check::has_negative_tag`); such a response is not compared.
    let negative_tag = || format!("{resp:?}").contains("unknown_tagged_fields: {-");
    match contained(|| decode_response(api_key, version, &again)) {
        Ok((c2, r2)) => {
            assert_eq!(c2, cid, "correlation id changed across re-encoding");
            if r2 != resp && !negative_tag() {
                assert_eq!(r2, resp, "response changed across re-encoding");
            }
        }
        Err(_) if negative_tag() => {}
        Err(e) => panic!("re-encoded response does not decode: {e:#}\n{resp:?}"),
    }
});

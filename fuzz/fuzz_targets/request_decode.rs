//! Every request decoder the broker serves, at every served version, in one target.
//!
//! Input: two selector bytes (see `ringleader_fuzz::served`: an index into
//! `wire::versions::SERVED` and a version within that API's range), then the request body. The
//! target frames it behind a valid request header of that key and version (header v1 or v2, as the
//! version requires) and runs it through `decode_request` with the broker's own version table
//! (`Versions::default()`), exactly as a connection does after framing. A body that decodes must
//! re-encode, and the re-encoding must decode to the same request (as in `frame_decode`).
//!
//! Why one target and not one per api key: 24 served keys would mean 24 binaries, 24 corpora and
//! 24 time slices on a 2-core machine, most of them spent re-discovering the same primitives
//! (compact strings, arrays, tagged fields, uuids) that every generated decoder shares. In one
//! target libFuzzer's coverage feedback keeps inputs per decoder anyway (each decoder is distinct
//! code, so new edges in any of them are new features), its entropic scheduler spends time where
//! features are rare, and a mutated selector byte carries a body that found a path in one API to
//! another API or version. The selector maps every byte value onto a served (key, version), so no
//! execution is wasted on rejected keys; headers, unknown keys and unserved versions are
//! `frame_decode`'s job.

#![no_main]

use bytes::{BufMut, BytesMut};
use libfuzzer_sys::fuzz_target;
use ringleader_fuzz::served::select;
use ringleader_fuzz::wire_check::check_request_frame;
use std::sync::OnceLock;
use wire::header::request_header_version;
use wire::{RequestHeader, Versions};

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<std::alloc::System> =
    wire::alloc::GuardedAlloc(std::alloc::System);

fn versions() -> &'static Versions {
    static V: OnceLock<Versions> = OnceLock::new();
    V.get_or_init(Versions::default)
}

fuzz_target!(|data: &[u8]| {
    let Some((api_key, version, body)) = select(data) else {
        return;
    };
    let header = RequestHeader {
        api_key,
        api_version: version,
        correlation_id: 7,
        client_id: Some("fuzz".into()),
    };
    let mut frame = BytesMut::with_capacity(32 + body.len());
    header.encode(request_header_version(api_key, version), &mut frame);
    frame.put_slice(body);
    check_request_frame(&frame.freeze(), versions());
});

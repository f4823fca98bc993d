//! Decoding under watch, and the request round trip.
//!
//! `decode_request` and `decode_response` contain decoder panics on purpose (the generated
//! decoders panic with "capacity overflow" on array lengths that cannot be represented).
//! libfuzzer-sys makes every panic an abort, so [`contained`] runs a decode with a panic hook
//! that records a panic raised inside it instead; a contained panic is then a finding unless it
//! is that known capacity overflow.

use bytes::{Bytes, BytesMut};
use std::cell::{Cell, RefCell};
use std::sync::Once;
use wire::codec::encode_request;
use wire::{decode_request, DecodeError, Request, RequestHeader, Versions};

thread_local! {
    static IN_DECODE: Cell<bool> = const { Cell::new(false) };
    static CONTAINED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs the recording hook once, on top of libfuzzer-sys's (which prints and aborts). Must
/// run after libfuzzer-sys installed its own, i.e. from inside the fuzz target.
fn install_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
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
    });
}

/// Runs `f` (a decode that catches its own panics); a panic it contained other than the known
/// "capacity overflow" fails the input.
pub fn contained<T>(f: impl FnOnce() -> T) -> T {
    install_hook();
    IN_DECODE.with(|c| c.set(true));
    let result = f();
    IN_DECODE.with(|c| c.set(false));
    if let Some(msg) = CONTAINED.with(|c| c.borrow_mut().take()) {
        assert!(
            msg.contains("capacity overflow"),
            "decoder panicked (contained): {msg}"
        );
    }
    result
}

pub fn decode(frame: &Bytes, versions: &Versions) -> Result<(RequestHeader, Request), DecodeError> {
    contained(|| decode_request(frame, versions)).map_err(|(_, e)| e)
}

/// kafka-protocol 0.18 keeps an unknown tag >= 2^31 under a negative `i32` key; its encoders
/// count it in the tagged-field total but write only keys `0..`, so re-encoding such a request
/// yields a malformed frame. The broker never re-encodes requests, so this is tolerated here
/// (and pinned by `tag_above_i32_max_is_not_re_encoded` in wire/tests/roundtrip.rs).
pub fn has_negative_tag(req: &Request) -> bool {
    format!("{req:?}").contains("unknown_tagged_fields: {-")
}

/// Decodes one request frame (without its length prefix); if it decodes, it must re-encode, and
/// the re-encoding must decode to the same header and request. Returns whether it decoded.
pub fn check_request_frame(frame: &Bytes, versions: &Versions) -> bool {
    let Ok((header, req)) = decode(frame, versions) else {
        return false;
    };
    let mut out = BytesMut::new();
    if let Err(e) = encode_request(&header, &req, &mut out) {
        panic!("decoded request does not re-encode: {e:#}\n{header:?}\n{req:?}");
    }
    let again = out.split_off(4).freeze();
    match decode(&again, versions) {
        Ok((h2, r2)) if h2 == header && r2 == req => {}
        _ if has_negative_tag(&req) => {}
        Ok((h2, r2)) => {
            assert_eq!(h2, header, "header changed across re-encoding");
            assert_eq!(r2, req, "request changed across re-encoding");
        }
        Err(e) => panic!("re-encoded request does not decode: {e}\n{req:?}"),
    }
    true
}

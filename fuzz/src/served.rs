//! Input selector of `request_decode` and `response_decode`: byte 0 picks one of the served APIs
//! (`SERVED[b0 % SERVED.len()]`), byte 1 one of its served versions (`min + b1 % (max - min + 1)`),
//! and the rest is the message. Every input therefore reaches a served decoder: libFuzzer spends
//! no executions on keys or versions the broker closes the connection for (`frame_decode` covers
//! those), and a mutation of the two selector bytes moves a body to another decoder or version,
//! which is how one API's corpus seeds another's.
//! `wire/tests/fuzz_seeds.rs` writes seeds in this format (selector = index in `SERVED`,
//! version - min).

use wire::versions::SERVED;

/// `(api key, version, rest)` for an input, or `None` when it is shorter than the selector.
pub fn select(data: &[u8]) -> Option<(i16, i16, &[u8])> {
    let (&[k, v], rest) = data.split_first_chunk::<2>()?;
    let r = SERVED[k as usize % SERVED.len()];
    let span = (r.max - r.min + 1) as u16;
    Some((r.api_key, r.min + (v as u16 % span) as i16, rest))
}

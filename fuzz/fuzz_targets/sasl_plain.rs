//! PLAIN (RFC 4616) tokens into `SaslServer`; the checks are in `ringleader_fuzz::sasl_check::check_plain`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ringleader_fuzz::sasl_check::check_plain(data);
});

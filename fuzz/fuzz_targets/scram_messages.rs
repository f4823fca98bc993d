//! SCRAM client-first then client-final into a server with RFC 7677's credential; the checks are in `ringleader_fuzz::sasl_check::check_scram`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ringleader_fuzz::sasl_check::check_scram(data);
});

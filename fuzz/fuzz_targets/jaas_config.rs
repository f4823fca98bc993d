//! `sasl.jaas.config` values into `security::jaas::parse`; the checks are in `ringleader_fuzz::sasl_check::check_jaas`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ringleader_fuzz::sasl_check::check_jaas(data);
});

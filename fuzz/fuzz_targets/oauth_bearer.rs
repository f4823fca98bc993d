//! OAUTHBEARER client initial responses into the unsecured validator; the checks are in `ringleader_fuzz::sasl_check::check_oauth`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ringleader_fuzz::sasl_check::check_oauth(data);
});

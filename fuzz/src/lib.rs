//! Helpers shared by the fuzz targets (not a library anyone else uses).
//!
//! - [`wire_check`]: decoding under a panic hook that records panics `wire` contains on purpose,
//!   and the decode → re-encode → decode round trip every request target checks.
//! - [`dir_image`]: the input format of the segment-recovery targets (a few segment files with
//!   their names) and the CRC fix-up that lets mutated batches reach the checks behind the CRC.
//! - [`served`]: the selector bytes of `request_decode` / `response_decode` mapped onto
//!   `wire::versions::SERVED`, so every input is a served (api key, version).
//! - [`sasl_check`]: the checks of the SASL targets (also run on the seeds by
//!   `engine/security/tests/fuzz_seeds.rs`).

pub mod dir_image;
pub mod sasl_check;
pub mod served;
pub mod wire_check;

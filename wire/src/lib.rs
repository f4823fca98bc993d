//! `wire`: the Kafka wire protocol as Ringleader speaks it.
//!
//! Owns: size-prefixed framing (bounded by `socket.request.max.bytes`), request header v1/v2 and
//! response header v0/v1 (with the ApiVersions exception), the table of API versions we advertise
//! and accept, decoding requests into typed messages (structs from the `kafka-protocol` crate) and
//! encoding responses, Kafka's group → `__consumer_offsets` partition hash, and the allocation guard
//! that keeps a lying array length from aborting the process.
//!
//! Must not: do I/O, read a clock, or know what a group, a topic registry or a file is. Everything
//! here is bytes in, typed values (or a precise error) out, so it can be fuzzed and golden-tested
//! without a server.

pub mod alloc;
pub mod api_versions;
pub mod codec;
pub mod consumer_protocol;
pub mod error;
pub mod frame;
pub mod guard;
pub mod header;
pub mod partition;
pub mod records;
pub mod versions;

pub use codec::{decode_request, decode_request_ref, encode_response, Request, Response};
pub use error::{DecodeError, FrameError};
pub use frame::{FrameDecoder, FRAME_LEN_BYTES};
pub use header::{RequestHeader, RequestHeaderRef};
pub use kafka_protocol;
pub use partition::{java_string_hash, partition_for};
pub use versions::{ApiRange, Versions};

// Unit tests decode hostile lengths too, so they run under the same guard as the binaries.
#[cfg(test)]
#[global_allocator]
static TEST_ALLOC: alloc::GuardedAlloc<std::alloc::System> =
    alloc::GuardedAlloc(std::alloc::System);

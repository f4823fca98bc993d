//! Codec cost of the hot group-coordinator requests: decode the request frame
//! (`wire::decode_request`), encode the response frame (`wire::encode_response`), and the two
//! together as a broker does per request (decode → build the response from the request → encode).
//!
//! Besides criterion's time per operation, this prints allocations per operation (a pre-pass of
//! 10 000 iterations outside criterion's timing, counted by a wrapping global allocator).
//!
//! `cargo bench -p ringleader-benches` (add `-- --quick` for a fast check).

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion};
use ringleader_benches::codec_fixtures::{self, Case};
use ringleader_benches::counting_alloc::{self, CountingAlloc};
use std::hint::black_box;
use wire::{decode_request, encode_response, Versions};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const ALLOC_PASS_ITERS: u64 = 10_000;

fn decode(case: &Case, versions: &Versions) {
    let decoded = decode_request(black_box(&case.frame), versions).expect("fixture decodes");
    black_box(decoded);
}

fn encode(case: &Case, out: &mut BytesMut) {
    out.clear();
    encode_response(
        case.correlation_id,
        case.version,
        black_box(&case.response),
        out,
    )
    .expect("fixture encodes");
    black_box(&out[..]);
}

fn round_trip(case: &Case, versions: &Versions, out: &mut BytesMut) {
    let (header, req) = decode_request(black_box(&case.frame), versions).expect("fixture decodes");
    let resp = (case.respond)(&req);
    out.clear();
    encode_response(header.correlation_id, header.api_version, &resp, out)
        .expect("response encodes");
    black_box(&out[..]);
}

fn print_allocations(cases: &[Case], versions: &Versions) {
    println!(
        "allocations per operation ({ALLOC_PASS_ITERS} iterations each, output buffer reused):"
    );
    println!(
        "  {:<44} {:>10} {:>10}",
        "benchmark", "allocs/op", "bytes/op"
    );
    let mut out = BytesMut::with_capacity(4096);
    for case in cases {
        let rows: [(&str, (f64, f64)); 3] = [
            (
                "decode",
                counting_alloc::per_op(ALLOC_PASS_ITERS, || decode(case, versions)),
            ),
            (
                "encode",
                counting_alloc::per_op(ALLOC_PASS_ITERS, || encode(case, &mut out)),
            ),
            (
                "round_trip",
                counting_alloc::per_op(ALLOC_PASS_ITERS, || round_trip(case, versions, &mut out)),
            ),
        ];
        for (what, (allocs, bytes)) in rows {
            println!(
                "  {:<44} {allocs:>10.2} {bytes:>10.1}",
                format!("codec/{}/{what}", case.name)
            );
        }
    }
    println!();
}

fn codec(c: &mut Criterion) {
    let versions = codec_fixtures::versions();
    let cases = codec_fixtures::all();
    print_allocations(&cases, &versions);

    let mut group = c.benchmark_group("codec");
    let mut out = BytesMut::with_capacity(4096);
    for case in &cases {
        group.bench_function(format!("{}/decode", case.name), |b| {
            b.iter(|| decode(case, &versions))
        });
        group.bench_function(format!("{}/encode", case.name), |b| {
            b.iter(|| encode(case, &mut out))
        });
        group.bench_function(format!("{}/round_trip", case.name), |b| {
            b.iter(|| round_trip(case, &versions, &mut out))
        });
    }
    group.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);

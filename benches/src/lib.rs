//! Micro and macro benchmarks for Ringleader (see `benches/` targets).

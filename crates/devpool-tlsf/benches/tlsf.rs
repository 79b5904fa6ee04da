//! Criterion benchmarks of the TLSF allocator.
fn main() {}

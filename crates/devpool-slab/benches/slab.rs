//! Slab allocator benchmarks.
fn main() {}

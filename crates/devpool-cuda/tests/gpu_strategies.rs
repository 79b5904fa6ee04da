//! The GPU checks on every strategy crate, on a real CUDA GPU (device 0). Run them
//! with `cargo test -p devpool-cuda --test gpu_strategies -- --ignored --test-threads=1`.

use devpool_arena::{arena, ArenaConfig};
use devpool_buddy::{buddy, BuddyConfig};
use devpool_core::{Allocator, Backend};
use devpool_cuda::gpu_checks::{check_stream_order, OverlapCheck};
use devpool_cuda::CudaBackend;
use devpool_slab::{slab, SlabConfig};
use devpool_tlsf::{tlsf, Mode, TlsfConfig};
use std::sync::Arc;

fn gpu() -> Arc<CudaBackend> {
    CudaBackend::new(0).expect("a CUDA device 0")
}

/// Both checks on `alloc`, then everything trimmed and given back.
fn checks(alloc: &dyn Allocator, overlap: OverlapCheck, gpu: &CudaBackend) {
    let r = overlap
        .run(alloc)
        .unwrap_or_else(|e| panic!("{}: {e}", alloc.name()));
    println!("{}: {r:?}", alloc.name());
    let s = check_stream_order(alloc).unwrap_or_else(|e| panic!("{}: {e}", alloc.name()));
    println!("{}: {s:?}", alloc.name());
    assert!(!s.freed_on_other_stream.aliased || !s.freed_on_other_stream.busy_at_alloc);
    alloc.trim().unwrap();
    let st = alloc.stats();
    assert_eq!(st.live_blocks.current, 0, "{}: {st:?}", alloc.name());
    assert_eq!(
        st.reserved_bytes.current,
        gpu.counters().bytes_in_use.current,
        "{}: the allocator's reserved bytes are the backend's count",
        alloc.name()
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn slab_on_gpu() {
    let g = gpu();
    let cfg = SlabConfig::default();
    let max = cfg.max_size();
    checks(
        &slab(g.clone(), cfg),
        OverlapCheck::new(4000, 21).sizes(max, 0),
        &g,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn buddy_region_on_gpu() {
    let g = gpu();
    checks(
        &buddy(g.clone(), BuddyConfig::region()),
        OverlapCheck::new(4000, 22),
        &g,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn buddy_virtual_on_gpu() {
    let g = gpu();
    assert!(g.supports_virtual());
    checks(
        &buddy(g.clone(), BuddyConfig::virtual_ranges()),
        OverlapCheck::new(4000, 23),
        &g,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn arena_on_gpu() {
    let g = gpu();
    checks(
        &arena(g.clone(), ArenaConfig::default()),
        OverlapCheck::new(4000, 24),
        &g,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tlsf_region_on_gpu() {
    let g = gpu();
    checks(
        &tlsf(g.clone(), TlsfConfig::default().mode(Mode::Region)),
        OverlapCheck::new(4000, 25),
        &g,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tlsf_virtual_on_gpu() {
    let g = gpu();
    checks(
        &tlsf(g.clone(), TlsfConfig::default().mode(Mode::Virtual)),
        OverlapCheck::new(4000, 26),
        &g,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn hybrid_on_gpu() {
    use devpool_hybrid::{hybrid, HybridConfig};
    for cfg in [HybridConfig::training(), HybridConfig::with_buddy()] {
        let g = gpu();
        checks(&hybrid(g.clone(), cfg), OverlapCheck::new(4000, 27), &g);
    }
}

//! The GPU checks on every strategy crate, on a real CUDA GPU (device 0). Run them
//! with `cargo test -p devpool-cuda --test gpu_strategies -- --ignored --test-threads=1`.

use devpool_arena::{arena, ArenaConfig};
use devpool_buddy::{buddy, BuddyConfig};
use devpool_core::{Allocator, Backend};
use devpool_cuda::CudaBackend;
use devpool_slab::{slab, SlabConfig};
use devpool_testing::gpu_checks::{OverlapCheck, StreamOrderCheck};
use devpool_tlsf::{tlsf, TlsfConfig, TlsfMode};
use std::sync::Arc;

fn gpu() -> Arc<CudaBackend> {
    CudaBackend::new(0).expect("a CUDA device 0")
}

/// Block sizes of the stream-order check: small blocks (a slab class, and the
/// hybrid's small route up to 64 KiB) and a large one.
const STREAM_ORDER_SIZES: [usize; 3] = [4 << 10, 64 << 10, 1 << 20];

/// Both checks on `alloc`, then everything trimmed and given back.
fn checks(alloc: &dyn Allocator, overlap: OverlapCheck, gpu: &CudaBackend) {
    let r = overlap
        .run(alloc)
        .unwrap_or_else(|e| panic!("{}: {e}", alloc.name()));
    println!("{}: {r:?}", alloc.name());
    for size in STREAM_ORDER_SIZES {
        let check = StreamOrderCheck {
            block_size: size,
            ..StreamOrderCheck::default()
        };
        let s = check
            .run(alloc)
            .unwrap_or_else(|e| panic!("{} ({size} B): {e}", alloc.name()));
        println!("{} ({size} B): {s:?}", alloc.name());
        // The check proves something only if the freed block's stream was still busy
        // when the next block was handed out; a pool never waits for the device on
        // a free, so it must have been.
        for (case, h) in [
            ("freed on its own stream", s.freed_on_own_stream),
            ("freed on another stream", s.freed_on_other_stream),
        ] {
            assert!(
                h.busy_at_alloc,
                "{} ({size} B), {case}: the old stream was already done when the next block \
                 was handed out, so the check proved nothing (raise busy_reps)",
                alloc.name()
            );
            assert!(!h.aliased, "{} ({size} B), {case}: {s:?}", alloc.name());
        }
    }
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
        &tlsf(g.clone(), TlsfConfig::default().mode(TlsfMode::Region)),
        OverlapCheck::new(4000, 25),
        &g,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tlsf_virtual_on_gpu() {
    let g = gpu();
    checks(
        &tlsf(g.clone(), TlsfConfig::default().mode(TlsfMode::Virtual)),
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

/// Each allocator's held bytes, as the backend counts them (what replay and bench
/// report), against what `cuMemGetInfo` says the device gave: the two must agree
/// within the driver's own bookkeeping.
#[test]
#[ignore = "needs a CUDA GPU"]
fn held_bytes_match_cumemgetinfo() {
    use devpool_core::{Block, Request, Rng, StreamId};
    use devpool_hybrid::{hybrid, HybridConfig};
    type MakeFn = fn(Arc<CudaBackend>) -> Box<dyn Allocator>;
    let all: [(&str, MakeFn); 8] = [
        ("cuMemAlloc", |g| Box::new(devpool_cuda::cuda_malloc(g))),
        ("slab", |g| {
            Box::new(slab(g, SlabConfig::geometric(4, 1 << 32)))
        }),
        ("buddy-region", |g| {
            Box::new(buddy(g, BuddyConfig::region()))
        }),
        ("buddy-virtual", |g| {
            Box::new(buddy(g, BuddyConfig::virtual_ranges()))
        }),
        ("tlsf-region", |g| {
            Box::new(tlsf(g, TlsfConfig::default().mode(TlsfMode::Region)))
        }),
        ("tlsf-virtual", |g| {
            Box::new(tlsf(g, TlsfConfig::default().mode(TlsfMode::Virtual)))
        }),
        ("arena", |g| Box::new(arena(g, ArenaConfig::default()))),
        ("hybrid", |g| Box::new(hybrid(g, HybridConfig::training()))),
    ];
    let free_now = |g: &CudaBackend| {
        g.synchronize_device().unwrap();
        g.mem_info().unwrap().0
    };
    for (name, make) in all {
        let g = gpu();
        // Warm up the driver (context, memset kernels) before the first reading.
        let p = g.alloc_region(1 << 20).unwrap();
        g.memset(p, 1, 1 << 20, StreamId::DEFAULT).unwrap();
        g.free_region(p, 1 << 20).unwrap();
        let before = free_now(&g);
        let alloc = make(g.clone());
        let s = g.create_stream().unwrap();
        let mut rng = Rng::new(31);
        let mut live: Vec<Block> = Vec::new();
        for i in 0..600 {
            if i % 3 == 2 && !live.is_empty() {
                let b = live.swap_remove(rng.below(live.len() as u64) as usize);
                alloc.free(b).unwrap();
            } else {
                let stream = if i % 2 == 0 { StreamId::DEFAULT } else { s };
                let req = Request::new(rng.log_uniform(1, 64 << 20)).on_stream(stream);
                live.push(alloc.allocate(req).unwrap());
            }
        }
        let taken = before.saturating_sub(free_now(&g));
        let held = g.counters().bytes_in_use.current;
        println!(
            "{name}: held {held} B by the backend's count, {taken} B by cuMemGetInfo ({:+} B)",
            taken as i64 - held as i64
        );
        // Slack for the driver's own bookkeeping (page tables, the small-allocation
        // pages it shares), never for a per-block rounding the count misses.
        let slack = (16 << 20) + held / 100;
        assert!(
            taken.abs_diff(held) <= slack,
            "{name}: the backend counts {held} B held, the device lost {taken} B"
        );
        for b in live {
            alloc.free(b).unwrap();
        }
        alloc.trim().unwrap();
        drop(alloc);
        assert_eq!(g.counters().bytes_in_use.current, 0, "{name}");
        let back = before.saturating_sub(free_now(&g));
        assert!(
            back <= 16 << 20,
            "{name}: {back} B not given back to the device"
        );
    }
}

/// A hybrid with a reserve: its first large block maps the reserve, blocks inside
/// it call the driver no more and hold what was written to them, freeing them keeps
/// it, the usual checks pass on it, and their trim gives it back.
#[test]
#[ignore = "needs a CUDA GPU"]
fn hybrid_with_a_reserve_on_gpu() {
    use devpool_core::{Request, StreamId};
    use devpool_hybrid::{hybrid, HybridConfig, LargeStrategy};
    const RESERVE: u64 = 1 << 30;
    let g = gpu();
    let mut cfg = HybridConfig::training();
    match &mut cfg.large {
        LargeStrategy::Tlsf(t) => t.pages.reserve = RESERVE as usize,
        LargeStrategy::Buddy(_) => panic!("the training preset's large route is TLSF"),
    }
    let alloc = hybrid(g.clone(), cfg);
    let first = alloc.allocate(Request::new(8 << 20)).unwrap();
    assert!(
        g.counters().bytes_in_use.current >= RESERVE,
        "the first large block maps the reserve: {:?}",
        g.counters()
    );
    let maps = g.counters().map_calls;
    let blocks: Vec<_> = (0..16u8)
        .map(|i| {
            let b = alloc.allocate(Request::new(32 << 20)).unwrap();
            g.memset(b.ptr, i + 1, b.requested, StreamId::DEFAULT)
                .unwrap();
            b
        })
        .collect();
    assert_eq!(
        g.counters().map_calls,
        maps,
        "512 MiB of blocks inside a 1 GiB reserve map nothing"
    );
    for (i, b) in blocks.iter().enumerate() {
        let mut ends = [0u8; 2];
        g.copy_to_host(&mut ends[..1], b.ptr, StreamId::DEFAULT)
            .unwrap();
        g.copy_to_host(
            &mut ends[1..],
            devpool_core::DevicePtr(b.ptr.0 + b.requested as u64 - 1),
            StreamId::DEFAULT,
        )
        .unwrap();
        assert_eq!(
            ends,
            [i as u8 + 1; 2],
            "block {i} holds what was written to it"
        );
    }
    for b in blocks {
        alloc.free(b).unwrap();
    }
    alloc.free(first).unwrap();
    assert!(
        g.counters().bytes_in_use.current >= RESERVE,
        "freeing keeps the reserve"
    );
    checks(&alloc, OverlapCheck::new(4000, 28), &g);
    assert!(
        g.counters().bytes_in_use.current < RESERVE,
        "the trim gave the reserve back: {:?}",
        g.counters()
    );
}

//! Where a pair's nanoseconds go: the same allocate + free pair timed through each
//! layer in turn (the bare single-stream pools, the stream-ordered wrapper, the
//! router), next to the system allocator's `malloc` + `free` of the same size.
//!
//! ```sh
//! cargo run --release -p devpool-hybrid --example layers            # every variant
//! cargo run --release -p devpool-hybrid --example layers -- slab 4096 # one variant
//! ```
//!
//! `nothing` is a pool that does no work: the harness's own share of each figure;
//! `nothing-alloc` an allocator that does no work, called as every allocator is
//! (`Box<dyn Allocator>`): the interface's share; `nothing+ord` the pool that does
//! nothing behind the stream-ordered layer: that layer's share over the interface's.
//! Each figure is the best of 30 batches of 20 000 pairs (a busy machine slows some
//! batches, never speeds one up). With one variant named, it runs that variant alone
//! for 1 000 000 pairs and prints nothing else: the form to count instructions with
//! `valgrind --tool=callgrind`.

use devpool_core::{Allocator, Block, DeviceId, DevicePtr, Pool, Request, Stats, StreamOrdered};
use devpool_hybrid::{hybrid, HybridConfig, HybridPool};
use devpool_slab::{slab, SlabConfig, SlabPool};
use devpool_testing::MockBackend;
use devpool_tlsf::{tlsf, TlsfConfig, TlsfPool};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::Instant;

type Variant = (&'static str, Box<dyn FnMut(usize)>);

fn pool_pairs<P: Pool>(p: P) -> Box<dyn FnMut(usize)> {
    Box::new(move |size| {
        let req = Request::new(black_box(size));
        let b = p.allocate(&req).expect("allocate");
        p.deallocate(black_box(&b)).expect("free");
    })
}

fn alloc_pairs(a: Box<dyn Allocator>) -> Box<dyn FnMut(usize)> {
    Box::new(move |size| {
        let b = a.alloc(black_box(size)).expect("allocate");
        a.free(black_box(b)).expect("free");
    })
}

/// A pool that does nothing: the harness's own share of every figure.
struct Nothing;

impl Pool for Nothing {
    fn allocate(&self, req: &Request) -> devpool_core::Result<Block> {
        Ok(req.granted(DevicePtr(1 << 40), req.size, DeviceId(0), 0))
    }
    fn deallocate(&self, _: &Block) -> devpool_core::Result<()> {
        Ok(())
    }
    fn check(&self, _: &Block) -> devpool_core::Result<()> {
        Ok(())
    }
    fn stats(&self) -> Stats {
        Stats::default()
    }
    fn trim(&self) -> devpool_core::Result<usize> {
        Ok(0)
    }
}

/// An allocator that does nothing, called through `Box<dyn Allocator>` as `devpool
/// bench` calls every strategy: the share of the interface itself (a request and a
/// block passed by value, a result returned through memory, two calls the compiler
/// cannot see into), which `nothing+ord` pays too.
struct NothingAlloc(std::sync::Arc<dyn devpool_core::Backend>);
impl Allocator for NothingAlloc {
    fn name(&self) -> &str {
        "x"
    }
    fn backend(&self) -> &std::sync::Arc<dyn devpool_core::Backend> {
        &self.0
    }
    fn allocate(&self, req: Request) -> devpool_core::Result<Block> {
        Ok(req.granted(DevicePtr(1 << 40), req.size, DeviceId(0), 0))
    }
    fn deallocate(&self, _: Block, _: devpool_core::StreamId) -> devpool_core::Result<()> {
        Ok(())
    }
    fn record_stream(&self, _: &Block, _: devpool_core::StreamId) -> devpool_core::Result<()> {
        Ok(())
    }
    fn stats(&self) -> Stats {
        Stats::default()
    }
    fn trim(&self) -> devpool_core::Result<usize> {
        Ok(0)
    }
}

fn variants() -> Vec<Variant> {
    let mock = MockBackend::shared;
    vec![
        ("nothing", pool_pairs(Nothing)),
        ("nothing-alloc", alloc_pairs(Box::new(NothingAlloc(mock())))),
        (
            "nothing+ord",
            alloc_pairs(Box::new(StreamOrdered::new("nothing", mock(), |_| Nothing))),
        ),
        (
            "malloc",
            Box::new(|size| {
                let layout = Layout::from_size_align(size, 16).expect("layout");
                // SAFETY: the layout has a non-zero size; the pointer is freed with the
                // same layout right after.
                unsafe {
                    let p = System.alloc(black_box(layout));
                    assert!(!p.is_null());
                    System.dealloc(black_box(p), layout);
                }
            }),
        ),
        (
            "slab-pool",
            pool_pairs(SlabPool::new(mock(), SlabConfig::default())),
        ),
        (
            "slab",
            alloc_pairs(Box::new(slab(mock(), SlabConfig::default()))),
        ),
        (
            "tlsf-pool",
            pool_pairs(TlsfPool::new(mock(), TlsfConfig::default())),
        ),
        (
            "tlsf",
            alloc_pairs(Box::new(tlsf(mock(), TlsfConfig::default()))),
        ),
        (
            "hybrid-pool",
            pool_pairs(HybridPool::new(mock(), HybridConfig::training())),
        ),
        (
            "hybrid",
            alloc_pairs(Box::new(hybrid(mock(), HybridConfig::training()))),
        ),
    ]
}

fn best_ns(f: &mut dyn FnMut(usize), size: usize, batches: usize, per: usize) -> f64 {
    for _ in 0..1000 {
        f(size);
    }
    let mut best = f64::MAX;
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..per {
            f(size);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / per as f64);
    }
    best
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [name, size] = &args[..] {
        let size: usize = size.parse().expect("a size in bytes");
        let (_, mut f) = variants()
            .into_iter()
            .find(|(n, _)| n == name)
            .expect("a variant name");
        for _ in 0..1_000_000 {
            f(size);
        }
        return;
    }
    println!(
        "{:<12} {:>10} {:>10} {:>10}",
        "ns per pair", "4 KiB", "1 MiB", "64 MiB"
    );
    for (name, mut f) in variants() {
        print!("{name:<12}");
        for size in [4usize << 10, 1 << 20, 64 << 20] {
            let small_only = name.starts_with("slab") && size > 1 << 20;
            if small_only {
                print!(" {:>10}", "-");
            } else {
                print!(" {:>10.1}", best_ns(&mut *f, size, 30, 20_000));
            }
        }
        println!();
    }
}

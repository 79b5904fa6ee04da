//! The GPU checks on the ring: no two live blocks overlap (checked on the device's
//! bytes), memory freed while a stream is busy is not handed to another stream
//! early, and a FIFO stream of blocks written and read back on the device keeps
//! every block's bytes and, once warm, makes no backend call.
//!
//! On a real GPU (device 0):
//! `cargo test --release -p devpool-ring --test ring_gpu -- --ignored --test-threads=1 --nocapture`.
//! The same checks run on a host-backed mock without `--ignored`.

use devpool_core::{Allocator, Block, Rng, StreamId};
use devpool_cuda::CudaBackend;
use devpool_ring::{ring, RingConfig, RingMode};
use devpool_testing::gpu_checks::{OverlapCheck, StreamOrderCheck};
use devpool_testing::{MockBackend, MockConfig};
use std::collections::VecDeque;
use std::sync::Arc;

/// Overlap and stream order on `alloc`, then everything trimmed: the allocator's
/// reserved bytes are the backend's count.
fn checks(alloc: &dyn Allocator, overlap: OverlapCheck, order: StreamOrderCheck) {
    let r = overlap
        .run(alloc)
        .unwrap_or_else(|e| panic!("overlap: {e}"));
    println!("{r:?}");
    assert!(r.cross_stream_frees > 0, "{r:?}");
    let s = order
        .run(alloc)
        .unwrap_or_else(|e| panic!("stream order: {e}"));
    println!("{s:?}");
    assert!(!s.freed_on_other_stream.aliased || !s.freed_on_other_stream.busy_at_alloc);
    alloc.trim().unwrap();
    let st = alloc.stats();
    assert_eq!(st.live_blocks.current, 0, "{st:?}");
    assert_eq!(
        st.reserved_bytes.current,
        alloc.backend().counters().bytes_in_use.current,
        "the allocator's reserved bytes are the backend's count"
    );
}

/// `steps` blocks of 64 KiB to 4 MiB, 64 live, the oldest freed first. Each block is
/// filled on the device when it is handed out and read back before it is freed.
/// Returns the memory calls made after the first quarter of the steps.
fn fifo_with_data(alloc: &dyn Allocator, steps: usize) -> u64 {
    let be = alloc.backend().clone();
    let stream = be.create_stream().unwrap_or(StreamId::DEFAULT);
    let mut rng = Rng::new(5);
    let sizes: Vec<usize> = (0..steps / 4)
        .map(|_| rng.log_uniform(64 << 10, 4 << 20))
        .collect();
    let mut q: VecDeque<(Block, u8)> = VecDeque::new();
    let mut warm = 0;
    let verify = |b: &Block, tag: u8| {
        // Only a sample of each block: the first and last 4 KiB.
        for off in [0, b.requested.saturating_sub(4096)] {
            let n = (b.requested - off).min(4096);
            let mut back = vec![0u8; n];
            be.copy_to_host(&mut back, b.ptr.offset(off), b.stream)
                .unwrap();
            assert!(back.iter().all(|&x| x == tag), "block {b:?} lost its bytes");
        }
    };
    for i in 0..steps {
        if i == steps / 4 {
            warm = be.counters().memory_calls();
        }
        let req = devpool_core::Request::new(sizes[i % sizes.len()]).on_stream(stream);
        let b = alloc.allocate(req).expect("alloc");
        let tag = (i % 251) as u8 + 1;
        be.memset(b.ptr, tag, b.requested, stream).unwrap();
        q.push_back((b, tag));
        if q.len() > 64 {
            let (b, tag) = q.pop_front().unwrap();
            verify(&b, tag);
            alloc.free(b).unwrap();
        }
    }
    let calls = be.counters().memory_calls() - warm;
    for (b, tag) in q {
        verify(&b, tag);
        alloc.free(b).unwrap();
    }
    calls
}

fn gpu() -> Arc<CudaBackend> {
    CudaBackend::new(0).expect("a CUDA device 0")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ring_on_gpu() {
    checks(
        &ring(gpu(), RingConfig::default()),
        OverlapCheck::new(4000, 28),
        StreamOrderCheck::default(),
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ring_in_regions_on_gpu() {
    checks(
        &ring(gpu(), RingConfig::default().mode(RingMode::Region)),
        OverlapCheck::new(4000, 29),
        StreamOrderCheck::default(),
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fifo_stream_on_gpu() {
    let r = ring(gpu(), RingConfig::default());
    let calls = fifo_with_data(&r, 20_000);
    println!("{}", r.detail());
    assert_eq!(calls, 0, "no backend call once warm: {}", r.detail());
    r.trim().unwrap();
    assert_eq!(r.backend().counters().bytes_in_use.current, 0);
}

fn host_mock() -> Arc<MockBackend> {
    MockBackend::shared_with(MockConfig::default().host_backed().capacity(4 << 30))
}

#[test]
fn checks_pass_on_a_host_backed_mock() {
    for mode in [RingMode::Virtual, RingMode::Region] {
        let r = ring(
            host_mock(),
            RingConfig::default().mode(mode).capacity(4 << 20),
        );
        checks(
            &r,
            OverlapCheck::new(300, 11).sizes(128 << 10, 2 << 20),
            StreamOrderCheck {
                block_size: 4096,
                busy_bytes: 4096,
                busy_reps: 2,
            },
        );
    }
    let r = ring(host_mock(), RingConfig::default());
    assert_eq!(fifo_with_data(&r, 2000), 0);
}

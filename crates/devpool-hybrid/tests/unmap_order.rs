//! Pages go back to the device only after every stream that may still use them has
//! passed: the block's own stream (the page layer waits for an event recorded on it)
//! and any stream named with `record_stream` (the stream-ordered layer holds the
//! block until that stream's event completes). The mock refuses, and counts, an
//! unmap under queued work, so a pool that unmapped early fails here.
use devpool_core::{Allocator, Backend, Request};
use devpool_hybrid::{hybrid, HybridConfig, LargeStrategy};
use devpool_testing::{MockBackend, MockConfig};
use devpool_vm::VmConfig;

fn eager(mut cfg: HybridConfig) -> HybridConfig {
    // No cache, a window of one operation: unused pages are given back at once.
    let pages = VmConfig::default()
        .cache(0, 0.0)
        .window_ops(1)
        .map_batch_pages(1);
    match &mut cfg.large {
        LargeStrategy::Tlsf(t) => t.pages = pages,
        LargeStrategy::Buddy(b) => b.pages = pages,
    }
    cfg
}

fn run(cfg: HybridConfig) {
    let mock = MockBackend::shared_with(MockConfig::default().host_backed().manual_events());
    let (s1, s2) = (mock.create_stream().unwrap(), mock.create_stream().unwrap());
    let alloc = hybrid(mock.clone(), eager(cfg));
    let held_before = mock.counters().bytes_in_use.current;
    let b = alloc
        .allocate(Request::new(96 << 20).on_stream(s1))
        .unwrap();
    // Work on both streams writes the block; neither has run yet.
    mock.memset(b.ptr, 1, b.size, s1).unwrap();
    alloc.record_stream(&b, s2).unwrap();
    mock.memset(b.ptr, 2, b.size, s2).unwrap();
    let held = mock.counters().bytes_in_use.current;
    alloc.free(b).unwrap();
    let churn = |n: usize| {
        for _ in 0..n {
            let x = alloc.allocate(Request::new(4 << 20).on_stream(s1)).unwrap();
            alloc.free(x).unwrap();
        }
    };
    churn(8);
    assert_eq!(mock.unmaps_while_busy(), 0);
    assert!(
        mock.counters().bytes_in_use.current >= held,
        "still held: s2 may write it"
    );
    // s2 passes: the block reaches its pool, its pages retire behind an event on s1.
    mock.complete_stream(s2);
    churn(8);
    assert_eq!(mock.unmaps_while_busy(), 0);
    assert!(mock.counters().bytes_in_use.current >= held - (8 << 20));
    // s1 passes: they go.
    mock.complete_stream(s1);
    churn(16);
    assert_eq!(mock.unmaps_while_busy(), 0);
    assert!(
        mock.counters().bytes_in_use.current < held_before + (16 << 20),
        "the block's pages went back: {} held",
        mock.counters().bytes_in_use.current
    );
    alloc.trim().unwrap();
    assert_eq!(mock.counters().bytes_in_use.current, 0);
    assert_eq!(mock.unmaps_while_busy(), 0);
}

#[test]
fn training_preset() {
    run(HybridConfig::training());
}

#[test]
fn buddy_preset() {
    run(HybridConfig::with_buddy());
}

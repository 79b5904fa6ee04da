//! `Tracking`: live blocks, leak reports and the report on drop.
mod common;

use devpool_adaptors::{LeakReport, Tracking};
use devpool_core::{direct, Allocator, Backend, Block, Rng, StreamId};
use devpool_testing::MockBackend;
use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::Arc;

#[test]
fn leaks_are_counted_and_largest_listed() {
    let a = Tracking::new(direct(MockBackend::shared()));
    let sizes = [300usize, 5000, 70_000, 1 << 20, 12];
    let blocks: Vec<Block> = sizes.iter().map(|&s| a.alloc(s).unwrap()).collect();
    a.free(blocks[1]).unwrap();
    a.free(blocks[4]).unwrap();
    let kept = [blocks[0], blocks[2], blocks[3]];
    let r = a.leak_report();
    assert_eq!(r.count, kept.len());
    assert_eq!(
        r.bytes,
        kept.iter().map(|b| b.requested as u64).sum::<u64>()
    );
    assert_eq!(r.granted, kept.iter().map(|b| b.size as u64).sum::<u64>());
    let order: Vec<usize> = r.largest.iter().map(|l| l.block.requested).collect();
    let mut want: Vec<usize> = kept.iter().map(|b| b.requested).collect();
    want.sort_unstable_by(|x, y| y.cmp(x));
    assert_eq!(order, want, "largest first");
    let top = a.leak_report_top(1);
    assert_eq!((top.count, top.largest.len()), (3, 1));
    let text = r.to_string();
    assert!(text.contains("3 live blocks"), "{text}");
    assert!(text.contains(&kept[2].ptr.to_string()), "{text}");
    let mut live = a.live_blocks();
    live.sort_by_key(|b| b.ptr);
    let mut expect = kept.to_vec();
    expect.sort_by_key(|b| b.ptr);
    assert_eq!(live, expect);
    for b in kept {
        a.free(b).unwrap();
    }
    assert!(a.leak_report().is_empty());
}

#[test]
fn drop_reports_leaks_to_the_callback() {
    let seen: Arc<Mutex<Vec<LeakReport>>> = Arc::default();
    let s = seen.clone();
    let mock = MockBackend::shared();
    let a = Tracking::new(direct(mock.clone())).on_leak(move |r| s.lock().push(r.clone()));
    let keep = a.alloc(4096).unwrap();
    let _ = a.alloc(100).unwrap();
    a.free(keep).unwrap();
    drop(a);
    let reports = seen.lock();
    assert_eq!(reports.len(), 1);
    assert_eq!((reports[0].count, reports[0].bytes), (1, 100));
    assert_eq!(reports[0].allocator, "tracking(direct)");
    assert_eq!(
        mock.counters().bytes_in_use.current,
        0,
        "the leaked block went back to the device with the allocator"
    );
}

#[test]
fn no_report_when_everything_was_freed() {
    let seen = Arc::new(Mutex::new(0));
    let s = seen.clone();
    let a = Tracking::new(direct(MockBackend::shared())).on_leak(move |_| *s.lock() += 1);
    let b = a.alloc(10).unwrap();
    a.free(b).unwrap();
    drop(a);
    assert_eq!(*seen.lock(), 0);
}

#[inline(never)]
fn allocate_here(a: &dyn Allocator) -> Block {
    a.alloc(777).unwrap()
}

#[test]
fn backtraces_point_at_the_caller() {
    let a = Tracking::new(direct(MockBackend::shared())).with_backtraces(true);
    let b = allocate_here(&a);
    let r = a.leak_report();
    let bt = r.largest[0]
        .backtrace
        .as_ref()
        .expect("captured")
        .to_string();
    assert!(bt.contains("allocate_here"), "{bt}");
    assert!(r.to_string().contains("allocate_here"));
    a.free(b).unwrap();
    let quiet = Tracking::new(direct(MockBackend::shared()));
    let c = quiet.alloc(1).unwrap();
    assert!(quiet.leak_report().largest[0].backtrace.is_none());
    quiet.free(c).unwrap();
}

#[test]
fn rejected_frees_keep_the_entry() {
    let a = Tracking::new(direct(MockBackend::shared()));
    let b = a.alloc(5000).unwrap();
    assert!(a.free(Block { size: 1 << 20, ..b }).is_err(), "forged size");
    assert!(a
        .deallocate(
            Block {
                device: devpool_core::DeviceId(3),
                ..b
            },
            b.stream
        )
        .is_err());
    assert_eq!(a.live_blocks(), vec![b]);
    a.free(b).unwrap();
    assert!(a.free(b).is_err());
    assert_eq!(a.live_count(), 0);
}

#[test]
fn exact_under_threads_with_reused_addresses() {
    // Addresses come back at once: an entry removed after the free instead of before
    // would drop the entry of the thread that got the address next.
    let a = Arc::new(Tracking::new(common::reuse(MockBackend::shared())));
    let handles: Vec<_> = (0..8u64)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                let mut rng = Rng::new(t);
                let mut live: Vec<Block> = Vec::new();
                for _ in 0..2000 {
                    if live.len() < 8 && rng.below(2) == 0 {
                        live.push(a.alloc(256 << rng.below(2)).unwrap());
                    } else if !live.is_empty() {
                        let b = live.swap_remove(rng.below(live.len() as u64) as usize);
                        a.deallocate(b, StreamId::DEFAULT).unwrap();
                    }
                }
                live
            })
        })
        .collect();
    let live: Vec<Block> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let tracked: HashSet<Block> = a.live_blocks().into_iter().collect();
    assert_eq!(tracked, live.iter().copied().collect::<HashSet<_>>());
    for b in live {
        a.free(b).unwrap();
    }
    assert_eq!(a.live_count(), 0);
}

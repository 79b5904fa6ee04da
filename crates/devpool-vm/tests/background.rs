//! Old addresses of moved memory unmapped on devpool's background thread
//! (`VmConfig::background_unmap`): the layer counts them unmapped when it hands them
//! over, a mapping about to land on one takes back just the chunks under it, a
//! failed unmap is tried again before anything lands there, and a layer that hands
//! them over ends every call as one that unmaps them itself.
use devpool_core::{background, Backend, StreamId};
use devpool_testing::{FaultOn, MockBackend, MockConfig};
use devpool_vm::{PageLayer, RangeId, VmConfig};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

const S: StreamId = StreamId::DEFAULT;

/// Keep the background thread busy until the sender is dropped (or sent to): jobs
/// handed over meanwhile wait in its queue. Returns once the thread is held.
fn hold_worker() -> mpsc::Sender<()> {
    let (release, wait) = mpsc::channel::<()>();
    let (held, is_held) = mpsc::channel::<()>();
    background::submit(Box::new(move || {
        held.send(()).unwrap();
        let _ = wait.recv();
    }));
    is_held.recv().unwrap();
    release
}

/// A layer with six pages of old addresses handed to the background thread while
/// it is held: low at page 0, mid at pages 10..15 whose memory moved from pages
/// 40..46, and the thread's guard. Every page is a chunk of its own.
struct Moved {
    mock: Arc<MockBackend>,
    vm: PageLayer,
    r: RangeId,
    page: u64,
    low: (u64, u64),
    mid: (u64, u64),
    hold: Option<mpsc::Sender<()>>,
}

fn moved() -> Moved {
    let mock = MockBackend::shared_with(MockConfig::default().manual_events());
    let s = mock.create_stream().unwrap();
    let cfg = VmConfig::default()
        .cache(1 << 30, 0.0)
        .map_batch_pages(1)
        .chunk_pages(1)
        .chunk_divisor(1)
        .background_unmap(true);
    let mut vm = PageLayer::new(mock.clone(), cfg);
    let page = vm.page_size();
    let r = vm.reserve(64 * page as usize, page as usize).unwrap();
    let b = vm.base(r);
    let low = (b, b + 3 * page / 2);
    let high = (b + 40 * page, b + 46 * page);
    vm.acquire(r, low, (b, b + 64 * page)).unwrap();
    vm.acquire(r, high, (high.0, b + 64 * page)).unwrap();
    vm.release(r, high, s);
    let mid = (b + 10 * page, b + 15 * page);
    vm.acquire(r, mid, (mid.0, b + 40 * page)).unwrap();
    assert!(vm.detail().moved_pages >= 2, "{}", vm.detail());
    mock.complete_stream(s);
    let hold = hold_worker();
    // Frees sweep the old addresses whose stream has passed: handed over.
    let shared = (b + 3 * page / 2, b + 2 * page);
    for _ in 0..16 {
        vm.acquire(r, shared, (shared.0, b + 10 * page)).unwrap();
        vm.release(r, shared, S);
    }
    Moved {
        mock,
        vm,
        r,
        page,
        low,
        mid,
        hold: Some(hold),
    }
}

impl Moved {
    fn live(&self) -> Vec<(RangeId, u64, u64)> {
        vec![
            (self.r, self.low.0, self.low.1),
            (self.r, self.mid.0, self.mid.1),
        ]
    }

    /// A page of old addresses: counted as unmapped, still mapped in the mock.
    fn old_page(&self) -> u64 {
        let b = self.vm.base(self.r);
        (40..46)
            .map(|q| b + q * self.page)
            .find(|&a| self.vm.missing(self.r, a, a + self.page) == 1)
            .expect("a page moved away")
    }
}

#[test]
fn old_addresses_go_to_the_thread_and_a_block_takes_back_only_its_own() {
    let mut m = moved();
    let d = m.vm.detail();
    assert_eq!(
        d.moved_pages, 0,
        "counted as unmapped when handed over: {d}"
    );
    let handed = d.unmapping_pages;
    assert!(handed >= 2, "{handed} pages handed over");
    m.vm.verify(m.live()).unwrap();
    let unmapped = m.mock.counters().pages_unmapped;
    // A block on one old address: its chunk is unmapped here, no other.
    let q = m.old_page();
    let onto = (q, q + m.page);
    m.vm.acquire(m.r, onto, (q, m.vm.base(m.r) + 64 * m.page))
        .unwrap();
    let c = m.mock.counters();
    assert_eq!(
        c.pages_unmapped - unmapped,
        1,
        "only the page under the block"
    );
    assert_eq!(
        c.background_calls, 0,
        "the thread is held: nothing ran there"
    );
    assert_eq!(m.vm.detail().unmapping_pages, handed - 1);
    let mut live = m.live();
    live.push((m.r, onto.0, onto.1));
    m.vm.verify(live.clone()).unwrap();
    // Let the thread go: it unmaps the rest.
    m.hold.take();
    background::quiesce();
    let c = m.mock.counters();
    assert_eq!(c.pages_unmapped - unmapped, handed);
    assert!(c.background_calls >= 1, "{c:?}");
    m.vm.finish_unmapping().unwrap();
    assert_eq!(m.vm.detail().unmapping_pages, 0);
    m.vm.verify(live).unwrap();
    assert_eq!(m.vm.held().current, m.mock.counters().bytes_in_use.current);
}

#[test]
fn an_unmap_the_driver_refuses_is_tried_again_before_anything_lands_there() {
    let mut m = moved();
    let handed = m.vm.detail().unmapping_pages;
    // The thread's first unmap fails: its pages stay handed over, still mapped.
    m.mock.fail_nth(FaultOn::Unmap, 1);
    m.hold.take();
    background::quiesce();
    assert_eq!(m.mock.injected_faults(), 1, "the fault fired");
    m.vm.verify(m.live()).unwrap();
    // A block on its pages: tried again here, and refused again this time.
    let hold = hold_worker();
    let before = m.vm.detail();
    m.mock.fail_nth(FaultOn::Unmap, 1);
    // The job that failed lies somewhere in 40..46: a block over all of it meets it.
    let b = m.vm.base(m.r);
    let over = (b + 40 * m.page, b + 46 * m.page);
    let err = m.vm.acquire(m.r, over, (over.0, b + 64 * m.page));
    assert!(err.is_err(), "the unmap under the block failed again");
    assert_eq!(m.mock.injected_faults(), 2, "the second fault fired");
    // Nothing counted for the refused block (pages mapped on the way stay, as cache).
    m.vm.verify(m.live()).unwrap();
    assert_eq!(m.vm.detail().used_pages, before.used_pages);
    // Once the driver takes it, the block lands.
    m.vm.acquire(m.r, over, (over.0, b + 64 * m.page)).unwrap();
    drop(hold);
    background::quiesce();
    m.vm.finish_unmapping().unwrap();
    let mut live = m.live();
    live.push((m.r, over.0, over.1));
    m.vm.verify(live).unwrap();
    assert_eq!(m.vm.detail().unmapping_pages, 0);
    assert!(m.mock.counters().pages_unmapped >= handed);
    assert_eq!(m.vm.held().current, m.mock.counters().bytes_in_use.current);
}

#[test]
fn memory_goes_back_only_once_old_addresses_are_gone() {
    let mut m = moved();
    assert!(m.vm.detail().unmapping_pages > 0);
    // A trim while the thread is held: the jobs are taken back and done here, so no
    // memory stays held by an old mapping the pool no longer counts.
    m.vm.release(m.r, m.mid, S);
    m.vm.release(m.r, m.low, S);
    m.vm.trim().unwrap();
    assert_eq!(m.vm.detail().unmapping_pages, 0);
    assert_eq!(
        m.mock.counters().bytes_in_use.current,
        0,
        "everything went back"
    );
    m.vm.verify([]).unwrap();
    m.hold.take();
}

/// A layer's detail without the pages still with the thread (the thread's pace).
fn seen(vm: &PageLayer) -> String {
    let mut d = vm.detail();
    d.unmapping_pages = 0;
    format!("{d:?}")
}

#[derive(Clone, Debug)]
enum Op {
    /// A block at this offset (in 256-byte units) of this length.
    Acquire(u32, u32),
    /// Release the n-th live block.
    Release(usize),
    /// The stream passes its queued work.
    Complete,
    /// Trim without waiting.
    TrimNowait,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..(56 * 8192), 1u32..(6 * 8192)).prop_map(|(a, l)| Op::Acquire(a, l)),
        4 => any::<usize>().prop_map(Op::Release),
        2 => Just(Op::Complete),
        1 => Just(Op::TrimNowait),
    ]
}

/// Pages the threaded layers of the model test handed over, all cases together.
static HANDED: AtomicU64 = AtomicU64::new(0);

fn same_as_unmapping_here(
    ops: Vec<Op>,
    floor: usize,
    window: u64,
    chunk: usize,
) -> Result<(), TestCaseError> {
    {
        let make = |background| {
            let mock = MockBackend::shared_with(MockConfig::default().manual_events());
            let s = mock.create_stream().unwrap();
            let page = mock.granularity();
            let cfg = VmConfig::default()
                .map_batch_pages(1)
                .chunk_pages(chunk)
                .chunk_divisor(1)
                .cache(floor * page, 0.0)
                .window_ops(window)
                .background_unmap(background);
            let mut vm = PageLayer::new(mock.clone(), cfg);
            let r = vm.reserve(64 * page, page).unwrap();
            (mock, vm, r, s)
        };
        let (m1, mut plain, r1, s1) = make(false);
        let (m2, mut threaded, r2, s2) = make(true);
        let page = plain.page_size();
        let (base, end) = (plain.base(r1), plain.base(r1) + 64 * page);
        prop_assert_eq!(base, threaded.base(r2));
        let mut live: BTreeMap<u64, u64> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Acquire(a, l) => {
                    let lo = base + u64::from(a) * 256;
                    let hi = (lo + u64::from(l) * 256).min(end);
                    if lo >= hi {
                        continue;
                    }
                    let prev_end = live.range(..=lo).next_back().map_or(base, |(_, &e)| e);
                    let next = live.range(lo..).next().map_or(end, |(&b, _)| b);
                    if prev_end > lo || next < hi {
                        continue;
                    }
                    let x = plain
                        .acquire(r1, (lo, hi), (prev_end, next))
                        .map_err(|e| e.to_string());
                    let y = threaded
                        .acquire(r2, (lo, hi), (prev_end, next))
                        .map_err(|e| e.to_string());
                    prop_assert_eq!(&x, &y);
                    if x.is_ok() {
                        live.insert(lo, hi);
                    }
                }
                Op::Release(n) => {
                    if live.is_empty() {
                        continue;
                    }
                    let lo = *live.keys().nth(n % live.len()).unwrap();
                    let hi = live.remove(&lo).unwrap();
                    plain.release(r1, (lo, hi), s1);
                    threaded.release(r2, (lo, hi), s2);
                }
                Op::Complete => {
                    m1.complete_stream(s1);
                    m2.complete_stream(s2);
                }
                Op::TrimNowait => {
                    plain.trim_nowait().unwrap();
                    threaded.trim_nowait().unwrap();
                }
            }
            plain
                .verify(live.iter().map(|(&a, &b)| (r1, a, b)))
                .map_err(TestCaseError::fail)?;
            threaded
                .verify(live.iter().map(|(&a, &b)| (r2, a, b)))
                .map_err(TestCaseError::fail)?;
            HANDED.fetch_add(threaded.detail().unmapping_pages, Ordering::Relaxed);
            prop_assert_eq!(seen(&plain), seen(&threaded));
            prop_assert_eq!(plain.held(), threaded.held());
            // Once the thread's jobs are done, the mocks hold the same memory and
            // pages, and no unmap was refused for work still queued.
            background::quiesce();
            let (c1, c2) = (m1.counters(), m2.counters());
            prop_assert_eq!(c1.bytes_in_use, c2.bytes_in_use);
            prop_assert_eq!(
                (
                    c1.map_calls,
                    c1.alias_calls,
                    c1.pages_mapped,
                    c1.chunks_created
                ),
                (
                    c2.map_calls,
                    c2.alias_calls,
                    c2.pages_mapped,
                    c2.chunks_created
                )
            );
            prop_assert_eq!(
                (c1.pages_unmapped, c1.chunks_released),
                (c2.pages_unmapped, c2.chunks_released)
            );
            prop_assert_eq!(m2.unmaps_while_busy(), 0);
        }
    }
    Ok(())
}

#[test]
fn a_layer_that_hands_old_addresses_over_ends_every_call_as_one_that_does_not() {
    let strategy = (
        proptest::collection::vec(op(), 1..200),
        0usize..3,
        3u64..24,
        1usize..4,
    );
    proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(64))
        .run(&strategy, |(ops, floor, window, chunk)| {
            same_as_unmapping_here(ops, floor, window, chunk)
        })
        .unwrap();
    // The model must have exercised the thread: old addresses were handed over.
    assert!(
        HANDED.load(Ordering::Relaxed) > 0,
        "no old address was handed over"
    );
}

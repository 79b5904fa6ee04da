//! Random blocks against the page layer: after every step the bookkeeping matches
//! the live blocks, every byte of a live block is mapped (host-backed writes reach
//! it), the layer's held bytes are the backend's, and nothing is left at the end.
use devpool_core::Backend;
use devpool_testing::{MockBackend, MockConfig};
use devpool_vm::{PageLayer, VmConfig};
use proptest::prelude::*;
use std::collections::BTreeMap;

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
        4 => (0u32..(64 * 8192), 1u32..(6 * 8192)).prop_map(|(a, l)| Op::Acquire(a, l)),
        3 => any::<usize>().prop_map(Op::Release),
        1 => Just(Op::Complete),
        1 => Just(Op::TrimNowait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn layer_matches_the_live_blocks(
        ops in proptest::collection::vec(op(), 1..120),
        batch in 1usize..6,
        chunk in 1usize..6,
        divisor in 1usize..20,
        floor in 0usize..4,
        window in 4u64..40,
        reserve in prop_oneof![3 => Just(0usize), 1 => 1usize..24],
        burst in prop_oneof![Just(0u64), Just(devpool_vm::BURST_ON), 1u64..8],
    ) {
        let mock = MockBackend::shared_with(MockConfig::default().host_backed().manual_events());
        let s = mock.create_stream().unwrap();
        let page = mock.granularity();
        let cfg = VmConfig::default()
            .map_batch_pages(batch)
            .chunk_pages(chunk)
            .chunk_divisor(divisor)
            .cache(floor * page, 0.0)
            .window_ops(window)
            .reserve(reserve * page)
            .burst_ops(burst);
        let mut vm = PageLayer::new(mock.clone(), cfg);
        let r = vm.reserve(80 * page, page).unwrap();
        let base = vm.base(r);
        let end = base + 80 * page as u64;
        // Live blocks by first byte: end byte, and the byte each was filled with.
        let mut live: BTreeMap<u64, u64> = BTreeMap::new();
        let mut tags: BTreeMap<u64, u8> = BTreeMap::new();
        let mut n = 0u8;
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
                    vm.acquire(r, (lo, hi), (prev_end, next)).unwrap();
                    n = n % 250 + 1;
                    mock.memset(devpool_core::DevicePtr(lo), n, (hi - lo) as usize, s)
                        .expect("every byte of a live block is mapped");
                    live.insert(lo, hi);
                    tags.insert(lo, n);
                }
                Op::Release(n) => {
                    if live.is_empty() {
                        continue;
                    }
                    let lo = *live.keys().nth(n % live.len()).unwrap();
                    let hi = live.remove(&lo).unwrap();
                    tags.remove(&lo);
                    vm.release(r, (lo, hi), s);
                }
                Op::Complete => mock.complete_stream(s),
                Op::TrimNowait => {
                    vm.trim_nowait().unwrap();
                    let d = vm.detail();
                    if d.moved_pages == 0 {
                        // (While old addresses of moved memory wait for the stream,
                        // nothing retires: the memory may live at a free chunk.)
                        prop_assert_eq!(d.free_chunk_pages, 0, "every free chunk retires");
                    }
                }
            }
            vm.verify(live.iter().map(|(&a, &b)| (r, a, b))).map_err(TestCaseError::fail)?;
            // Every live block still reads back its own bytes, at both ends.
            for (&lo, &hi) in &live {
                let mut b = [0u8; 1];
                for at in [lo, hi - 1] {
                    mock.copy_to_host(&mut b, devpool_core::DevicePtr(at), s).unwrap();
                    prop_assert_eq!(b[0], tags[&lo], "block at {:#x} lost its bytes", lo);
                }
            }
            prop_assert_eq!(vm.held().current, mock.counters().bytes_in_use.current);
        }
        for (lo, hi) in std::mem::take(&mut live) {
            vm.release(r, (lo, hi), s);
        }
        vm.trim().unwrap();
        prop_assert_eq!(mock.counters().bytes_in_use.current, 0);
        prop_assert!(vm.unreserve(r).unwrap());
    }
}

//! The proptest model test: random operation sequences against a model of what is
//! live and what is waiting for another stream, on a mock whose events complete
//! only when the sequence says so.

use super::{overlaps, Make};
use crate::{MockBackend, MockConfig};
use devpool_core::{Backend, Block, EventId, Request, StreamId};
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        size: usize,
        align_log: u8,
        stream: u8,
    },
    Free {
        pick: usize,
        other_stream: bool,
    },
    /// Declare a live block used on another stream.
    Record {
        pick: usize,
    },
    /// The device finishes the work queued on one stream (or on all).
    Complete {
        stream: Option<u8>,
    },
    Trim,
}

/// A free waiting for other streams: the block, and probe events the test recorded
/// on each of those streams just before the free and just after it. Events on a
/// stream complete in order, so while a `before` probe is not done the allocator's
/// event is not done either and the block must not be reused; once every `after`
/// probe is done, so is the allocator's event and the next poll releases the block.
struct Pending {
    block: Block,
    before: Vec<EventId>,
    after: Vec<EventId>,
}

/// Random operation sequences against a model: no overlap with live blocks nor with
/// blocks whose cross-stream free has not completed, alignments up to 64 KiB always
/// served, stats add up, everything returned. Requests stay within `max` bytes.
/// Runs `cases` proptest cases.
pub fn model_test(make: Make, max: usize, cases: u32) {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};

    let op = prop_oneof![
        6 => (0usize..=22, 0usize..(1 << 22), 8u8..=16, 0u8..3).prop_map(move |(shift, r, align_log, stream)| {
            Op::Alloc { size: (r >> (22 - shift.min(22))).min(max), align_log, stream }
        }),
        4 => (any::<usize>(), any::<bool>()).prop_map(|(pick, other_stream)| Op::Free { pick, other_stream }),
        1 => any::<usize>().prop_map(|pick| Op::Record { pick }),
        1 => proptest::option::of(0u8..5).prop_map(|stream| Op::Complete { stream }),
        1 => Just(Op::Trim),
    ];
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    runner
        .run(&proptest::collection::vec(op, 1..120), |ops| {
            let mock = MockBackend::shared_with(MockConfig::default().manual_events());
            let a = make(mock.clone());
            // Stream `i` of the operations: 0 the default stream, the others made by
            // the backend.
            let st = super::streams(&mock, 5);
            let index = |s: StreamId| st.iter().position(|&x| x == s).unwrap_or(0);
            let fail =
                |what: &str, e: &dyn std::fmt::Display| TestCaseError::fail(format!("{what}: {e}"));
            let mut model: BTreeMap<u64, Block> = BTreeMap::new();
            // Streams each live block was declared used on.
            let mut recorded: BTreeMap<u64, Vec<StreamId>> = BTreeMap::new();
            let mut pending: Vec<Pending> = Vec::new();
            let (mut allocs, mut frees) = (0u64, 0u64);
            let probe = |s: StreamId| -> Result<EventId, TestCaseError> {
                let e = mock.create_event().map_err(|e| fail("probe", &e))?;
                mock.record_event(e, s).map_err(|e| fail("probe", &e))?;
                Ok(e)
            };
            let all_done = |v: &[EventId]| v.iter().all(|&e| mock.event_done(e).unwrap_or(true));
            let may_be_done = |p: &Pending| all_done(&p.before);
            let surely_done = |p: &Pending| all_done(&p.after);
            for op in ops {
                match op {
                    Op::Alloc {
                        size,
                        align_log,
                        stream,
                    } => {
                        let align = 1usize << align_log;
                        let req = Request::new(size)
                            .with_align(align)
                            .on_stream(st[stream as usize]);
                        let b = a
                            .allocate(req)
                            .map_err(|e| fail(&format!("alloc {size} align {align}"), &e))?;
                        prop_assert!(b.ptr.is_aligned(align.max(256)));
                        prop_assert!(b.size >= size.max(1));
                        if let Some((_, prev)) = model.range(..=b.ptr.0).next_back() {
                            prop_assert!(!overlaps(prev, &b), "overlap {prev:?} {b:?}");
                        }
                        if let Some((_, next)) = model.range(b.ptr.0..).next() {
                            prop_assert!(!overlaps(&b, next), "overlap {b:?} {next:?}");
                        }
                        for p in &pending {
                            prop_assert!(
                                may_be_done(p) || !overlaps(&b, &p.block),
                                "{b:?} overlaps {:?}, whose free waits for another stream",
                                p.block
                            );
                        }
                        model.insert(b.ptr.0, b);
                        allocs += 1;
                    }
                    Op::Free { pick, other_stream } => {
                        let Some(b) = super::take_pick(&mut model, pick) else {
                            continue;
                        };
                        let key = b.ptr.0;
                        let s = if other_stream {
                            st[index(b.stream) + 1]
                        } else {
                            b.stream
                        };
                        let mut waits = recorded.remove(&key).unwrap_or_default();
                        if s != b.stream && !waits.contains(&s) {
                            waits.push(s);
                        }
                        let before = waits
                            .iter()
                            .map(|&w| probe(w))
                            .collect::<Result<Vec<_>, _>>()?;
                        a.deallocate(b, s).map_err(|e| fail("free", &e))?;
                        let after = waits
                            .iter()
                            .map(|&w| probe(w))
                            .collect::<Result<Vec<_>, _>>()?;
                        if !waits.is_empty() {
                            pending.push(Pending {
                                block: b,
                                before,
                                after,
                            });
                        }
                        frees += 1;
                    }
                    Op::Record { pick } => {
                        if model.is_empty() {
                            continue;
                        }
                        let key = *model.keys().nth(pick % model.len()).unwrap();
                        let b = model[&key];
                        let s = st[index(b.stream) + 2];
                        a.record_stream(&b, s)
                            .map_err(|e| fail("record_stream", &e))?;
                        let v = recorded.entry(key).or_default();
                        if !v.contains(&s) {
                            v.push(s);
                        }
                    }
                    Op::Complete { stream } => match stream {
                        Some(s) => mock.complete_stream(st[s as usize]),
                        None => mock.complete_all(),
                    },
                    Op::Trim => {
                        // Trim first releases the waiting frees whose events are
                        // done, in the order they were made (a release may wait
                        // behind an earlier free that is not done yet).
                        let released = pending.iter().take_while(|p| surely_done(p)).count();
                        pending.drain(..released);
                        a.trim().map_err(|e| fail("trim", &e))?;
                    }
                }
                // Blocks whose free is pending may still count as live until they
                // are released: between none and all of them.
                let s = a.stats();
                let live = model.len() as u64;
                prop_assert!(
                    s.live_blocks.current >= live
                        && s.live_blocks.current <= live + pending.len() as u64,
                    "{} live blocks, model {live} and {} pending",
                    s.live_blocks.current,
                    pending.len()
                );
                let waiting = s.live_blocks.current - live;
                prop_assert_eq!(s.allocations, allocs);
                prop_assert_eq!(
                    s.frees + waiting,
                    frees,
                    "a free is counted once, when released"
                );
                let model_live: u64 = model.values().map(|b| b.requested as u64).sum();
                let pending_live: u64 = pending.iter().map(|p| p.block.requested as u64).sum();
                prop_assert!(
                    s.live_bytes.current >= model_live
                        && s.live_bytes.current <= model_live + pending_live
                );
                if waiting == 0 {
                    prop_assert_eq!(s.live_bytes.current, model_live);
                    prop_assert_eq!(
                        s.allocated_bytes.current,
                        model.values().map(|b| b.size as u64).sum::<u64>()
                    );
                }
                prop_assert!(s.reserved_bytes.current >= s.allocated_bytes.current);
            }
            mock.complete_all();
            a.trim().map_err(|e| fail("trim", &e))?;
            prop_assert_eq!(
                a.stats().live_blocks.current,
                model.len() as u64,
                "every pending free released"
            );
            for (_, b) in std::mem::take(&mut model) {
                a.free(b).map_err(|e| fail("final free", &e))?;
            }
            mock.complete_all();
            a.trim().map_err(|e| fail("trim", &e))?;
            prop_assert_eq!(a.stats().reserved_bytes.current, 0);
            prop_assert_eq!(mock.counters().bytes_in_use.current, 0);
            Ok(())
        })
        .unwrap();
}

//! Where the memory held at the peak sits: replay a trace through a slab pool (small
//! requests) and a TLSF pool (the rest), side by side as the hybrid routes them, and
//! print, at the moment the backend's held bytes peak, what each part holds.

use devpool_core::{human_bytes, Backend, Block, Pool, Request};
use devpool_slab::{SlabConfig, SlabPool};
use devpool_testing::MockBackend;
use devpool_tlsf::{TlsfConfig, TlsfPool};
use devpool_trace::{Action, Trace};
use std::collections::HashMap;

pub fn run(trace: &Trace, small_max: usize, tlsf: TlsfConfig) {
    let mock = MockBackend::shared();
    let slab = SlabPool::new(mock.clone(), SlabConfig::geometric(4, small_max.max(256)));
    let large = TlsfPool::new(mock.clone(), tlsf);
    let mut live: HashMap<u64, (bool, Block)> = HashMap::new();
    let (mut live_bytes, mut peak_live, mut peak_held) = (0u64, 0u64, 0u64);
    let mut at_peak = String::new();
    for ev in &trace.events {
        match ev.action {
            Action::Allocate => {
                let small = ev.size <= small_max;
                let req = Request::new(ev.size);
                let b = if small {
                    slab.allocate(&req)
                } else {
                    large.allocate(&req)
                };
                if let Ok(b) = b {
                    live_bytes += ev.size as u64;
                    live.insert(ev.ptr, (small, b));
                }
            }
            Action::Free => {
                if let Some((small, b)) = live.remove(&ev.ptr) {
                    live_bytes -= b.requested as u64;
                    let _ = if small {
                        slab.deallocate(&b)
                    } else {
                        large.deallocate(&b)
                    };
                }
            }
            Action::AllocateFailure => {}
        }
        peak_live = peak_live.max(live_bytes);
        let held = mock.counters().bytes_in_use.current;
        if held > peak_held {
            peak_held = held;
            let s = slab.stats();
            let t = large.stats();
            let d = large.detail();
            let p = d.pages;
            at_peak = format!(
                "live {} | slab: live {} in {} held | large: live {} granted {} in {} mapped ({} pages: {} used, {} unused of which {} in free chunks, {} retiring), largest free block {}",
                human_bytes(live_bytes),
                human_bytes(s.live_bytes.current),
                human_bytes(s.reserved_bytes.current),
                human_bytes(t.live_bytes.current),
                human_bytes(t.allocated_bytes.current),
                human_bytes(t.reserved_bytes.current),
                p.mapped_pages,
                p.used_pages,
                p.unused_pages,
                p.free_chunk_pages,
                p.retiring_pages,
                human_bytes(d.largest_free_block),
            );
        }
    }
    println!(
        "{}: peak live {}, peak held {} ({:.4})\n  at the peak: {at_peak}",
        trace.name,
        human_bytes(peak_live),
        human_bytes(peak_held),
        peak_held as f64 / peak_live.max(1) as f64
    );
}

//! [`VmDetail`]: what a page layer holds, and [`PageLayer::verify`], the check of
//! its bookkeeping against the live blocks.

use crate::layer::{PageLayer, RangeId};
use devpool_core::human_bytes;
use std::fmt;

/// A snapshot of a page layer's ranges, pages and backend calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmDetail {
    /// Reserved ranges.
    pub ranges: usize,
    /// Bytes of address space they span.
    pub range_bytes: u64,
    /// Page size.
    pub page_size: u64,
    /// Pages mapped (retiring ones included).
    pub mapped_pages: u64,
    /// Pages some live block touches.
    pub used_pages: u64,
    /// Pages mapped that no live block touches and that are not retiring: the cache.
    pub unused_pages: u64,
    /// Unused pages in chunks that no live block touches: those the policy can give
    /// back. The rest of the unused pages share a chunk with a used page.
    pub free_chunk_pages: u64,
    /// Pages chosen for unmapping and waiting for the streams that used them.
    pub retiring_pages: u64,
    /// Retiring pages whose memory moved to another address of the layer (they
    /// hold none of their own).
    pub moved_pages: u64,
    /// Physical chunks mapped now.
    pub chunks: u64,
    /// Backend `map_chunks` calls, and the chunks they made.
    pub map_calls: u64,
    /// Chunks made in all.
    pub chunks_made: u64,
    /// Backend `unmap` calls.
    pub unmap_calls: u64,
    /// Backend `alias` calls: unused memory moved to where a block needed it.
    pub move_calls: u64,
    /// Events recorded before unmapping.
    pub events_recorded: u64,
    /// Times the layer waited for an event (trim, out of memory), or for the whole
    /// device (a stream refused an event).
    pub event_waits: u64,
    /// Streams forgotten because they refused an event (the program destroyed them
    /// after freeing blocks on them); each cost one wait for the whole device.
    pub streams_dropped: u64,
    /// Host bytes of the layer's own bookkeeping.
    pub metadata_bytes: usize,
}

impl fmt::Display for VmDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} mapped unused in {} pages of {}; {} retiring; {} mapped in all in {} chunks; {} map, {} move and {} unmap calls",
            human_bytes(self.unused_pages * self.page_size),
            self.unused_pages,
            human_bytes(self.page_size),
            human_bytes(self.retiring_pages * self.page_size),
            human_bytes(self.mapped_pages * self.page_size),
            self.chunks,
            self.map_calls,
            self.move_calls,
            self.unmap_calls
        )
    }
}

impl PageLayer {
    /// Unused pages in chunks that no live block touches (and that are not
    /// retiring), counted from the bits.
    pub(crate) fn free_chunk_pages(&self) -> u64 {
        let mut free = 0u64;
        for rg in self.ranges.iter().flatten() {
            let mut p = rg.head.next(0, rg.top, true);
            while p < rg.top {
                let e = p + rg.chunk_len[p] as usize;
                if rg.chunk_free(p, e) {
                    free += (e - p) as u64;
                }
                p = rg.head.next(e, rg.top, true);
            }
        }
        free
    }

    /// A snapshot of the layer.
    pub fn detail(&self) -> VmDetail {
        debug_assert!(
            self.settled(),
            "finish a deferred release before reading pages"
        );
        let ranges = self.ranges.iter().flatten();
        let chunks = ranges
            .clone()
            .map(|r| r.head.count(0, r.pages()) as u64)
            .sum();
        let metadata_bytes = ranges
            .clone()
            .map(|r| r.pages() * 4 + 4 * r.pages().div_ceil(64) * 8)
            .sum::<usize>()
            + self.retire.events() * 8;
        VmDetail {
            ranges: ranges.clone().count(),
            range_bytes: ranges.map(|r| r.size).sum(),
            page_size: self.page_size(),
            mapped_pages: self.n.mapped,
            used_pages: self.n.used,
            unused_pages: self.n.unused,
            free_chunk_pages: self.free_chunk_pages(),
            retiring_pages: self.n.retiring,
            moved_pages: self.n.moved,
            chunks,
            map_calls: self.calls.maps,
            chunks_made: self.calls.chunks,
            unmap_calls: self.calls.unmaps,
            move_calls: self.calls.moves,
            events_recorded: self.calls.events,
            event_waits: self.calls.waits,
            streams_dropped: self.calls.streams_dropped,
            metadata_bytes,
        }
    }

    /// Check the layer's bookkeeping against `live`, the (range, first byte, end
    /// byte) of every live block: each page's use count, the bitmaps, the counts and
    /// the bytes held. For tests; returns what is wrong.
    pub fn verify(
        &self,
        live: impl IntoIterator<Item = (RangeId, u64, u64)>,
    ) -> std::result::Result<(), String> {
        if !self.settled() {
            return Err("a deferred release is not settled".into());
        }
        // Per page: blocks touching it in part, and blocks covering it whole.
        let mut uses: Vec<Vec<(u32, u32)>> = self
            .ranges
            .iter()
            .map(|r| vec![(0, 0); r.as_ref().map_or(0, |r| r.pages())])
            .collect();
        for (r, lo, hi) in live {
            let rg = self
                .range(r)
                .map_err(|_| format!("live block in unknown range {r:?}"))?;
            if !rg.holds(lo, hi) || lo >= hi {
                return Err(format!("live block {lo:#x}..{hi:#x} outside its range"));
            }
            let (a, b) = rg.touched(self.shift, lo, hi);
            let (f0, f1) = rg.inside(self.shift, lo, hi);
            for (p, u) in uses[r.index()][a..b].iter_mut().enumerate() {
                if (f0..f1).contains(&(a + p)) {
                    u.1 += 1;
                } else {
                    u.0 += 1;
                }
            }
        }
        let (mut mapped, mut used, mut retiring, mut moved) = (0u64, 0u64, 0u64, 0u64);
        for (i, rg) in self.ranges.iter().enumerate() {
            let Some(rg) = rg else { continue };
            if rg.mapped.next(rg.top, rg.pages(), true) < rg.pages() {
                return Err(format!("range {i}: a page above the top is mapped"));
            }
            if !rg.mapped.summary_agrees() {
                return Err(format!("range {i}: the summary of mapped words is wrong"));
            }
            for (p, &(want, whole)) in uses[i].iter().enumerate() {
                let (m, u, h, t) = (
                    rg.mapped.get(p),
                    rg.used.get(p),
                    rg.head.get(p),
                    rg.retiring.get(p),
                );
                if rg.uses[p] != want {
                    return Err(format!(
                        "range {i} page {p}: {} uses counted, {want} live blocks touch it in part",
                        rg.uses[p]
                    ));
                }
                if whole > 1 || (whole == 1 && want > 0) {
                    return Err(format!(
                        "range {i} page {p}: a block covers it whole and {} others touch it",
                        whole + want - 1
                    ));
                }
                if u != (want > 0 || whole > 0) {
                    return Err(format!("range {i} page {p}: used bit wrong"));
                }
                if u && !m {
                    return Err(format!("range {i} page {p}: used but not mapped"));
                }
                if (h || t) && !m {
                    return Err(format!(
                        "range {i} page {p}: chunk or retiring bit unmapped"
                    ));
                }
                if t && u {
                    return Err(format!("range {i} page {p}: retiring but used"));
                }
                let mv = rg.moved.get(p);
                if mv && !t {
                    return Err(format!("range {i} page {p}: moved but not retiring"));
                }
                moved += u64::from(mv);
                if m && (p == 0 || !rg.mapped.get(p - 1)) && !h {
                    return Err(format!("range {i} page {p}: a mapped run starts mid-chunk"));
                }
                if h {
                    let n = rg.pages();
                    let end = rg
                        .head
                        .next(p + 1, n, true)
                        .min(rg.mapped.next(p + 1, n, false));
                    if rg.chunk_len[p] as usize != end - p {
                        return Err(format!(
                            "range {i} chunk at page {p}: {} pages counted, {} mapped",
                            rg.chunk_len[p],
                            end - p
                        ));
                    }
                    let (c, e) = rg.chunk_of(p);
                    if rg.retiring.count(c, e) % (e - c) != 0 {
                        return Err(format!("range {i} chunk at page {c} partly retiring"));
                    }
                }
                mapped += u64::from(m);
                used += u64::from(u);
                retiring += u64::from(t);
            }
        }
        let n = self.n;
        if (mapped, used, retiring, mapped - used - retiring, moved)
            != (n.mapped, n.used, n.retiring, n.unused, n.moved)
        {
            return Err(format!(
                "counts {n:?}; bitmaps: {mapped} mapped, {used} used, {retiring} retiring, {moved} moved"
            ));
        }
        let queued: u64 = self.retire.chunks().map(|c| (c.2 - c.1) as u64).sum();
        if queued != retiring {
            return Err(format!(
                "{queued} pages queued for unmapping, {retiring} marked retiring"
            ));
        }
        if self.held.current != (mapped - moved) << self.shift {
            return Err(format!(
                "{} bytes held, {mapped} pages mapped of which {moved} moved",
                self.held.current
            ));
        }
        Ok(())
    }
}

//! Spans: the pieces of address space the pool manages, and taking them from and
//! giving them back to the backend (reserved ranges of the page layer in virtual
//! mode, regions in region mode).

use crate::pool::{Inner, TlsfPool};
use devpool_core::{align_up, BackendError, DevicePtr, Error, Result};
use devpool_vm::RangeId;

/// One reserved range or region.
#[derive(Debug)]
pub(crate) struct Span {
    /// First address.
    pub base: u64,
    /// Bytes.
    pub size: u64,
    /// The page layer's range (virtual mode only).
    pub range: Option<RangeId>,
}

/// The page layer's range of span `span`: `None` for a region, or a span that is not
/// there.
#[inline]
pub(crate) fn range_of(spans: &[Option<Span>], span: u32) -> Option<RangeId> {
    match spans.get(span as usize) {
        Some(Some(Span { range: Some(r), .. })) => Some(*r),
        _ => None,
    }
}

fn oom(requested: usize, backend: &dyn devpool_core::Backend) -> Error {
    let (free, total) = backend.mem_info().unwrap_or((0, 0));
    Error::Backend(BackendError::OutOfMemory {
        requested,
        free,
        total,
    })
}

impl TlsfPool {
    /// Take a new span from the backend with room for a free block of `need` bytes.
    pub(crate) fn grow(&self, g: &mut Inner, need: u64) -> Result<()> {
        let page = self.page;
        let rounded =
            align_up(need as usize, page as usize).ok_or(Error::too_large(need as usize))?;
        if self.is_virtual {
            let total = match self.backend.mem_info() {
                Ok((_, total)) => total,
                Err(_) => 0,
            };
            if total > 0 && rounded as u64 > total {
                return Err(oom(need as usize, &*self.backend));
            }
            let default = match self.cfg.range_size {
                Some(s) => s,
                None if total > 0 => usize::try_from(total).unwrap_or(usize::MAX),
                None => 64 << 30,
            };
            let size = align_up(default.max(rounded), page as usize).unwrap_or(rounded);
            let r = g.vm.reserve(size, page as usize)?;
            let base = g.vm.base(r);
            self.add_span(g, DevicePtr(base), size, Some(r));
        } else {
            // A failing release leaves the regions held and counted: nothing to undo.
            let _ = self.enforce_regions(g, need);
            let chunk = align_up(self.cfg.region_chunk.max(1), page as usize).unwrap_or(rounded);
            let size = chunk.max(rounded);
            match self.backend.alloc_region(size) {
                Ok(ptr) => {
                    self.counters.on_reserve(size);
                    self.add_span(g, ptr, size, None);
                    return Ok(());
                }
                Err(BackendError::OutOfMemory { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            // Out of memory: give back wholly free regions, then ask for the exact size.
            self.release_free_spans(g, usize::MAX, false)?;
            let ptr = self.backend.alloc_region(rounded)?;
            self.counters.on_reserve(rounded);
            self.add_span(g, ptr, rounded, None);
        }
        Ok(())
    }

    fn add_span(&self, g: &mut Inner, ptr: DevicePtr, size: usize, range: Option<RangeId>) {
        let span = Span {
            base: ptr.0,
            size: size as u64,
            range,
        };
        let id = match g.spans.iter().position(Option::is_none) {
            Some(i) => {
                g.spans[i] = Some(span);
                i
            }
            None => {
                g.spans.push(Some(span));
                g.spans.len() - 1
            }
        };
        g.index.add_span(id as u32, ptr.0, size as u64);
    }

    /// Whether `addr` lies in one of the pool's spans.
    pub(crate) fn owns(&self, g: &Inner, addr: u64) -> bool {
        g.spans
            .iter()
            .flatten()
            .any(|s| addr >= s.base && addr < s.base + s.size)
    }

    /// Give back spans with no live block: regions until `want` bytes are released,
    /// and, when `unreserve`, reserved ranges with no page mapped but one (address
    /// space costs no memory, and keeping one range saves reserving it again).
    /// Returns the device bytes released (reserved ranges hold none).
    pub(crate) fn release_free_spans(
        &self,
        g: &mut Inner,
        want: usize,
        unreserve: bool,
    ) -> Result<usize> {
        g.vm.finish_deferred();
        let mut released = 0;
        let mut ranges = g
            .spans
            .iter()
            .flatten()
            .filter(|s| s.range.is_some())
            .count();
        for id in (0..g.spans.len()).rev() {
            if released >= want {
                break;
            }
            let Some(sp) = &g.spans[id] else { continue };
            if g.index.whole_free(id as u32).is_none() {
                continue;
            }
            let (base, size) = (DevicePtr(sp.base), sp.size as usize);
            match sp.range {
                Some(r) => {
                    if !unreserve || ranges <= 1 || !g.vm.is_empty(r) {
                        continue;
                    }
                    if !g.vm.unreserve(r)? {
                        continue;
                    }
                    ranges -= 1;
                }
                None => {
                    self.backend.free_region(base, size)?;
                    self.counters.on_release(size);
                    released += size;
                }
            }
            g.index.remove_span(id as u32);
            g.spans[id] = None;
        }
        Ok(released)
    }
}

//! [`BuddyDetail`]: what a buddy pool holds, order by order, and where its unused memory
//! sits.

use crate::config::BuddyMode;
use crate::pool::BuddyPool;
use crate::tree::{State, ORDERS};
use devpool_core::{human_bytes, DevicePtr};
use devpool_vm::VmDetail;

/// Blocks of one order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrderStats {
    /// Log2 of the block size.
    pub order: u32,
    /// Live blocks.
    pub live: u64,
    /// Free blocks, merged as far as their buddies allow.
    pub free: u64,
    /// Freed blocks kept unmerged for quick reuse.
    pub quick: u64,
}

impl OrderStats {
    /// Bytes per block.
    pub fn block_size(&self) -> u64 {
        1 << self.order
    }
}

/// One span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanDetail {
    /// First address.
    pub base: DevicePtr,
    /// Log2 of its size: the top order of its blocks.
    pub order: u32,
    /// Whether the whole span is one free block.
    pub whole_free: bool,
}

/// A detailed snapshot of a [`BuddyPool`].
#[derive(Clone, Debug, PartialEq)]
pub struct BuddyDetail {
    /// [`BuddyMode::Region`] or [`BuddyMode::Virtual`].
    pub mode: BuddyMode,
    /// Orders that have any block, smallest first.
    pub orders: Vec<OrderStats>,
    /// The spans.
    pub spans: Vec<SpanDetail>,
    /// Bytes the spans span (regions, or reserved address space).
    pub span_bytes: u64,
    /// The page layer (virtual mode; all zero in region mode): pages mapped, used,
    /// cached and retiring, chunks, backend calls.
    pub pages: VmDetail,
    /// Requested bytes of live blocks.
    pub live_bytes: u64,
    /// Granted bytes of live blocks.
    pub granted_bytes: u64,
    /// Device bytes lost to rounding: granted minus requested bytes of live blocks.
    pub rounding_bytes: u64,
    /// Address space that live blocks hold past their granted bytes: the tails of
    /// untrimmed virtual blocks, with no memory behind them. Zero when tails are
    /// trimmed, and in region mode (where a whole block is granted).
    pub address_rounding_bytes: u64,
}

impl BuddyDetail {
    /// Free blocks of every order, quick ones included.
    pub fn free_blocks(&self) -> u64 {
        self.orders.iter().map(|o| o.free + o.quick).sum()
    }

    /// Bytes in free blocks of every order.
    pub fn free_bytes(&self) -> u64 {
        self.orders
            .iter()
            .map(|o| (o.free + o.quick) * o.block_size())
            .sum()
    }
}

impl BuddyPool {
    /// A detailed snapshot: blocks per order, spans, pages, rounding.
    ///
    /// ```
    /// use devpool_buddy::{BuddyConfig, BuddyPool};
    /// use devpool_core::{Pool, Request};
    /// use devpool_testing::MockBackend;
    /// let pool = BuddyPool::new(MockBackend::shared(), BuddyConfig::region());
    /// let b = pool.allocate(&Request::new(3000)).unwrap();
    /// let d = pool.detail();
    /// assert_eq!(d.rounding_bytes, 3072 - 3000, "trimmed to 256-byte units");
    /// assert_eq!(d.orders.iter().find(|o| o.order == 12).unwrap().live, 1);
    /// pool.deallocate(&b).unwrap();
    /// ```
    pub fn detail(&self) -> BuddyDetail {
        let mut g = self.inner.lock();
        g.vm.finish_deferred();
        let orders = (0..ORDERS as u32)
            .filter_map(|o| {
                let (free, quick) = g.tree.list_lens(o);
                let live = g.tree.live_count(o);
                (free + quick + live > 0).then_some(OrderStats {
                    order: o,
                    live,
                    free,
                    quick,
                })
            })
            .collect();
        let spans: Vec<SpanDetail> = g
            .spans
            .iter()
            .flatten()
            .map(|a| SpanDetail {
                base: DevicePtr(a.base),
                order: a.order,
                whole_free: g.tree.node(a.root).state == State::Free,
            })
            .collect();
        BuddyDetail {
            mode: self.mode(),
            orders,
            span_bytes: spans.iter().map(|a| 1u64 << a.order).sum(),
            spans,
            pages: g.vm.detail(),
            live_bytes: g.tally.live.current,
            granted_bytes: g.tally.granted.current,
            rounding_bytes: g.tally.granted.current - g.tally.live.current,
            address_rounding_bytes: g.block_bytes - g.tally.granted.current,
        }
    }

    /// One line on where unused memory sits.
    pub(crate) fn describe(&self) -> String {
        let d = self.detail();
        let largest = d
            .orders
            .iter()
            .rev()
            .find(|o| o.free + o.quick > 0)
            .map_or(0, |o| o.block_size());
        let mut s = format!(
            "buddy-{}: {} span(s) spanning {}; {} in {} free block(s), the largest {}",
            if d.mode == BuddyMode::Virtual {
                "virtual"
            } else {
                "region"
            },
            d.spans.len(),
            human_bytes(d.span_bytes),
            human_bytes(d.free_bytes()),
            d.free_blocks(),
            human_bytes(largest),
        );
        if d.mode == BuddyMode::Virtual {
            s += &format!(
                "; {} mapped, {} of it unused",
                human_bytes(d.pages.mapped_pages * d.pages.page_size),
                human_bytes(d.pages.unused_pages * d.pages.page_size)
            );
        }
        s += &format!("; {} lost to rounding", human_bytes(d.rounding_bytes));
        s
    }
}

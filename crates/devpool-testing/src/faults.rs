//! Fault-injection checks of one pool on a host-backed mock: blocks carry a byte
//! pattern that must read back, a failed allocation must be a backend error that
//! changes no block, and the pool's reserved bytes must always be the backend's
//! bytes in use.
//!
//! ```
//! use devpool_core::DirectPool;
//! use devpool_testing::faults::FaultedPool;
//! let fp = FaultedPool::host_backed(1 << 30, DirectPool::new, |_| Ok(()));
//! let b = fp.try_allocate(4096, 7).unwrap();
//! fp.release_all(vec![(b, 7)]);
//! ```

use devpool_core::{Backend, Block, Error, Pool, Request, Rng};
use std::sync::Arc;

use crate::{FaultOn, MockBackend, MockConfig};

/// A pool's own consistency check (its `verify`).
pub type Check<P> = fn(&P) -> Result<(), String>;

/// A pool and the mock behind it, with the checks every fault test makes.
pub struct FaultedPool<P: Pool> {
    /// The mock the pool draws from.
    pub mock: Arc<MockBackend>,
    /// The pool under test.
    pub pool: P,
    check: Check<P>,
}

impl<P: Pool> FaultedPool<P> {
    /// Checks of `pool` over `mock`; `check` is the pool's own consistency check.
    pub fn new(mock: Arc<MockBackend>, pool: P, check: Check<P>) -> Self {
        FaultedPool { mock, pool, check }
    }

    /// A pool made by `make` over a fresh host-backed mock of `capacity` bytes.
    pub fn host_backed(
        capacity: u64,
        make: impl FnOnce(Arc<MockBackend>) -> P,
        check: Check<P>,
    ) -> Self {
        let mock = MockBackend::shared_with(MockConfig::default().host_backed().capacity(capacity));
        let pool = make(mock.clone());
        Self::new(mock, pool, check)
    }

    /// Writes `tag` into every byte of `b`.
    pub fn fill(&self, b: &Block, tag: u8) {
        self.mock
            .memset(b.ptr, tag, b.requested.max(1), b.stream)
            .unwrap();
    }

    /// Asserts that every byte of `b` still reads back as `tag`.
    pub fn verify(&self, b: &Block, tag: u8) {
        let mut back = vec![0u8; b.requested.max(1)];
        self.mock.copy_to_host(&mut back, b.ptr, b.stream).unwrap();
        assert!(
            back.iter().all(|&x| x == tag),
            "block {b:?} lost its pattern"
        );
    }

    /// Asserts the pool consistent and its reserved bytes the backend's bytes in use.
    pub fn exact(&self) {
        (self.check)(&self.pool).unwrap();
        assert_eq!(
            self.pool.stats().reserved_bytes.current,
            self.mock.counters().bytes_in_use.current,
            "the pool's reserved bytes are the backend's bytes in use"
        );
    }

    /// Allocates `size` bytes and fills them with `tag`; a failure must be a backend
    /// error that changes no block, and gives `None`. Checks [`exact`](Self::exact)
    /// after either.
    pub fn try_allocate(&self, size: usize, tag: u8) -> Option<Block> {
        let before = self.pool.stats();
        let got = match self.pool.allocate(&Request::new(size)) {
            Ok(b) => {
                self.fill(&b, tag);
                Some(b)
            }
            Err(e) => {
                assert!(matches!(e, Error::Backend(_)), "unexpected error {e}");
                let after = self.pool.stats();
                assert_eq!(
                    after.live_blocks, before.live_blocks,
                    "a failure changes no block"
                );
                assert_eq!(after.allocated_bytes, before.allocated_bytes);
                None
            }
        };
        self.exact();
        got
    }

    /// Round `round` of a faulty stream: every third round arms `fault` for one of
    /// the next two backend calls, then a size from `sizes` (log-uniform) is
    /// allocated as [`try_allocate`](Self::try_allocate) does.
    pub fn faulty_round(
        &self,
        round: u32,
        fault: FaultOn,
        rng: &mut Rng,
        sizes: (usize, usize),
        tag: u8,
    ) -> Option<Block> {
        if round.is_multiple_of(3) {
            self.mock.fail_nth(fault, 1 + rng.below(2));
        }
        self.try_allocate(rng.log_uniform(sizes.0, sizes.1), tag)
    }

    /// Verifies `b`'s pattern and frees it.
    pub fn free(&self, b: &Block, tag: u8) {
        self.verify(b, tag);
        self.pool.deallocate(b).unwrap();
    }

    /// Verifies every block's pattern, frees them all and trims: the backend must
    /// then hold nothing.
    pub fn release_all(&self, live: impl IntoIterator<Item = (Block, u8)>) {
        let live: Vec<_> = live.into_iter().collect();
        for (b, tag) in &live {
            self.verify(b, *tag);
        }
        for (b, _) in live {
            self.pool.deallocate(&b).unwrap();
        }
        self.pool.trim().unwrap();
        self.exact();
        assert_eq!(self.mock.counters().bytes_in_use.current, 0);
    }

    /// A failing `reserve` is a backend error that the mock counts once, and the
    /// next allocation works and leaves the accounting exact: a pool made by `make`
    /// over a fresh mock.
    pub fn reserve_fault_then_works(make: impl FnOnce(Arc<MockBackend>) -> P, check: Check<P>) {
        let mock = MockBackend::shared();
        Self::new(mock.clone(), make(mock), check).reserve_fault_then_works_here();
    }

    fn reserve_fault_then_works_here(&self) {
        self.mock.fail_nth(FaultOn::Reserve, 1);
        let e = self.pool.allocate(&Request::new(1 << 20)).unwrap_err();
        assert!(matches!(e, Error::Backend(_)), "{e}");
        assert_eq!(self.mock.counters().failures, 1, "the fault fired");
        let b = self.pool.allocate(&Request::new(1 << 20)).unwrap();
        self.pool.deallocate(&b).unwrap();
        self.exact();
    }
}

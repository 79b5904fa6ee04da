//! [`forward_backend!`](crate::forward_backend): a backend that wraps another writes
//! what it changes and forwards the rest, as adaptors do with
//! [`forward_allocator!`](crate::forward_allocator).

/// Write the [`Backend`](crate::Backend) methods named in the list as calls of the
/// same method of an inner backend: `forward_backend!(|s| &*s.inner; device,
/// mem_info, ...)` in an `impl Backend for X` block. Every method of the trait can be
/// named.
///
/// ```
/// use devpool_core::{forward_backend, Backend, BackendResult, DevicePtr};
/// use devpool_testing::MockBackend;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// /// Counts regions; forwards everything else to the mock.
/// struct Counting {
///     inner: Arc<MockBackend>,
///     regions: AtomicU64,
/// }
///
/// impl Backend for Counting {
///     fn name(&self) -> &str {
///         "counting"
///     }
///     fn alloc_region(&self, size: usize) -> BackendResult<DevicePtr> {
///         self.regions.fetch_add(1, Ordering::Relaxed);
///         self.inner.alloc_region(size)
///     }
///     forward_backend!(|s| &*s.inner; device, granularity, mem_info, free_region,
///         create_stream, destroy_stream, synchronize, create_event, destroy_event,
///         record_event, event_done, wait_event, counters);
/// }
///
/// let b = Counting { inner: MockBackend::shared(), regions: AtomicU64::new(0) };
/// let p = b.alloc_region(4096).unwrap();
/// b.free_region(p, 4096).unwrap();
/// assert_eq!(b.regions.load(Ordering::Relaxed), 1);
/// ```
#[macro_export]
macro_rules! forward_backend {
    (|$s:ident| $inner:expr; $($method:ident),+ $(,)?) => {
        $($crate::forward_backend!(@one |$s| $inner; $method);)+
    };
    (@one |$s:ident| $inner:expr; device) => {
        fn device(&self) -> $crate::DeviceId { let $s = self; $crate::Backend::device($inner) }
    };
    (@one |$s:ident| $inner:expr; granularity) => {
        fn granularity(&self) -> usize { let $s = self; $crate::Backend::granularity($inner) }
    };
    (@one |$s:ident| $inner:expr; mem_info) => {
        fn mem_info(&self) -> $crate::BackendResult<(u64, u64)> {
            let $s = self;
            $crate::Backend::mem_info($inner)
        }
    };
    (@one |$s:ident| $inner:expr; region_bytes) => {
        fn region_bytes(&self, size: usize) -> Option<usize> {
            let $s = self;
            $crate::Backend::region_bytes($inner, size)
        }
    };
    (@one |$s:ident| $inner:expr; alloc_region) => {
        fn alloc_region(&self, size: usize) -> $crate::BackendResult<$crate::DevicePtr> {
            let $s = self;
            $crate::Backend::alloc_region($inner, size)
        }
    };
    (@one |$s:ident| $inner:expr; free_region) => {
        fn free_region(&self, ptr: $crate::DevicePtr, size: usize) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::free_region($inner, ptr, size)
        }
    };
    (@one |$s:ident| $inner:expr; supports_virtual) => {
        fn supports_virtual(&self) -> bool {
            let $s = self;
            $crate::Backend::supports_virtual($inner)
        }
    };
    (@one |$s:ident| $inner:expr; reserve) => {
        fn reserve(&self, size: usize, align: usize) -> $crate::BackendResult<$crate::DevicePtr> {
            let $s = self;
            $crate::Backend::reserve($inner, size, align)
        }
    };
    (@one |$s:ident| $inner:expr; unreserve) => {
        fn unreserve(&self, ptr: $crate::DevicePtr, size: usize) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::unreserve($inner, ptr, size)
        }
    };
    (@one |$s:ident| $inner:expr; map) => {
        fn map(&self, ptr: $crate::DevicePtr, size: usize) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::map($inner, ptr, size)
        }
    };
    (@one |$s:ident| $inner:expr; unmap) => {
        fn unmap(&self, ptr: $crate::DevicePtr, size: usize) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::unmap($inner, ptr, size)
        }
    };
    (@one |$s:ident| $inner:expr; map_chunks) => {
        fn map_chunks(&self, ptr: $crate::DevicePtr, chunks: &[usize]) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::map_chunks($inner, ptr, chunks)
        }
    };
    (@one |$s:ident| $inner:expr; alias) => {
        fn alias(
            &self,
            to: $crate::DevicePtr,
            from: &[($crate::DevicePtr, usize)],
        ) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::alias($inner, to, from)
        }
    };
    (@one |$s:ident| $inner:expr; create_stream) => {
        fn create_stream(&self) -> $crate::BackendResult<$crate::StreamId> {
            let $s = self;
            $crate::Backend::create_stream($inner)
        }
    };
    (@one |$s:ident| $inner:expr; destroy_stream) => {
        fn destroy_stream(&self, stream: $crate::StreamId) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::destroy_stream($inner, stream)
        }
    };
    (@one |$s:ident| $inner:expr; synchronize) => {
        fn synchronize(&self, stream: $crate::StreamId) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::synchronize($inner, stream)
        }
    };
    (@one |$s:ident| $inner:expr; synchronize_device) => {
        fn synchronize_device(&self) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::synchronize_device($inner)
        }
    };
    (@one |$s:ident| $inner:expr; create_event) => {
        fn create_event(&self) -> $crate::BackendResult<$crate::EventId> {
            let $s = self;
            $crate::Backend::create_event($inner)
        }
    };
    (@one |$s:ident| $inner:expr; destroy_event) => {
        fn destroy_event(&self, event: $crate::EventId) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::destroy_event($inner, event)
        }
    };
    (@one |$s:ident| $inner:expr; record_event) => {
        fn record_event(
            &self,
            event: $crate::EventId,
            stream: $crate::StreamId,
        ) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::record_event($inner, event, stream)
        }
    };
    (@one |$s:ident| $inner:expr; event_done) => {
        fn event_done(&self, event: $crate::EventId) -> $crate::BackendResult<bool> {
            let $s = self;
            $crate::Backend::event_done($inner, event)
        }
    };
    (@one |$s:ident| $inner:expr; wait_event) => {
        fn wait_event(&self, event: $crate::EventId) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::wait_event($inner, event)
        }
    };
    (@one |$s:ident| $inner:expr; memset) => {
        fn memset(
            &self,
            ptr: $crate::DevicePtr,
            value: u8,
            len: usize,
            stream: $crate::StreamId,
        ) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::memset($inner, ptr, value, len, stream)
        }
    };
    (@one |$s:ident| $inner:expr; copy_to_device) => {
        fn copy_to_device(
            &self,
            dst: $crate::DevicePtr,
            src: &[u8],
            stream: $crate::StreamId,
        ) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::copy_to_device($inner, dst, src, stream)
        }
    };
    (@one |$s:ident| $inner:expr; copy_to_host) => {
        fn copy_to_host(
            &self,
            dst: &mut [u8],
            src: $crate::DevicePtr,
            stream: $crate::StreamId,
        ) -> $crate::BackendResult<()> {
            let $s = self;
            $crate::Backend::copy_to_host($inner, dst, src, stream)
        }
    };
    (@one |$s:ident| $inner:expr; counters) => {
        fn counters(&self) -> $crate::BackendCounters {
            let $s = self;
            $crate::Backend::counters($inner)
        }
    };
    (@one |$s:ident| $inner:expr; reset_peak_bytes) => {
        fn reset_peak_bytes(&self) {
            let $s = self;
            $crate::Backend::reset_peak_bytes($inner)
        }
    };
}

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
        $($crate::forward_backend!(@sig |$s| $inner; $method);)+
    };
    (@sig |$s:ident| $inner:expr; device) => {
        $crate::forward_backend!(@fn |$s| $inner; device() -> $crate::DeviceId);
    };
    (@sig |$s:ident| $inner:expr; granularity) => {
        $crate::forward_backend!(@fn |$s| $inner; granularity() -> usize);
    };
    (@sig |$s:ident| $inner:expr; mem_info) => {
        $crate::forward_backend!(@fn |$s| $inner; mem_info() -> $crate::BackendResult<(u64, u64)>);
    };
    (@sig |$s:ident| $inner:expr; region_bytes) => {
        $crate::forward_backend!(@fn |$s| $inner; region_bytes(size: usize) -> Option<usize>);
    };
    (@sig |$s:ident| $inner:expr; alloc_region) => {
        $crate::forward_backend!(@fn |$s| $inner; alloc_region(size: usize) -> $crate::BackendResult<$crate::DevicePtr>);
    };
    (@sig |$s:ident| $inner:expr; free_region) => {
        $crate::forward_backend!(@fn |$s| $inner; free_region(ptr: $crate::DevicePtr, size: usize) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; supports_virtual) => {
        $crate::forward_backend!(@fn |$s| $inner; supports_virtual() -> bool);
    };
    (@sig |$s:ident| $inner:expr; reserve) => {
        $crate::forward_backend!(@fn |$s| $inner; reserve(size: usize, align: usize) -> $crate::BackendResult<$crate::DevicePtr>);
    };
    (@sig |$s:ident| $inner:expr; unreserve) => {
        $crate::forward_backend!(@fn |$s| $inner; unreserve(ptr: $crate::DevicePtr, size: usize) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; map) => {
        $crate::forward_backend!(@fn |$s| $inner; map(ptr: $crate::DevicePtr, size: usize) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; unmap) => {
        $crate::forward_backend!(@fn |$s| $inner; unmap(ptr: $crate::DevicePtr, size: usize) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; map_chunks) => {
        $crate::forward_backend!(@fn |$s| $inner; map_chunks(ptr: $crate::DevicePtr, chunks: &[usize]) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; alias) => {
        $crate::forward_backend!(@fn |$s| $inner; alias(to: $crate::DevicePtr, from: &[($crate::DevicePtr, usize)]) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; create_stream) => {
        $crate::forward_backend!(@fn |$s| $inner; create_stream() -> $crate::BackendResult<$crate::StreamId>);
    };
    (@sig |$s:ident| $inner:expr; destroy_stream) => {
        $crate::forward_backend!(@fn |$s| $inner; destroy_stream(stream: $crate::StreamId) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; synchronize) => {
        $crate::forward_backend!(@fn |$s| $inner; synchronize(stream: $crate::StreamId) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; synchronize_device) => {
        $crate::forward_backend!(@fn |$s| $inner; synchronize_device() -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; create_event) => {
        $crate::forward_backend!(@fn |$s| $inner; create_event() -> $crate::BackendResult<$crate::EventId>);
    };
    (@sig |$s:ident| $inner:expr; destroy_event) => {
        $crate::forward_backend!(@fn |$s| $inner; destroy_event(event: $crate::EventId) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; record_event) => {
        $crate::forward_backend!(@fn |$s| $inner; record_event(event: $crate::EventId, stream: $crate::StreamId) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; event_done) => {
        $crate::forward_backend!(@fn |$s| $inner; event_done(event: $crate::EventId) -> $crate::BackendResult<bool>);
    };
    (@sig |$s:ident| $inner:expr; wait_event) => {
        $crate::forward_backend!(@fn |$s| $inner; wait_event(event: $crate::EventId) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; memset) => {
        $crate::forward_backend!(@fn |$s| $inner; memset(ptr: $crate::DevicePtr, value: u8, len: usize, stream: $crate::StreamId) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; copy_to_device) => {
        $crate::forward_backend!(@fn |$s| $inner; copy_to_device(dst: $crate::DevicePtr, src: &[u8], stream: $crate::StreamId) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; copy_to_host) => {
        $crate::forward_backend!(@fn |$s| $inner; copy_to_host(dst: &mut [u8], src: $crate::DevicePtr, stream: $crate::StreamId) -> $crate::BackendResult<()>);
    };
    (@sig |$s:ident| $inner:expr; counters) => {
        $crate::forward_backend!(@fn |$s| $inner; counters() -> $crate::BackendCounters);
    };
    (@sig |$s:ident| $inner:expr; reset_peak_bytes) => {
        $crate::forward_backend!(@fn |$s| $inner; reset_peak_bytes() -> ());
    };
    (@fn |$s:ident| $inner:expr; $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        fn $name(&self, $($arg: $ty),*) -> $ret {
            let $s = self;
            $crate::Backend::$name($inner, $($arg),*)
        }
    };
}

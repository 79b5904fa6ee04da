//! [`cuda_malloc`]: the driver's plain allocator as a baseline, one `cuMemAlloc` and
//! one `cuMemFree` per block.

use devpool_core::{DirectPool, IntoBackend, StreamOrdered};

/// The pool behind [`cuda_malloc`]: core's [`DirectPool`], one backend region per
/// block, given back at once. Alignments above 256 bytes are served by asking for
/// `align - 256` bytes more, as callers of `cudaMalloc` do: the driver only promises
/// 256-byte alignment for small allocations.
pub type MallocPool = DirectPool;

/// The `cudaMalloc` baseline over `backend`: one region per block, freed at once;
/// the stream-ordered layer holds cross-stream frees back until their events
/// complete. Over a [`CudaBackend`](crate::CudaBackend) each block is one
/// `cuMemAlloc` and one `cuMemFree`.
///
/// ```
/// use devpool_core::Allocator;
/// use devpool_testing::MockBackend;
/// let a = devpool_cuda::cuda_malloc(MockBackend::shared());
/// let b = a.allocate(devpool_core::Request::new(1000).with_align(4096)).unwrap();
/// assert!(b.ptr.is_aligned(4096) && b.size >= 1000);
/// a.free(b).unwrap();
/// assert_eq!(a.stats().reserved_bytes.current, 0);
/// ```
pub fn cuda_malloc(backend: impl IntoBackend) -> StreamOrdered<MallocPool> {
    let backend = backend.into_backend();
    let b = backend.clone();
    StreamOrdered::new("cuda-malloc", backend, move |_| DirectPool::new(b.clone()))
}

//! Plain value types shared by every crate: pointers, ids, requests and blocks.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One gibibyte (2^30 bytes).
pub const GIB: u64 = 1 << 30;

/// The alignment every allocator guarantees when a request asks for less (256 bytes,
/// as `cudaMalloc` guarantees).
pub const MIN_ALIGN: usize = 256;

/// A device address. Never dereferenced on the host: it is only a number to the
/// allocators, which keep all of their metadata in host memory.
///
/// ```
/// use devpool_core::DevicePtr;
/// let p = DevicePtr(0x7f00_0000_0000);
/// assert_eq!(p.offset(256).0, 0x7f00_0000_0100);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The null device pointer.
    pub const NULL: DevicePtr = DevicePtr(0);

    /// The address `bytes` past this one.
    #[inline]
    pub fn offset(self, bytes: usize) -> DevicePtr {
        DevicePtr(self.0 + bytes as u64)
    }

    /// Whether this is the null pointer.
    #[inline]
    pub fn is_null(self) -> bool {
        self.0 == 0
    }

    /// Whether the address is a multiple of `align` (a power of two).
    #[inline]
    pub fn is_aligned(self, align: usize) -> bool {
        self.0 & (align as u64 - 1) == 0
    }
}

impl fmt::Debug for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::Display for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A stream of a device. On CUDA it is the `CUstream` value; [`StreamId::DEFAULT`]
/// (zero) is the legacy default stream.
///
/// Safe code cannot make one up: a stream comes from
/// [`Backend::create_stream`](crate::Backend::create_stream), is the default stream,
/// or is adopted with the `unsafe` [`StreamId::from_raw`], whose caller promises it is
/// a stream of the device. So a backend that hands a stream to its driver knows the
/// driver made it (a forged number would reach the driver as a handle).
///
/// ```compile_fail
/// let forged = devpool_core::StreamId(1000); // the field is private
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct StreamId(pub(crate) u64);

impl StreamId {
    /// The default stream.
    pub const DEFAULT: StreamId = StreamId(0);

    /// The stream whose handle is `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is 0 (the default stream) or a stream of the device the id will be used
    /// with, alive while the id is: one a backend made (its `create_stream` uses this),
    /// or one a caller of the C ABI hands in (a `CUstream` of the device's context).
    /// The CUDA backend passes the handle to the driver as it is.
    #[inline]
    pub const unsafe fn from_raw(raw: u64) -> StreamId {
        StreamId(raw)
    }

    /// The raw handle (the `CUstream` value on CUDA; 0 for the default stream).
    #[inline]
    pub const fn raw(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream {:#x}", self.0)
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A device ordinal.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug, Serialize, Deserialize,
)]
pub struct DeviceId(pub u32);

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "device {}", self.0)
    }
}

/// An opaque event handle issued by a [`Backend`](crate::Backend).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct EventId(pub u64);

/// What a caller asks for: a size, an alignment and the stream that will use it.
///
/// ```
/// use devpool_core::{Backend, Request};
/// let s = devpool_testing::MockBackend::default().create_stream().unwrap();
/// let r = Request::new(1000).with_align(4096).on_stream(s);
/// assert_eq!((r.size, r.align, r.stream), (1000, 4096, s));
/// assert_eq!(Request::new(1).align, 256);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Request {
    /// Bytes requested. Zero is valid: it is served as a one-byte request, so the block
    /// has a real, distinct, aligned address and is freed like any other.
    pub size: usize,
    /// Alignment in bytes: a power of two. Values below [`MIN_ALIGN`] are raised to it.
    pub align: usize,
    /// The stream that will use the block.
    pub stream: StreamId,
}

impl Request {
    /// A request for `size` bytes at the default alignment on the default stream.
    #[inline]
    pub fn new(size: usize) -> Self {
        Request {
            size,
            align: MIN_ALIGN,
            stream: StreamId::DEFAULT,
        }
    }

    /// The bytes of a block for this request, its size rounded up to `granule` (a power
    /// of two), and the bytes to set aside so that such a block fits at `align`
    /// wherever the room starts (`align - granule` more when `align` is larger):
    /// `(size, room)`. [`Error::TooLarge`](crate::Error::TooLarge) should either
    /// overflow.
    ///
    /// ```
    /// use devpool_core::Request;
    /// let r = Request::new(1000).with_align(4096);
    /// assert_eq!(r.padded(256, 4096).unwrap(), (1024, 1024 + 4096 - 256));
    /// assert!(Request::new(usize::MAX).padded(256, 256).is_err());
    /// ```
    #[inline]
    pub fn padded(&self, granule: usize, align: usize) -> crate::Result<(usize, usize)> {
        match align_up(self.effective_size(), granule)
            .and_then(|size| Some((size, size.checked_add(align.saturating_sub(granule))?)))
        {
            Some(r) => Ok(r),
            None => Err(self.too_large()),
        }
    }

    /// The error of a request too large to pad: out of line, so that the hot path
    /// builds no error.
    #[cold]
    #[inline(never)]
    fn too_large(&self) -> crate::Error {
        crate::Error::too_large(self.size)
    }

    /// The block that serves this request: `size` bytes granted at `ptr` on `device`,
    /// on the request's stream, with the owner's `handle`.
    ///
    /// ```
    /// use devpool_core::{DeviceId, DevicePtr, Request};
    /// let b = Request::new(100).granted(DevicePtr(4096), 256, DeviceId(0), 7);
    /// assert_eq!((b.size, b.requested, b.handle), (256, 100, 7));
    /// ```
    #[inline]
    pub fn granted(&self, ptr: DevicePtr, size: usize, device: DeviceId, handle: u64) -> Block {
        Block {
            ptr,
            size,
            requested: self.size,
            stream: self.stream,
            device,
            handle,
        }
    }

    /// The same request with another alignment.
    #[inline]
    pub fn with_align(mut self, align: usize) -> Self {
        self.align = align;
        self
    }

    /// The same request on another stream.
    #[inline]
    pub fn on_stream(mut self, stream: StreamId) -> Self {
        self.stream = stream;
        self
    }

    /// The size actually served: at least one byte.
    #[inline]
    pub fn effective_size(&self) -> usize {
        self.size.max(1)
    }

    /// The alignment actually served (at least [`MIN_ALIGN`]), or an error when it is
    /// not a power of two.
    #[inline]
    pub fn effective_align(&self) -> crate::Result<usize> {
        if !self.align.is_power_of_two() {
            return Err(crate::Error::InvalidAlignment { align: self.align });
        }
        Ok(self.align.max(MIN_ALIGN))
    }
}

/// A block handed out by an allocator. It is `Copy` so that callers can keep it in
/// their own tables; the allocator checks it when it comes back.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Block {
    /// Device address of the first byte.
    pub ptr: DevicePtr,
    /// Bytes granted (at least the request's size; the rest is rounding).
    pub size: usize,
    /// Bytes the caller asked for.
    pub requested: usize,
    /// Stream the block was allocated on.
    pub stream: StreamId,
    /// Device the memory lives on.
    pub device: DeviceId,
    /// The owner's token: whatever it needs to check and free the block in O(1)
    /// (a slab index and slot, a buddy order, a route). Opaque to callers. A pool
    /// uses only the low [`POOL_HANDLE_BITS`]; the bits above are a router's
    /// ([`Block::route`], [`Block::routed`]).
    pub handle: u64,
}

/// Bits of [`Block::handle`] a [`Pool`](crate::Pool) may use: the low 62. The two
/// above belong to a router that sends requests to several pools and tags each
/// block with the route that made it; the conformance suite checks that every pool
/// leaves them clear.
pub const POOL_HANDLE_BITS: u32 = 62;

/// The mask of the bits of [`Block::handle`] a pool may use.
pub const POOL_HANDLE_MASK: u64 = (1 << POOL_HANDLE_BITS) - 1;

/// Routes a router can tag in the bits above [`POOL_HANDLE_BITS`] (4).
pub const HANDLE_ROUTES: u64 = 1 << (u64::BITS - POOL_HANDLE_BITS);

/// The bits of a handle that tag it with `route`, or
/// [`Corrupted`](crate::Error::Corrupted) when the route does not fit them (not
/// below [`HANDLE_ROUTES`]): a router's mistake.
///
/// ```
/// use devpool_core::{route_tag, POOL_HANDLE_BITS};
/// assert_eq!(route_tag(1).unwrap(), 1 << POOL_HANDLE_BITS);
/// assert!(route_tag(4).is_err());
/// ```
#[inline]
pub fn route_tag(route: u64) -> crate::Result<u64> {
    if route >= HANDLE_ROUTES {
        return Err(crate::Error::Corrupted {
            ptr: DevicePtr::NULL,
            detail: format!("route {route} does not fit the router's bits of a handle"),
        });
    }
    Ok(route << POOL_HANDLE_BITS)
}

impl Block {
    /// The route a router tagged this block with (0 when none did).
    #[inline]
    pub fn route(&self) -> u64 {
        self.handle >> POOL_HANDLE_BITS
    }

    /// The block as its pool made it: the router's bits cleared.
    #[inline]
    pub fn unrouted(&self) -> Block {
        Block {
            handle: self.handle & POOL_HANDLE_MASK,
            ..*self
        }
    }

    /// The block tagged with `route` (below [`HANDLE_ROUTES`]) by a router, or
    /// [`Corrupted`](crate::Error::Corrupted) when the pool that made it used a
    /// router's bits (or the route does not fit): the pool broke its contract.
    ///
    /// ```
    /// use devpool_core::{Block, DeviceId, DevicePtr, StreamId, POOL_HANDLE_MASK};
    /// let b = Block { ptr: DevicePtr(0x1000), size: 256, requested: 256,
    ///     stream: StreamId::DEFAULT, device: DeviceId(0), handle: 42 };
    /// let tagged = b.routed(2).unwrap();
    /// assert_eq!((tagged.route(), tagged.unrouted()), (2, b));
    /// let greedy = Block { handle: POOL_HANDLE_MASK + 1, ..b };
    /// assert!(greedy.routed(1).is_err());
    /// ```
    #[inline]
    pub fn routed(self, route: u64) -> crate::Result<Block> {
        if self.handle > POOL_HANDLE_MASK {
            return Err(crate::Error::Corrupted {
                ptr: self.ptr,
                detail: format!(
                    "handle {:#x} of a pool uses the bits above the low {POOL_HANDLE_BITS}, \
                     which belong to the router (route {route})",
                    self.handle
                ),
            });
        }
        Ok(Block {
            handle: self.handle | route_tag(route)?,
            ..self
        })
    }

    /// `Ok` when the block lives on `device`, else the
    /// [`WrongDevice`](crate::Error::WrongDevice) error an allocator of `device` answers.
    #[inline]
    pub fn check_device(&self, device: DeviceId) -> crate::Result<()> {
        if self.device != device {
            return Err(crate::Error::WrongDevice {
                ptr: self.ptr,
                block_device: self.device,
                allocator_device: device,
            });
        }
        Ok(())
    }
}

/// Round `x` up to a multiple of `align` (a power of two), or `None` on overflow.
///
/// ```
/// assert_eq!(devpool_core::align_up(1000, 256), Some(1024));
/// assert_eq!(devpool_core::align_up(usize::MAX, 256), None);
/// ```
#[inline]
pub fn align_up(x: usize, align: usize) -> Option<usize> {
    debug_assert!(align.is_power_of_two());
    x.checked_add(align - 1).map(|v| v & !(align - 1))
}

/// At most `max` bytes of `text` for an error message, cut at a character boundary
/// and marked with how long the whole was: input echoed back to a user is capped, so
/// a 50 MB field does not become a 50 MB message.
///
/// ```
/// use devpool_core::excerpt;
/// assert_eq!(excerpt("short", 64), "short");
/// let long = "x".repeat(1000);
/// assert_eq!(excerpt(&long, 8), "xxxxxxxx... (1000 bytes)");
/// ```
pub fn excerpt(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}... ({} bytes)", &text[..end], text.len()))
}

/// Format a byte count for people: `1.50 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

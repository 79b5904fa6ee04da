//! [`DeviceBuffer`]: an owning, typed handle to device memory from any allocator.

use crate::allocator::Allocator;
use crate::error::{Error, Result};
use crate::types::{Block, DevicePtr, Request, StreamId};
use std::marker::PhantomData;

/// Element types that can be copied to and from the device byte for byte.
///
/// # Safety
/// The type must have no padding bytes and every bit pattern must be a valid value.
pub unsafe trait DeviceCopy: Copy + Send + Sync + 'static {}

macro_rules! device_copy {
    ($($t:ty),*) => { $(
        // SAFETY: primitive numbers have no padding and accept every bit pattern.
        unsafe impl DeviceCopy for $t {}
    )* };
}
device_copy!(u8, i8, u16, i16, u32, i32, u64, i64, u128, i128, usize, isize, f32, f64);

fn bytes_of<T: DeviceCopy>(v: &[T]) -> &[u8] {
    // SAFETY: `T: DeviceCopy` has no padding, so every byte of the slice is initialized;
    // the length is the slice's size in bytes and u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

fn bytes_of_mut<T: DeviceCopy>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `bytes_of`, and any bytes written form a valid `T` (DeviceCopy).
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// `len` elements of `T` in device memory, freed on drop on its stream.
///
/// It never exposes device memory as a host slice: data moves only through
/// [`copy_from_host`](DeviceBuffer::copy_from_host) and
/// [`copy_to_host`](DeviceBuffer::copy_to_host), which go through the backend (real
/// copies on CUDA, host bytes on a host-backed mock).
///
/// ```
/// use devpool_core::{direct, DeviceBuffer, StreamId};
/// use devpool_testing::{MockBackend, MockConfig};
/// let alloc = direct(MockBackend::shared_with(MockConfig::default().host_backed()));
/// let buf = DeviceBuffer::from_slice(&alloc, &[1.0f32, 2.0, 3.0], StreamId::DEFAULT).unwrap();
/// assert_eq!(buf.len(), 3);
/// assert_eq!(buf.to_vec().unwrap(), vec![1.0, 2.0, 3.0]);
/// ```
pub struct DeviceBuffer<'a, T: DeviceCopy> {
    alloc: &'a dyn Allocator,
    block: Block,
    len: usize,
    stream: StreamId,
    _t: PhantomData<T>,
}

impl<'a, T: DeviceCopy> DeviceBuffer<'a, T> {
    /// Room for `len` elements, uninitialized on the device, used on `stream`.
    pub fn new(alloc: &'a dyn Allocator, len: usize, stream: StreamId) -> Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or(Error::too_large(usize::MAX))?;
        let block = alloc.allocate(Request::new(bytes).on_stream(stream))?;
        Ok(DeviceBuffer {
            alloc,
            block,
            len,
            stream,
            _t: PhantomData,
        })
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice(alloc: &'a dyn Allocator, data: &[T], stream: StreamId) -> Result<Self> {
        let buf = Self::new(alloc, data.len(), stream)?;
        buf.copy_from_host(data)?;
        Ok(buf)
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Device address of the first element.
    pub fn as_device_ptr(&self) -> DevicePtr {
        self.block.ptr
    }

    /// The block behind the buffer.
    pub fn block(&self) -> &Block {
        &self.block
    }

    /// The stream the buffer is used on.
    pub fn stream(&self) -> StreamId {
        self.stream
    }

    /// Copy `data` (exactly `len` elements) to the device.
    pub fn copy_from_host(&self, data: &[T]) -> Result<()> {
        if data.len() != self.len {
            return Err(Error::Limit(format!(
                "copy of {} elements into a buffer of {}",
                data.len(),
                self.len
            )));
        }
        Ok(self
            .alloc
            .backend()
            .copy_to_device(self.block.ptr, bytes_of(data), self.stream)?)
    }

    /// Copy the device data into `out` (exactly `len` elements).
    pub fn copy_to_host(&self, out: &mut [T]) -> Result<()> {
        if out.len() != self.len {
            return Err(Error::Limit(format!(
                "copy of a buffer of {} elements into {}",
                self.len,
                out.len()
            )));
        }
        Ok(self
            .alloc
            .backend()
            .copy_to_host(bytes_of_mut(out), self.block.ptr, self.stream)?)
    }

    /// The device data as a vector.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = Vec::with_capacity(self.len);
        // Fill with copies of nothing: zeroed bytes are a valid T (DeviceCopy).
        // SAFETY: DeviceCopy types accept every bit pattern, zeros included.
        v.resize(self.len, unsafe { std::mem::zeroed::<T>() });
        self.copy_to_host(&mut v)?;
        Ok(v)
    }

    /// Declare that the buffer is also used on `stream` (see
    /// [`Allocator::record_stream`]).
    pub fn record_stream(&self, stream: StreamId) -> Result<()> {
        self.alloc.record_stream(&self.block, stream)
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<'_, T> {
    fn drop(&mut self) {
        // A failure here means the allocator is broken; there is no caller to tell.
        let _ = self.alloc.deallocate(self.block, self.stream);
    }
}

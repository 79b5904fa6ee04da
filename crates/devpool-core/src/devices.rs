//! [`Devices`]: one allocator per device, keyed by ordinal.

use crate::allocator::Allocator;
use crate::error::{Error, Result};
use crate::types::{Block, DeviceId, Request, StreamId};

/// One allocator per device of a machine, keyed by device ordinal.
///
/// An allocation on device `d` is served by `d`'s allocator, from `d`'s memory; a free
/// names its device, and naming another device than the block's is an error that
/// changes nothing.
///
/// ```
/// use devpool_core::{direct, Devices, DeviceId, Request, StreamId};
/// use devpool_testing::{MockBackend, MockConfig};
/// let gpus = Devices::new(MockBackend::devices(2, MockConfig::default()).into_iter().map(direct));
/// let b = gpus.allocate(DeviceId(1), Request::new(4096)).unwrap();
/// assert_eq!(b.device, DeviceId(1));
/// assert!(gpus.deallocate(DeviceId(0), b, StreamId::DEFAULT).is_err()); // wrong device
/// gpus.deallocate(DeviceId(1), b, StreamId::DEFAULT).unwrap();
/// ```
pub struct Devices<A: Allocator> {
    allocators: Vec<A>,
}

impl<A: Allocator> Devices<A> {
    /// Allocators for devices `0..n`, in ordinal order: the allocator at position `d`
    /// must serve device `d`.
    ///
    /// # Panics
    /// If an allocator serves another device than its position (a programming error
    /// of the caller, not bad input at run time).
    pub fn new(allocators: impl IntoIterator<Item = A>) -> Self {
        let allocators: Vec<A> = allocators.into_iter().collect();
        for (i, a) in allocators.iter().enumerate() {
            assert_eq!(
                a.device(),
                DeviceId(i as u32),
                "allocator {i} serves {}",
                a.device()
            );
        }
        Devices { allocators }
    }

    /// How many devices.
    pub fn len(&self) -> usize {
        self.allocators.len()
    }

    /// Whether there is no device.
    pub fn is_empty(&self) -> bool {
        self.allocators.is_empty()
    }

    /// The allocator of `device`.
    pub fn get(&self, device: DeviceId) -> Result<&A> {
        self.allocators
            .get(device.0 as usize)
            .ok_or(Error::Unsupported("no allocator for that device ordinal"))
    }

    /// Allocate on `device`.
    pub fn allocate(&self, device: DeviceId, req: Request) -> Result<Block> {
        self.get(device)?.allocate(req)
    }

    /// Free `block`, which the caller says lives on `device`, after work on `stream`.
    pub fn deallocate(&self, device: DeviceId, block: Block, stream: StreamId) -> Result<()> {
        if block.device != device {
            return Err(Error::WrongDevice {
                ptr: block.ptr,
                block_device: block.device,
                allocator_device: device,
            });
        }
        self.get(device)?.deallocate(block, stream)
    }

    /// Let device `from` access the memory of device `to` (now and mapped later).
    pub fn enable_peer_access(&self, from: DeviceId, to: DeviceId) -> Result<()> {
        self.get(from)?;
        Ok(self.get(to)?.backend().enable_peer_access(from)?)
    }

    /// Give cached memory back on every device; returns the bytes released.
    pub fn trim(&self) -> Result<usize> {
        let mut n = 0;
        for a in &self.allocators {
            n += a.trim()?;
        }
        Ok(n)
    }

    /// Every device's allocator, in ordinal order.
    pub fn iter(&self) -> impl Iterator<Item = &A> {
        self.allocators.iter()
    }
}

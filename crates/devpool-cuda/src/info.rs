//! What the driver says about itself and its devices, for `devpool info`.

use crate::backend::{attribute, device_handle, name_of};
use crate::driver::{self, check};
use crate::CudaBackend;
use cudarc::driver::sys;
use devpool_core::{human_bytes, Backend, BackendError};
use serde::Serialize;
use std::ffi::c_int;
use std::fmt;

/// Facts about one device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: u32,
    /// The device's name ("NVIDIA H200").
    pub name: String,
    /// Device memory in bytes.
    pub total_bytes: u64,
    /// Device memory free now, in bytes.
    pub free_bytes: u64,
    /// Minimum page size of virtual mappings, in bytes.
    pub granularity: usize,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    /// Driver version (major, minor): CUDA 13.0 is (13, 0).
    pub driver_version: (u32, u32),
    /// Whether the device supports virtual memory management (cuMemCreate/cuMemMap).
    pub virtual_memory: bool,
    /// Whether the device supports stream-ordered memory pools (cuMemAllocAsync).
    pub memory_pools: bool,
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "device {}: {} (compute {}.{}), {} free of {}, page {}, virtual memory {}, memory pools {}, driver {}.{}",
            self.ordinal,
            self.name,
            self.compute_capability.0,
            self.compute_capability.1,
            human_bytes(self.free_bytes),
            human_bytes(self.total_bytes),
            human_bytes(self.granularity as u64),
            if self.virtual_memory { "yes" } else { "no" },
            if self.memory_pools { "yes" } else { "no" },
            self.driver_version.0,
            self.driver_version.1,
        )
    }
}

/// Whether the CUDA driver library can be loaded here (with every entry point this
/// crate uses). Initializes nothing.
///
/// ```
/// println!("CUDA driver present: {}", devpool_cuda::driver_available());
/// ```
pub fn driver_available() -> bool {
    driver::load().is_ok()
}

/// The driver version as (major, minor): CUDA 13.0 is (13, 0).
///
/// ```
/// match devpool_cuda::driver_version() {
///     Ok((major, minor)) => println!("CUDA driver {major}.{minor}"),
///     Err(e) => println!("{e}"),
/// }
/// ```
pub fn driver_version() -> Result<(u32, u32), BackendError> {
    driver::load()?;
    let mut v: c_int = 0;
    // SAFETY: the driver is loaded; cuDriverGetVersion needs no initialization and
    // writes one int.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut v)
    })?;
    let v = v.max(0) as u32;
    Ok((v / 1000, (v % 1000) / 10))
}

/// How many CUDA devices the driver sees.
///
/// ```
/// let n = devpool_cuda::device_count().unwrap_or(0);
/// println!("{n} CUDA devices");
/// ```
pub fn device_count() -> Result<u32, BackendError> {
    driver::init()?;
    let mut n: c_int = 0;
    // SAFETY: the driver is initialized; cuDeviceGetCount writes one int.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) })?;
    Ok(n.max(0) as u32)
}

/// Facts about device `ordinal`. Makes the device's primary context (through the
/// shared [`CudaBackend::get`]) to read its free memory.
///
/// ```
/// match devpool_cuda::device_info(0) {
///     Ok(info) => println!("{info}"),
///     Err(e) => println!("no device 0: {e}"),
/// }
/// ```
pub fn device_info(ordinal: u32) -> Result<DeviceInfo, BackendError> {
    let dev = device_handle(ordinal)?;
    let backend = CudaBackend::get(ordinal)?;
    let (free_bytes, total_bytes) = backend.mem_info()?;
    let attr = |a| attribute(dev, a).map(|v| v.max(0) as u32);
    use sys::CUdevice_attribute as A;
    let virtual_memory = attr(A::CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED)? != 0;
    Ok(DeviceInfo {
        ordinal,
        name: name_of(dev)?,
        total_bytes,
        free_bytes,
        granularity: backend.granularity(),
        compute_capability: (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        driver_version: driver_version()?,
        virtual_memory,
        memory_pools: attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0,
    })
}

//! The process-wide state: the settings, and one allocator per device made on first
//! use.
//!
//! Devices live in a fixed array of [`OnceLock`]s indexed by ordinal, so the hot
//! path finds its device with one atomic load. Devices are made under the settings
//! lock, which also freezes the settings: once a device exists, `devpool_configure`
//! answers [`DEVPOOL_ERR_TOO_LATE`](crate::DEVPOOL_ERR_TOO_LATE).

use crate::config::{Config, ConfigError};
use crate::report::{fail, set_log_mode, Kind};
use crate::table::PtrTable;
use devpool::BackendKind;
use devpool_adaptors::Statistics;
use devpool_core::{Allocator, Backend, BackendError};
use devpool_testing::{MockBackend, MockConfig};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Devices served, ordinals `0..MAX_DEVICES`.
pub const MAX_DEVICES: usize = 64;

/// The environment variable read once, on first use, for the initial settings.
pub const CONFIG_ENV: &str = "DEVPOOL_CONFIG";

struct Settings {
    cfg: Config,
    frozen: bool,
}

static SETTINGS: OnceLock<Mutex<Settings>> = OnceLock::new();
static DEVICES: [OnceLock<Device>; MAX_DEVICES] = [const { OnceLock::new() }; MAX_DEVICES];
/// Bit `d` is set once device `d`'s allocator exists: lookups by pointer visit only
/// the devices in use.
static MADE: AtomicU64 = AtomicU64::new(0);

fn settings() -> &'static Mutex<Settings> {
    SETTINGS.get_or_init(|| {
        let mut cfg = Config::default();
        if let Ok(text) = std::env::var(CONFIG_ENV) {
            if let Err(e) = cfg.apply(&text) {
                fail(
                    Kind::Config,
                    &format!("{CONFIG_ENV}: {e}; the default settings stay"),
                );
            }
        }
        set_log_mode(cfg.log);
        Mutex::new(Settings { cfg, frozen: false })
    })
}

/// Why `devpool_configure` refused a string.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ConfigureError {
    /// It does not parse, or names values that do not fit together.
    Invalid(ConfigError),
    /// A device's allocator exists already.
    TooLate,
}

/// Apply a configuration string over the current settings.
pub(crate) fn configure(text: &str) -> Result<(), ConfigureError> {
    let mut s = settings().lock();
    if s.frozen {
        return Err(ConfigureError::TooLate);
    }
    s.cfg.apply(text).map_err(ConfigureError::Invalid)?;
    set_log_mode(s.cfg.log);
    Ok(())
}

/// The settings now.
pub(crate) fn current_config() -> Config {
    settings().lock().cfg.clone()
}

/// Counts of calls refused or questioned, per device.
#[derive(Default)]
pub(crate) struct Misuse {
    /// Frees and `record_stream`s of pointers that are not live on any device
    /// (double frees and foreign pointers).
    pub(crate) unknown_pointer: AtomicU64,
    /// Frees naming this device for a block of another.
    pub(crate) wrong_device: AtomicU64,
    /// Frees whose size differs from the size allocated (the block is freed).
    pub(crate) size_mismatch: AtomicU64,
}

/// One device's allocator and its table of live blocks.
pub(crate) struct Device {
    pub(crate) ordinal: u32,
    /// The strategy, behind the adaptor that counts what the C ABI hands out.
    pub(crate) allocator: Statistics<Box<dyn Allocator>>,
    pub(crate) table: PtrTable,
    pub(crate) misuse: Misuse,
    pub(crate) config: Config,
}

impl Device {
    /// What the C ABI handed out on this device, counted at its boundary.
    pub(crate) fn live(&self) -> crate::counters::LiveSnapshot {
        crate::counters::LiveSnapshot::of(&self.allocator.snapshot())
    }

    /// The allocator.
    #[inline]
    pub(crate) fn alloc(&self) -> &dyn Allocator {
        &self.allocator
    }
}

/// Why a device's allocator is not there.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeviceError {
    /// An ordinal outside `0..MAX_DEVICES`.
    #[error("device {0} is out of range (0..{MAX_DEVICES})")]
    OutOfRange(i64),
    /// The CUDA backend of the device could not be opened.
    #[error("device {ordinal}: CUDA backend: {source}")]
    Cuda {
        /// The ordinal.
        ordinal: usize,
        /// What the driver said.
        source: BackendError,
    },
}

/// A device ordinal from C, checked.
pub(crate) fn ordinal(device: i32) -> Result<usize, DeviceError> {
    usize::try_from(device)
        .ok()
        .filter(|&d| d < MAX_DEVICES)
        .ok_or(DeviceError::OutOfRange(device.into()))
}

/// The device if its allocator exists already.
#[inline]
pub(crate) fn existing(ordinal: usize) -> Option<&'static Device> {
    DEVICES.get(ordinal)?.get()
}

/// Every device whose allocator exists, in ordinal order.
pub(crate) fn all_existing() -> impl Iterator<Item = &'static Device> {
    let mut made = MADE.load(Ordering::Acquire);
    std::iter::from_fn(move || {
        while made != 0 {
            let d = made.trailing_zeros() as usize;
            made &= made - 1;
            if let Some(dev) = existing(d) {
                return Some(dev);
            }
        }
        None
    })
}

/// The device, made now if it is the first use. A device that cannot be made (no
/// CUDA device with that ordinal, say) is not remembered: the next call tries again.
#[inline]
pub(crate) fn device(ordinal: usize) -> Result<&'static Device, DeviceError> {
    if let Some(d) = existing(ordinal) {
        return Ok(d);
    }
    make(ordinal)
}

#[cold]
fn make(ordinal: usize) -> Result<&'static Device, DeviceError> {
    let slot = DEVICES
        .get(ordinal)
        .ok_or(DeviceError::OutOfRange(ordinal as i64))?;
    let mut s = settings().lock();
    if let Some(d) = slot.get() {
        return Ok(d);
    }
    let cfg = s.cfg.clone();
    let backend = make_backend(&cfg, ordinal)?;
    let dev = Device {
        ordinal: ordinal as u32,
        allocator: Statistics::new(cfg.spec().build(backend)),
        table: PtrTable::new(),
        misuse: Misuse::default(),
        config: cfg,
    };
    s.frozen = true;
    // Only this thread sets slots, under the settings lock, and the slot was empty.
    let dev = slot.get_or_init(|| dev);
    MADE.fetch_or(1 << ordinal, Ordering::Release);
    Ok(dev)
}

fn make_backend(cfg: &Config, ordinal: usize) -> Result<Arc<dyn Backend>, DeviceError> {
    match cfg.backend {
        BackendKind::Cuda => match devpool_cuda::CudaBackend::get(ordinal as u32) {
            Ok(b) => Ok(b),
            Err(source) => Err(DeviceError::Cuda { ordinal, source }),
        },
        BackendKind::Mock => {
            let mock = MockConfig::default()
                .device(ordinal as u32)
                .capacity(cfg.mock_capacity);
            Ok(MockBackend::shared_with(mock))
        }
    }
}

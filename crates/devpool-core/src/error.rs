//! Errors. Every bad input gets one of these, never a panic.

use crate::types::{human_bytes, DeviceId, DevicePtr};

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What an out-of-memory error reports, so a user can see where the memory went.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OomInfo {
    /// Bytes the failed request asked for.
    pub requested: usize,
    /// Bytes live in the allocator (requested sizes of blocks handed out).
    pub live: u64,
    /// Bytes the allocator holds from the backend but has not handed out.
    pub cached: u64,
    /// Bytes the allocator holds from the backend.
    pub reserved: u64,
    /// Bytes the backend reports free on the device.
    pub backend_free: u64,
    /// Bytes the backend reports in total on the device.
    pub backend_total: u64,
    /// Extra context: which strategy or route holds the most unused memory.
    pub note: String,
}

impl OomInfo {
    /// The report of a request for `requested` bytes that failed while the allocator
    /// held what `stats` says and the device had `free` of `total` bytes free.
    ///
    /// ```
    /// use devpool_core::{OomInfo, Stats};
    /// let info = OomInfo::from_stats(64, &Stats::default(), (1, 2), "allocator x".into());
    /// assert_eq!((info.requested, info.backend_free, info.backend_total), (64, 1, 2));
    /// ```
    pub fn from_stats(
        requested: usize,
        stats: &crate::Stats,
        (free, total): (u64, u64),
        note: String,
    ) -> Self {
        OomInfo {
            requested,
            live: stats.live_bytes.current,
            cached: stats.cached_bytes(),
            reserved: stats.reserved_bytes.current,
            backend_free: free,
            backend_total: total,
            note,
        }
    }
}

impl std::fmt::Display for OomInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "requested {} ({} B); allocator holds {} reserved, {} live, {} cached; device has {} free of {}",
            human_bytes(self.requested as u64),
            self.requested,
            human_bytes(self.reserved),
            human_bytes(self.live),
            human_bytes(self.cached),
            human_bytes(self.backend_free),
            human_bytes(self.backend_total)
        )?;
        if !self.note.is_empty() {
            write!(f, "; {}", self.note)?;
        }
        Ok(())
    }
}

/// Errors from a [`Backend`](crate::Backend): the driver, or the mock.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
pub enum BackendError {
    /// The device has no memory left for this call.
    #[error("backend out of memory: asked for {requested} B, {free} B free of {total} B")]
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// Bytes free on the device.
        free: u64,
        /// Bytes in total.
        total: u64,
    },
    /// The backend cannot do this at all (e.g. virtual memory on a backend without it).
    #[error("backend does not support {0}")]
    Unsupported(&'static str),
    /// The backend is not usable here (no CUDA driver, no device with that ordinal).
    #[error("backend unavailable: {0}")]
    Unavailable(String),
    /// A call got an argument it rejects (unaligned size, unknown address...).
    #[error("invalid argument to {call}: {detail}")]
    InvalidArgument {
        /// The call.
        call: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// The driver returned an error code.
    #[error("{call} failed: {detail}")]
    Driver {
        /// The driver call.
        call: &'static str,
        /// The driver's error, in words.
        detail: String,
    },
    /// A failure injected by a test through the mock backend.
    #[error("injected failure in {call}")]
    Injected {
        /// The call that was made to fail.
        call: &'static str,
    },
}

/// Errors returned by allocators.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// No memory could be found for the request, even after giving cached memory back.
    #[error("out of memory: {0}")]
    OutOfMemory(Box<OomInfo>),
    /// The alignment is not a power of two, or larger than the allocator supports.
    #[error("invalid alignment {align}: must be a power of two the allocator supports")]
    InvalidAlignment {
        /// The alignment asked for.
        align: usize,
    },
    /// The request is larger than this allocator can ever serve.
    #[error("request of {size} B is larger than the {max} B this allocator can serve")]
    TooLarge {
        /// Bytes asked for.
        size: usize,
        /// The largest request served.
        max: usize,
    },
    /// The block was not handed out by this allocator.
    #[error("pointer {ptr} was not handed out by this allocator")]
    NotOwned {
        /// The pointer.
        ptr: DevicePtr,
    },
    /// The block was already freed.
    #[error("double free of {ptr}")]
    DoubleFree {
        /// The pointer.
        ptr: DevicePtr,
    },
    /// The block belongs to another device.
    #[error("block {ptr} lives on {block_device}, but this allocator serves {allocator_device}")]
    WrongDevice {
        /// The pointer.
        ptr: DevicePtr,
        /// The device of the block.
        block_device: DeviceId,
        /// The device of the allocator.
        allocator_device: DeviceId,
    },
    /// The operation is not supported by this allocator.
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    /// A limit set by the user was hit.
    #[error("limit exceeded: {0}")]
    Limit(String),
    /// A debug check found memory written where it must not be (guard bytes).
    #[error("memory corruption at {ptr}: {detail}")]
    Corrupted {
        /// The block.
        ptr: DevicePtr,
        /// What was found.
        detail: String,
    },
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

impl Error {
    /// [`Error::TooLarge`] for `size` bytes, against the largest size any allocation
    /// may have (`isize::MAX`).
    pub fn too_large(size: usize) -> Error {
        Error::TooLarge {
            size,
            max: isize::MAX as usize,
        }
    }

    /// Whether this is an out-of-memory error (from the allocator or the backend).
    pub fn is_oom(&self) -> bool {
        matches!(
            self,
            Error::OutOfMemory(_) | Error::Backend(BackendError::OutOfMemory { .. })
        )
    }
}

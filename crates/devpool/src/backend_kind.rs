//! [`BackendKind`]: where device memory comes from, by name.

use std::fmt;
use std::str::FromStr;

/// Where device memory comes from: the names the command-line tool (`--backend`)
/// and the C ABI (`backend=`) take.
///
/// ```
/// use devpool::BackendKind;
/// assert_eq!("mock".parse::<BackendKind>(), Ok(BackendKind::Mock));
/// assert_eq!(BackendKind::Cuda.to_string(), "cuda");
/// assert!("opencl".parse::<BackendKind>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum BackendKind {
    /// A CPU stand-in for a GPU's memory ([`MockBackend`](crate::MockBackend)): fake
    /// addresses, no GPU.
    Mock,
    /// The CUDA driver (the `devpool-cuda` crate).
    Cuda,
}

impl BackendKind {
    /// Every kind, in the order messages list them.
    pub const ALL: [BackendKind; 2] = [BackendKind::Mock, BackendKind::Cuda];

    /// The name in configuration strings and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Mock => "mock",
            BackendKind::Cuda => "cuda",
        }
    }
}

/// A backend name that is neither `mock` nor `cuda`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend `{name}` (mock or cuda)")]
pub struct UnknownBackend {
    /// The name asked for, cut to 64 bytes.
    pub name: String,
}

impl FromStr for BackendKind {
    type Err = UnknownBackend;

    fn from_str(name: &str) -> Result<Self, UnknownBackend> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| UnknownBackend {
                name: devpool_core::excerpt(name, 64).into_owned(),
            })
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

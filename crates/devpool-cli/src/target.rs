//! Choosing the backend and building allocators on it.

use crate::error::{CliError, Result};
use crate::overlay::Overlay;
use crate::BackendArgs;
use devpool::{BackendKind, StrategySpec};
use devpool_core::{Allocator, Backend};
use devpool_cuda::{cuda_malloc, CudaBackend, CudaMallocAsync};
use devpool_testing::MockBackend;
use std::sync::Arc;

/// The driver's own allocators, run beside the strategies with `--backend cuda`.
pub const BASELINES: &[&str] = &["cuMemAlloc", "cuMemAllocAsync"];

/// A backend for one run.
pub enum Target {
    /// A new CPU mock of an H200's memory.
    Mock(Arc<MockBackend>),
    /// A new handle on a CUDA device, with its own counters.
    Cuda(Arc<CudaBackend>),
}

impl Target {
    /// The backend as a trait object.
    pub fn backend(&self) -> Arc<dyn Backend> {
        match self {
            Target::Mock(m) => m.clone(),
            Target::Cuda(c) => c.clone(),
        }
    }
}

/// A fresh backend for one run.
pub fn fresh_backend(args: &BackendArgs) -> Result<Target> {
    check_device(args)?;
    match args.backend {
        BackendKind::Mock => Ok(Target::Mock(MockBackend::shared())),
        BackendKind::Cuda => CudaBackend::new(args.device)
            .map(Target::Cuda)
            .map_err(|source| CliError::Backend {
                what: format!("CUDA backend on device {}", args.device),
                source,
            }),
    }
}

/// Refuse a device ordinal the backend cannot honour: the mock is one device.
pub fn check_device(args: &BackendArgs) -> Result<()> {
    if args.backend == BackendKind::Mock && args.device != 0 {
        return Err(CliError::MockDevice(args.device));
    }
    Ok(())
}

/// Build `name` on `target`: a devpool strategy (with the `--config` settings that
/// concern it, if any: the flag says whether some did), or on CUDA one of the
/// driver's own allocators.
pub fn build(
    name: &str,
    target: &Target,
    overlay: Option<&Overlay>,
) -> Result<(Box<dyn Allocator>, bool)> {
    match (name, target) {
        ("cuMemAlloc", Target::Cuda(c)) => Ok((Box::new(cuda_malloc(c.clone())), false)),
        ("cuMemAllocAsync", Target::Cuda(c)) => CudaMallocAsync::new(c.clone())
            .map(|a| (Box::new(a) as Box<dyn Allocator>, false))
            .map_err(|source| CliError::Backend {
                what: name.to_string(),
                source,
            }),
        (n, Target::Mock(_)) if BASELINES.contains(&n) => Err(CliError::NeedsCuda(n.into())),
        _ => {
            let spec = name.parse::<StrategySpec>().map_err(|_| unknown(name))?;
            let (spec, changed) = match overlay {
                Some(o) => o.apply(spec),
                None => (spec, false),
            };
            Ok((spec.build(target.backend()), changed))
        }
    }
}

fn unknown(name: &str) -> CliError {
    CliError::UnknownStrategy(devpool_core::excerpt(name, 64).into_owned())
}

/// The strategies to run: those asked for, or all of them (plus the driver's own
/// allocators on CUDA).
pub fn strategies(asked: &[String], args: &BackendArgs) -> Result<Vec<String>> {
    let known: Vec<&str> = devpool::STRATEGIES.iter().map(|s| s.name).collect();
    if asked.is_empty() {
        let mut v: Vec<String> = StrategySpec::listed().map(|s| s.to_string()).collect();
        if args.backend == BackendKind::Cuda {
            v.extend(BASELINES.iter().map(|s| s.to_string()));
        }
        return Ok(v);
    }
    for a in asked {
        if !known.contains(&a.as_str()) && !BASELINES.contains(&a.as_str()) {
            return Err(unknown(a));
        }
    }
    Ok(asked.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_and_devices_are_typed_errors() {
        let mock = BackendArgs {
            backend: BackendKind::Mock,
            device: 0,
        };
        let target = fresh_backend(&mock).unwrap();
        assert!(matches!(
            build("best-fit-please", &target, None).map(|_| ()),
            Err(CliError::UnknownStrategy(n)) if n == "best-fit-please"
        ));
        assert!(matches!(
            build(BASELINES[0], &target, None).map(|_| ()),
            Err(CliError::NeedsCuda(_))
        ));
        assert!(matches!(
            strategies(&["x".repeat(1000)], &mock),
            Err(CliError::UnknownStrategy(n)) if n.len() < 100
        ));
        let second = BackendArgs { device: 1, ..mock };
        assert!(matches!(
            fresh_backend(&second),
            Err(CliError::MockDevice(1))
        ));
    }
}

//! Choosing the backend and building allocators on it.

use crate::BackendArgs;
use devpool_core::{Allocator, Backend, MockBackend};
use devpool_cuda::{cuda_malloc, CudaBackend, CudaMallocAsync};
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
pub fn fresh_backend(args: &BackendArgs) -> Result<Target, String> {
    check_device(args)?;
    match args.backend.as_str() {
        "mock" => Ok(Target::Mock(MockBackend::shared())),
        "cuda" => CudaBackend::new(args.device)
            .map(Target::Cuda)
            .map_err(|e| format!("CUDA backend on device {}: {e}", args.device)),
        other => Err(format!(
            "unknown backend '{}': use mock or cuda",
            devpool_core::excerpt(other, 64)
        )),
    }
}

/// Refuse a device ordinal the backend cannot honour: the mock is one device.
pub fn check_device(args: &BackendArgs) -> Result<(), String> {
    if args.backend == "mock" && args.device != 0 {
        return Err(format!(
            "--device {}: the mock backend is a single device (0); use --backend cuda for a GPU",
            args.device
        ));
    }
    Ok(())
}

/// Build `name` on `target`: a devpool strategy, or on CUDA one of the driver's own
/// allocators.
pub fn build(name: &str, target: &Target) -> Result<Box<dyn Allocator>, String> {
    match (name, target) {
        ("cuMemAlloc", Target::Cuda(c)) => Ok(Box::new(cuda_malloc(c.clone()))),
        ("cuMemAllocAsync", Target::Cuda(c)) => CudaMallocAsync::new(c.clone())
            .map(|a| Box::new(a) as Box<dyn Allocator>)
            .map_err(|e| format!("{name}: {e}")),
        (n, Target::Mock(_)) if BASELINES.contains(&n) => {
            Err(format!("{name} needs --backend cuda"))
        }
        _ => name
            .parse::<devpool::StrategySpec>()
            .map(|spec| spec.build(target.backend()))
            .map_err(|e| e.to_string()),
    }
}

/// The strategies to run: those asked for, or all of them (plus the driver's own
/// allocators on CUDA).
pub fn strategies(asked: &[String], args: &BackendArgs) -> Result<Vec<String>, String> {
    let known: Vec<&str> = devpool::STRATEGIES.iter().map(|s| s.name).collect();
    if asked.is_empty() {
        let mut v: Vec<String> = devpool::StrategySpec::listed()
            .map(|s| s.to_string())
            .collect();
        if args.backend == "cuda" {
            v.extend(BASELINES.iter().map(|s| s.to_string()));
        }
        return Ok(v);
    }
    for a in asked {
        if !known.contains(&a.as_str()) && !BASELINES.contains(&a.as_str()) {
            return Err(format!(
                "unknown strategy '{}': see `devpool strategies`",
                devpool_core::excerpt(a, 64)
            ));
        }
    }
    Ok(asked.to_vec())
}

//! `devpool info`.

use crate::error::{CliError, Result};
use crate::BackendArgs;
use devpool::BackendKind;
use devpool_core::{human_bytes, Backend};
use devpool_testing::MockBackend;

pub fn info(args: &BackendArgs) -> Result<()> {
    crate::target::check_device(args)?;
    match args.backend {
        BackendKind::Mock => {
            let m = MockBackend::default();
            let (free, total) = m.mem_info().map_err(|source| CliError::Backend {
                what: "mock backend".into(),
                source,
            })?;
            println!("backend: mock (CPU stand-in for a GPU's memory)");
            println!(
                "memory:  {} free of {}",
                human_bytes(free),
                human_bytes(total)
            );
            println!(
                "pages:   {} (virtual ranges and page mapping supported)",
                human_bytes(m.granularity() as u64)
            );
            match devpool_cuda::device_info(args.device) {
                Ok(d) => println!("a CUDA device is present too: {d}; use --backend cuda"),
                Err(e) => println!("CUDA: not available here ({e})"),
            }
            Ok(())
        }
        BackendKind::Cuda => {
            let d = devpool_cuda::device_info(args.device).map_err(|source| CliError::Backend {
                what: format!("CUDA device {}", args.device),
                source,
            })?;
            println!("backend: cuda");
            println!("{d}");
            Ok(())
        }
    }
}

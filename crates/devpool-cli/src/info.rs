//! `devpool info`.

use crate::BackendArgs;
use devpool_core::{human_bytes, Backend, MockBackend};

pub fn info(args: &BackendArgs) -> Result<(), String> {
    crate::target::check_device(args)?;
    match args.backend.as_str() {
        "mock" => {
            let m = MockBackend::default();
            let (free, total) = m.mem_info().map_err(|e| e.to_string())?;
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
        "cuda" => {
            let d = devpool_cuda::device_info(args.device)
                .map_err(|e| format!("CUDA device {}: {e}", args.device))?;
            println!("backend: cuda");
            println!("{d}");
            Ok(())
        }
        other => Err(format!(
            "unknown backend '{}': use mock or cuda",
            devpool_core::excerpt(other, 64)
        )),
    }
}

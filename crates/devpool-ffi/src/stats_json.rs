//! The statistics of one device as a JSON object, for `devpool_stats_json`.

use crate::registry::{self, Device};
use devpool_core::Parts;
use serde_json::{json, Value};
use std::sync::atomic::Ordering::Relaxed;

/// The JSON text for `device`, or an error message for an ordinal out of range.
///
/// A device whose allocator exists gives:
///
/// - `device`, `initialized: true`, `strategy`, `backend`, `config` (the settings it
///   was made with, as a configuration string);
/// - `stats`: the allocator's [`devpool_core::Stats`] (`live_bytes`,
///   `allocated_bytes`, `reserved_bytes`, `live_blocks` as `{current, peak}`;
///   `allocations`, `frees`, `backend_calls`, `failures`);
/// - `backend_counters`: the backend's [`devpool_core::BackendCounters`], whose
///   `bytes_in_use` is the device memory held, counted by the backend itself;
/// - `reserved_bytes` and `peak_reserved_bytes`: `backend_counters.bytes_in_use`
///   current and peak, the figures to compare with PyTorch's `reserved_bytes`;
/// - `live_pointers`: blocks handed out through the C ABI and not yet freed;
/// - `bad_calls`: `unknown_pointer`, `wrong_device`, `size_mismatch` counts;
/// - `panics`: panics caught in the library since it was loaded (all devices);
/// - `c_abi`: the blocks as the C ABI counted them crossing it (`requested_bytes`,
///   `allocated_bytes`, `blocks` as `{current, peak, allocated, freed}`, peaks since
///   the last `devpool_reset_peak_stats`; `failures`): an independent count beside
///   the strategy's own `stats`;
/// - `routes`: for the hybrid strategies, `small`, `large`, `huge` statistics;
///   otherwise `null`;
/// - `driver_calls`: on the CUDA backend, the time inside each driver entry point
///   the backend called (`call`, `calls`, `total_ns`, `max_ns`; most time first)
///   since the process began, every user of the device's backend included;
///   otherwise an empty list.
///
/// A device without an allocator yet gives `device`, `initialized: false` and the
/// `config` a first allocation would use.
pub(crate) fn stats_json(device: i32) -> Result<String, StatsError> {
    let ordinal = registry::ordinal(device)?;
    let value = match registry::existing(ordinal) {
        Some(dev) => of_device(dev),
        None => json!({
            "device": ordinal,
            "initialized": false,
            "config": registry::current_config().to_string(),
        }),
    };
    Ok(serde_json::to_string(&value)?)
}

/// Why no statistics came back.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StatsError {
    /// A bad ordinal.
    #[error(transparent)]
    Device(#[from] registry::DeviceError),
    /// The statistics did not serialize.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

fn of_device(dev: &Device) -> Value {
    let alloc = dev.alloc();
    let counters = alloc.backend().counters();
    let routes = match alloc.parts() {
        Parts::Routes(routes) => Value::Object(
            routes
                .iter()
                .map(|r| (r.route.to_string(), json!(r.stats)))
                .collect(),
        ),
        _ => Value::Null,
    };
    json!({
        "device": dev.ordinal,
        "initialized": true,
        "strategy": dev.config.strategy.name(),
        "backend": alloc.backend().name(),
        "config": dev.config.to_string(),
        "stats": alloc.stats(),
        "backend_counters": counters,
        "reserved_bytes": counters.bytes_in_use.current,
        "peak_reserved_bytes": counters.bytes_in_use.peak,
        "live_pointers": dev.table.len(),
        "bad_calls": {
            "unknown_pointer": dev.misuse.unknown_pointer.load(Relaxed),
            "wrong_device": dev.misuse.wrong_device.load(Relaxed),
            "size_mismatch": dev.misuse.size_mismatch.load(Relaxed),
        },
        "panics": crate::guard::panics(),
        "c_abi": dev.live(),
        "routes": routes,
        "driver_calls": driver_calls(dev),
    })
}

/// The driver times of the device's CUDA backend (none on the mock).
fn driver_calls(dev: &Device) -> Value {
    if dev.alloc().backend().name() != "cuda" {
        return json!([]);
    }
    // The device's backend is the process-wide one of its ordinal, made already.
    match devpool_cuda::CudaBackend::get(dev.ordinal) {
        Ok(b) => Value::Array(
            b.driver_times()
                .iter()
                .map(|t| {
                    json!({
                        "call": t.call,
                        "calls": t.calls,
                        "total_ns": t.total_ns,
                        "max_ns": t.max_ns,
                    })
                })
                .collect(),
        ),
        Err(_) => json!([]),
    }
}

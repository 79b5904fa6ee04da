//! Where a replay's allocator time went, on a backend that times its driver calls:
//! the calls that waited for the driver against those that did not, and the
//! driver's entry points that took the time.

use devpool_trace::{OpLatency, ReplayReport};
use std::fmt::Write;

/// Total time of the calls of `l`, in milliseconds.
fn ms(l: &OpLatency) -> f64 {
    l.mean_ns * l.count as f64 / 1e6
}

/// The time table of `reports` (those without driver times are left out).
pub fn time_table(reports: &[ReplayReport]) -> String {
    let mut t = String::new();
    let w = crate::table::name_width(reports);
    let _ = writeln!(
        t,
        "{:<22} {:<w$} {:>10} {:>16} {:>11} {:>11} {:>10} {:>15} {:>10}  driver calls (ms, calls, longest)",
        "trace",
        "strategy",
        "alloc ms",
        "drv allocs: n",
        "their ms",
        "their p50",
        "other p99",
        "drv frees: n",
        "driver ms",
    );
    for r in reports.iter().filter(|r| !r.driver_calls.is_empty()) {
        let l = &r.latency;
        let driver_ms = r.driver_calls.iter().map(|c| c.total_ns).sum::<u64>() as f64 / 1e6;
        let calls: Vec<String> = r
            .driver_calls
            .iter()
            .take(4)
            .map(|c| {
                format!(
                    "{} {:.1}/{}/{:.0}µs",
                    c.call,
                    c.total_ns as f64 / 1e6,
                    c.calls,
                    c.max_ns as f64 / 1e3
                )
            })
            .collect();
        let _ = writeln!(
            t,
            "{:<22} {:<w$} {:>10.1} {:>16} {:>11.1} {:>8} ns {:>7} ns {:>15} {:>10.1}  {}",
            r.trace,
            r.strategy,
            ms(&l.alloc),
            l.alloc_calling_backend.count,
            ms(&l.alloc_calling_backend),
            l.alloc_calling_backend.median_ns,
            l.alloc_not_calling_backend.p99_ns,
            format!(
                "{} ({:.1} ms)",
                l.free_calling_backend.count,
                ms(&l.free_calling_backend)
            ),
            driver_ms,
            calls.join(", ")
        );
    }
    t.push_str(
        "drv allocs / frees = the calls that took or gave back memory through the backend, \
         and the time inside them; other p99 = the p99 of the other allocations; driver ms \
         = time inside the driver's memory and event calls, all of them\n",
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use devpool_trace::{DriverCall, LatencySummary};

    #[test]
    fn driver_times_and_the_split_are_shown() {
        let lat = |count, mean_ns| OpLatency {
            count,
            mean_ns,
            median_ns: 1000,
            p99_ns: 2000,
            max_ns: 3000,
        };
        let with = ReplayReport {
            trace: "t".into(),
            strategy: "hybrid".into(),
            latency: LatencySummary {
                alloc: lat(10, 1e6),
                alloc_calling_backend: lat(2, 4e6),
                ..LatencySummary::default()
            },
            driver_calls: vec![DriverCall {
                call: "cuMemCreate".into(),
                calls: 3,
                total_ns: 5_500_000,
                max_ns: 2_000_000,
            }],
            ..ReplayReport::default()
        };
        let without = ReplayReport {
            strategy: "elsewhere".into(),
            ..with.clone()
        };
        let without = ReplayReport {
            driver_calls: vec![],
            ..without
        };
        let t = time_table(&[with, without]);
        assert!(t.contains("cuMemCreate 5.5/3/2000µs"), "{t}");
        assert!(t.contains(" 10.0 ") && t.contains(" 8.0 "), "{t}");
        assert!(!t.contains("elsewhere"), "{t}");
    }
}

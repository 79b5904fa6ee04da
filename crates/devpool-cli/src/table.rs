//! The replay table of `devpool compare` and `devpool replay`, its footnotes, and
//! the warnings a trace earns.

use devpool_core::human_bytes;
use devpool_trace::ReplayReport;
use std::fmt::Write;

/// The fragmentation cell: the ratio, marked `*` when allocations failed (it then
/// covers only what the strategy served), or `n/a` when there is no ratio to give
/// (nothing live, or fewer bytes held than live: memory the backend does not see).
fn frag(r: &ReplayReport) -> String {
    if r.peak_live_bytes == 0 || r.fragmentation_ratio < 1.0 {
        "n/a".into()
    } else if r.failed_allocations > 0 {
        format!("{:.3}*", r.fragmentation_ratio)
    } else {
        format!("{:.3}", r.fragmentation_ratio)
    }
}

/// The width of the strategy column: the longest name (settings from `--config`
/// included), at least 17.
pub fn name_width(reports: &[ReplayReport]) -> usize {
    reports
        .iter()
        .map(|r| r.strategy.len())
        .max()
        .unwrap_or(0)
        .max(17)
}

/// The table of `reports`, with the footnotes its marks need.
pub fn table(reports: &[ReplayReport]) -> String {
    let mut t = String::new();
    let w = name_width(reports);
    let _ = writeln!(
        t,
        "{:<22} {:<w$} {:>7} {:>11} {:>11} {:>10} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "trace",
        "strategy",
        "frag",
        "peak held",
        "peak live",
        "rounding",
        "failed",
        "calls/kop",
        "drv alloc",
        "alloc p50",
        "alloc p99",
        "free p50"
    );
    let mut last = "";
    for r in reports {
        if r.trace != last && !last.is_empty() {
            t.push('\n');
        }
        last = &r.trace;
        let _ = writeln!(
            t,
            "{:<22} {:<w$} {:>7} {:>11} {:>11} {:>10} {:>6} {:>9.2} {:>8.2}% {:>7} ns {:>6} ns {:>6} ns",
            r.trace,
            r.strategy,
            frag(r),
            human_bytes(r.peak_reserved_bytes),
            human_bytes(r.peak_live_bytes),
            human_bytes(r.rounding_waste_at_peak),
            r.failed_allocations,
            r.backend.per_1000_ops.memory_calls,
            r.allocations_calling_backend_pct(),
            r.latency.alloc.median_ns,
            r.latency.alloc.p99_ns,
            r.latency.free.median_ns,
        );
    }
    t.push_str(
        "drv alloc = allocations that took or gave back memory through the backend (on a \
         GPU, they wait for the driver; above 1%, alloc p99 is one of them)\n",
    );
    if reports.iter().any(|r| frag(r).ends_with('*')) {
        t.push_str(
            "* allocations failed: the strategy did not run the whole trace, and its ratio \
             covers only the blocks it served\n",
        );
    }
    if reports.iter().any(|r| frag(r) == "n/a") {
        t.push_str(
            "n/a: no ratio: nothing was live, or the backend counted fewer bytes held than \
             live (memory it does not see)\n",
        );
    }
    t
}

/// What is wrong with the trace itself, as one replay saw it, if anything: allocations
/// at an address still live, double frees, frees of addresses never allocated. The
/// same for every strategy, since it comes from the trace.
pub fn trace_warning(r: &ReplayReport) -> Option<String> {
    let mut parts = Vec::new();
    if r.missing_frees > 0 {
        parts.push(format!(
            "{} allocations at an address still live (the trace lacks the earlier block's \
             free; the replay freed it first)",
            r.missing_frees
        ));
    }
    if r.double_frees > 0 {
        parts.push(format!("{} double frees (ignored)", r.double_frees));
    }
    if r.unknown_frees > 0 {
        parts.push(format!(
            "{} frees of addresses the trace never allocated (ignored)",
            r.unknown_frees
        ));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "warning: trace {} is inconsistent: {}",
            r.trace,
            parts.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(ratio: f64, failed: u64) -> ReplayReport {
        ReplayReport {
            trace: "t".into(),
            strategy: "s".into(),
            peak_live_bytes: 100,
            peak_reserved_bytes: (ratio * 100.0) as u64,
            fragmentation_ratio: ratio,
            failed_allocations: failed,
            ..ReplayReport::default()
        }
    }

    #[test]
    fn ratios_are_shown_only_where_they_mean_something() {
        let t = table(&[report(1.25, 0)]);
        assert!(
            t.contains(" 1.250 ") && !t.contains('*') && !t.contains("n/a"),
            "{t}"
        );
        let t = table(&[report(4.0, 12)]);
        assert!(
            t.contains("4.000*") && t.contains("* allocations failed"),
            "{t}"
        );
        let t = table(&[report(0.5, 0)]);
        assert!(
            !t.contains("0.500") && t.contains("n/a") && t.contains("n/a: no ratio"),
            "{t}"
        );
        let empty = ReplayReport::default();
        assert!(table(&[empty]).contains("n/a"));
    }

    #[test]
    fn warnings_name_each_kind() {
        assert_eq!(trace_warning(&report(1.0, 0)), None);
        let r = ReplayReport {
            missing_frees: 2,
            double_frees: 3,
            unknown_frees: 4,
            ..report(1.0, 0)
        };
        let w = trace_warning(&r).unwrap();
        for want in [
            "2 allocations at an address still live",
            "3 double frees",
            "4 frees of addresses",
        ] {
            assert!(w.contains(want), "{w}");
        }
    }
}

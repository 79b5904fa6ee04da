//! `devpool compare` and `devpool replay`.

use crate::target::{build, fresh_backend, strategies};
use crate::BackendArgs;
use devpool_core::human_bytes;
use devpool_trace::{plot_timelines, read_trace, replay, ReplayOptions, ReplayReport, Trace};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};

/// The bundled traces: `traces/` under the working directory, else the one in the
/// source tree this binary was built from.
fn default_traces() -> Result<Vec<PathBuf>, String> {
    let here = PathBuf::from("traces");
    let dir = if here.is_dir() {
        here
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces")
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| {
            format!(
                "no trace given and no bundled traces/ folder ({}): {e}",
                dir.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.ends_with(".csv") || n.ends_with(".csv.gz") || n.ends_with(".pickle")
        })
        .collect();
    v.sort();
    if v.is_empty() {
        return Err(format!("no traces in {}", dir.display()));
    }
    Ok(v)
}

fn load(path: &Path) -> Result<Trace, String> {
    read_trace(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn run_one(
    trace: &Trace,
    strategy: &str,
    args: &BackendArgs,
    opts: &ReplayOptions,
) -> Result<ReplayReport, String> {
    let target = fresh_backend(args)?;
    let alloc = build(strategy, &target)?;
    let mut r = replay(trace, &*alloc, opts);
    r.strategy = strategy.to_string();
    if crate::target::BASELINES.contains(&strategy) && r.peak_reserved_bytes == 0 {
        // The driver's own pool holds its memory out of the backend's sight: take the
        // pool's own high-water mark.
        r.peak_reserved_bytes = alloc.stats().reserved_bytes.peak;
        if r.peak_live_bytes > 0 {
            r.fragmentation_ratio = r.peak_reserved_bytes as f64 / r.peak_live_bytes as f64;
        }
    }
    let _ = alloc.trim();
    Ok(r)
}

fn bar(len: u64, msg: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} ({elapsed})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_message(msg.to_string());
    pb
}

fn plot_name(trace: &str) -> String {
    let stem: String = trace
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{stem}.svg")
}

pub fn compare(
    traces: Vec<PathBuf>,
    strategies_asked: Vec<String>,
    plots: PathBuf,
    json: bool,
    args: &BackendArgs,
) -> Result<(), String> {
    let traces = if traces.is_empty() {
        default_traces()?
    } else {
        traces
    };
    let names = strategies(&strategies_asked, args)?;
    let loaded: Vec<Trace> = traces.iter().map(|p| load(p)).collect::<Result<_, _>>()?;
    let total: u64 = loaded.iter().map(|t| t.events.len() as u64).sum::<u64>() * names.len() as u64;
    let pb = if json {
        ProgressBar::hidden()
    } else {
        bar(total, "replaying")
    };
    let opts = ReplayOptions::default();
    let mut all: Vec<ReplayReport> = Vec::new();
    std::fs::create_dir_all(&plots).map_err(|e| format!("{}: {e}", plots.display()))?;
    let started = std::time::Instant::now();
    for t in &loaded {
        let mut runs = Vec::new();
        for s in &names {
            pb.set_message(format!("{} / {s}", t.name));
            let r = run_one(t, s, args, &opts)?;
            pb.inc(t.events.len() as u64);
            runs.push(r);
        }
        let path = plots.join(plot_name(&t.name));
        let refs: Vec<&ReplayReport> = runs.iter().collect();
        plot_timelines(
            &path,
            &format!("{}: live and held device bytes", t.name),
            &refs,
        )
        .map_err(|e| format!("{}: {e}", path.display()))?;
        all.extend(runs);
    }
    pb.finish_and_clear();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&all).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    print_table(&all);
    println!(
        "\n{} replays of {} traces in {:.2} s on the {} backend; plots in {}/",
        all.len(),
        loaded.len(),
        started.elapsed().as_secs_f64(),
        args.backend,
        plots.display()
    );
    println!("frag = peak device bytes held / peak live requested bytes (1.000 is the floor).");
    Ok(())
}

fn print_table(all: &[ReplayReport]) {
    println!(
        "{:<22} {:<17} {:>7} {:>11} {:>11} {:>10} {:>6} {:>9} {:>9} {:>9} {:>9}",
        "trace",
        "strategy",
        "frag",
        "peak held",
        "peak live",
        "rounding",
        "failed",
        "calls/kop",
        "alloc p50",
        "alloc p99",
        "free p50"
    );
    let mut last = String::new();
    for r in all {
        if r.trace != last && !last.is_empty() {
            println!();
        }
        last = r.trace.clone();
        println!(
            "{:<22} {:<17} {:>7.3} {:>11} {:>11} {:>10} {:>6} {:>9.2} {:>7} ns {:>6} ns {:>6} ns",
            r.trace,
            r.strategy,
            r.fragmentation_ratio,
            human_bytes(r.peak_reserved_bytes),
            human_bytes(r.peak_live_bytes),
            human_bytes(r.rounding_waste_at_peak),
            r.failed_allocations,
            r.backend.per_1000_ops.memory_calls,
            r.latency.alloc.median_ns,
            r.latency.alloc.p99_ns,
            r.latency.free.median_ns,
        );
    }
}

pub fn replay_one(
    trace: PathBuf,
    strategy: &str,
    plot: Option<PathBuf>,
    json: bool,
    args: &BackendArgs,
) -> Result<(), String> {
    let names = strategies(&[strategy.to_string()], args)?;
    let t = load(&trace)?;
    let pb = if json {
        ProgressBar::hidden()
    } else {
        bar(t.events.len() as u64, &t.name)
    };
    let pb2 = pb.clone();
    let opts = ReplayOptions {
        progress: Some(Box::new(move |n| pb2.set_position(n))),
        ..ReplayOptions::default()
    };
    let r = run_one(&t, &names[0], args, &opts)?;
    pb.finish_and_clear();
    if let Some(p) = &plot {
        plot_timelines(p, &format!("{}: {}", t.name, r.strategy), &[&r])
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if json {
        let mut v = serde_json::to_value(&r).map_err(|e| e.to_string())?;
        if let Some(o) = v.as_object_mut() {
            o.remove("timeline");
        }
        println!("{}", serde_json::to_string(&v).map_err(|e| e.to_string())?);
    } else {
        print_table(std::slice::from_ref(&r));
        println!(
            "\n{} events in {:.1} ms; {} allocations, {} frees, {} unknown frees, {} live at the end",
            r.events, r.wall_ms, r.allocations, r.frees, r.unknown_frees, r.leaked_at_end
        );
    }
    Ok(())
}

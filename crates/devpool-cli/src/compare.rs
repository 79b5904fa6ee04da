//! `devpool compare` and `devpool replay`.
//!
//! Each trace file is read as it is replayed, once per strategy, so memory grows
//! with the blocks live at once, not with the length of the trace; the progress bar
//! counts the bytes of the files read.

use crate::error::{CliError, Result};
use crate::inputs::{default_traces, label, plot_names, Input};
use crate::overlay::Overlay;
use crate::table::{table, trace_warning};
use crate::target::{build, fresh_backend, strategies, Target};
use crate::time_table::time_table;
use crate::BackendArgs;
use devpool_trace::{
    open_trace, plot_timelines, replay_events, DriverCall, ReplayOptions, ReplayReport,
};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

/// What a command found wrong with its traces: warnings printed, exit status 2.
pub type Warned = bool;

/// Replay `input` through `strategy` on a fresh backend; `pb` shows the bytes of the
/// file read, from `done` bytes of earlier work on.
fn run_one(
    input: &Input,
    strategy: &str,
    args: &BackendArgs,
    pb: &ProgressBar,
    done: u64,
    overlay: Option<&Overlay>,
) -> Result<ReplayReport> {
    let reader = open_trace(&input.path)?;
    let read = reader.bytes_read_handle();
    let pb2 = pb.clone();
    let opts = ReplayOptions::default().with_progress(move |_| {
        pb2.set_position(done + read.load(std::sync::atomic::Ordering::Relaxed))
    });
    let target = fresh_backend(args)?;
    let (alloc, changed) = build(strategy, &target, overlay)?;
    if let Target::Cuda(c) = &target {
        c.reset_driver_times();
    }
    let mut r = replay_events(&input.label, reader, &*alloc, &opts)?;
    r.strategy = crate::overlay::row_name(strategy, changed, overlay);
    if let Target::Cuda(c) = &target {
        r.driver_calls = c
            .driver_times()
            .into_iter()
            .map(|t| DriverCall {
                call: t.call.to_string(),
                calls: t.calls,
                total_ns: t.total_ns,
                max_ns: t.max_ns,
            })
            .collect();
    }
    if crate::target::BASELINES.contains(&strategy) && r.peak_reserved_bytes == 0 {
        // The driver's own pool holds its memory out of the backend's sight: take the
        // pool's own high-water mark.
        r.peak_reserved_bytes = alloc.stats().reserved_bytes.peak;
        if r.peak_live_bytes > 0 {
            r.fragmentation_ratio = r.peak_reserved_bytes as f64 / r.peak_live_bytes as f64;
        }
    }
    let _ = alloc.trim();
    if r.allocations + r.failed_allocations == 0 {
        return Err(CliError::EmptyTrace {
            path: input.path.clone(),
            events: r.events,
        });
    }
    Ok(r)
}

fn bar(len: u64, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} {msg} [{bar:30}] {bytes}/{total_bytes} of trace files read ({elapsed})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    pb
}

/// Size of a file, for the progress bar (0 when unknown).
fn file_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

pub fn compare(
    traces: Vec<PathBuf>,
    strategies_asked: Vec<String>,
    plots: PathBuf,
    json: bool,
    args: &BackendArgs,
    overlay: Option<&Overlay>,
) -> Result<Warned> {
    let traces = if traces.is_empty() {
        default_traces()?
    } else {
        traces
    };
    let names = strategies(&strategies_asked, args)?;
    let inputs = label(traces);
    let labels: Vec<&str> = inputs.iter().map(|i| i.label.as_str()).collect();
    let plot_files = plot_names(&labels);
    let total: u64 = inputs.iter().map(|i| file_len(&i.path)).sum::<u64>() * names.len() as u64;
    let pb = bar(total, json);
    let mut all: Vec<ReplayReport> = Vec::new();
    let mut warnings = Vec::new();
    std::fs::create_dir_all(&plots).map_err(|source| CliError::Write {
        path: plots.clone(),
        source,
    })?;
    let started = std::time::Instant::now();
    let mut done = 0;
    for (input, plot_file) in inputs.iter().zip(&plot_files) {
        let mut runs = Vec::new();
        let len = file_len(&input.path);
        for s in &names {
            pb.set_message(format!("{} / {s}", input.label));
            let r = run_one(input, s, args, &pb, done, overlay)?;
            done += len;
            pb.set_position(done);
            runs.push(r);
        }
        warnings.extend(runs.first().and_then(trace_warning));
        let path = plots.join(plot_file);
        let refs: Vec<&ReplayReport> = runs.iter().collect();
        plot_timelines(
            &path,
            &format!("{}: live and held device bytes", input.label),
            &refs,
        )
        .map_err(|source| CliError::Plot { path, source })?;
        all.extend(runs);
    }
    pb.finish_and_clear();
    for w in &warnings {
        eprintln!("devpool: {w}");
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(!warnings.is_empty());
    }
    print!("{}", table(&all));
    if all.iter().any(|r| !r.driver_calls.is_empty()) {
        print!("\n{}", time_table(&all));
    }
    println!(
        "\n{} replays of {} traces in {:.2} s on the {} backend; plots in {}/",
        all.len(),
        inputs.len(),
        started.elapsed().as_secs_f64(),
        args.backend,
        plots.display()
    );
    println!("frag = peak device bytes held / peak live requested bytes (1.000 is the floor).");
    Ok(!warnings.is_empty())
}

pub fn replay_one(
    trace: PathBuf,
    strategy: &str,
    plot: Option<PathBuf>,
    json: bool,
    args: &BackendArgs,
    overlay: Option<&Overlay>,
) -> Result<Warned> {
    let names = strategies(&[strategy.to_string()], args)?;
    if let Some(p) = &plot {
        let svg = p.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg"));
        if !svg {
            return Err(CliError::NotSvg(p.clone()));
        }
    }
    let input = label(vec![trace]).remove(0);
    let pb = bar(file_len(&input.path), json);
    pb.set_message(input.label.clone());
    let r = run_one(&input, &names[0], args, &pb, 0, overlay)?;
    pb.finish_and_clear();
    if let Some(p) = &plot {
        plot_timelines(p, &format!("{}: {}", input.label, r.strategy), &[&r]).map_err(
            |source| CliError::Plot {
                path: p.clone(),
                source,
            },
        )?;
    }
    let warning = trace_warning(&r);
    if let Some(w) = &warning {
        eprintln!("devpool: {w}");
    }
    if json {
        let mut v = serde_json::to_value(&r)?;
        if let Some(o) = v.as_object_mut() {
            o.remove("timeline");
        }
        println!("{}", serde_json::to_string(&v)?);
    } else {
        print!("{}", table(std::slice::from_ref(&r)));
        if !r.driver_calls.is_empty() {
            print!("\n{}", time_table(std::slice::from_ref(&r)));
        }
        println!(
            "\n{} events in {:.1} ms; {} allocations ({} failed), {} frees, {} live at the end; \
             trace faults: {} allocations at a live address, {} double frees, {} frees of \
             unknown addresses",
            r.events,
            r.wall_ms,
            r.allocations,
            r.failed_allocations,
            r.frees,
            r.leaked_at_end,
            r.missing_frees,
            r.double_frees,
            r.unknown_frees
        );
    }
    Ok(warning.is_some())
}

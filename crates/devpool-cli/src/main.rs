//! `devpool`: compare allocation strategies on real traces, replay one, benchmark
//! them, and show the device.

mod bench;
mod cabi;
mod compare;
mod error;
mod fifo;
mod info;
mod inputs;
mod live;
mod overlay;
mod reference;
mod table;
mod target;
mod time_table;

use clap::{Parser, Subcommand};
use devpool::BackendKind;
use std::path::PathBuf;
use std::process::ExitCode;

/// GPU device-memory allocators: compare strategies on real allocation traces,
/// replay a trace, benchmark latency, show the device.
///
/// Everything runs on a CPU mock of an H200's memory unless `--backend cuda` is given.
#[derive(Parser)]
#[command(name = "devpool", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where device memory comes from.
#[derive(clap::Args, Clone, Debug)]
pub struct BackendArgs {
    /// Where device memory comes from.
    #[arg(long, value_enum, default_value_t = BackendKind::Mock)]
    pub backend: BackendKind,
    /// CUDA device ordinal (with `--backend cuda`).
    #[arg(long, default_value_t = 0)]
    pub device: u32,
}

#[derive(Subcommand)]
enum Command {
    /// Replay traces through every strategy: a table of fragmentation (peak device
    /// bytes held over peak live bytes), rounding waste, backend calls and latency,
    /// and an SVG plot per trace of live against held bytes over time.
    Compare {
        /// Trace files (RMM CSV logs, plain or gzip, or PyTorch snapshot pickles).
        /// Default: every trace in the bundled traces/ folder.
        traces: Vec<PathBuf>,
        /// Comma-separated strategies (default: all; see `devpool strategies`).
        #[arg(long, value_delimiter = ',')]
        strategies: Vec<String>,
        /// Folder for the SVG plots.
        #[arg(long, default_value = "devpool-plots")]
        plots: PathBuf,
        /// Print one JSON array of the replay reports instead of the table.
        #[arg(long)]
        json: bool,
        /// Settings laid over every strategy they concern, as the C ABI's
        /// configuration string: small_max, huge_min, cache_floor, move_margin,
        /// move_slack, move_memory, map_batch, chunk_pages, chunk_divisor, chunk_min_pages,
        /// burst, reserve (e.g. "move_memory=off;chunk_divisor=4", "burst=on"). Reports
        /// of the strategies they change carry them in their name.
        #[arg(long)]
        config: Option<String>,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Replay one trace through one strategy.
    Replay {
        /// The trace file.
        trace: PathBuf,
        /// The strategy (see `devpool strategies`).
        #[arg(long, default_value_t = devpool::StrategySpec::default().to_string())]
        strategy: String,
        /// Write an SVG plot of live against held bytes here.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// Print one JSON object (strategy, trace, events, peak_live_bytes,
        /// peak_reserved_bytes, fragmentation_ratio, failed_allocations, ...).
        #[arg(long)]
        json: bool,
        /// Settings laid over the strategy, as for `compare --config`.
        #[arg(long)]
        config: Option<String>,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Latency workloads for every strategy: same-size pairs at 4 KiB, 1 MiB and
    /// 64 MiB, the RMM-style random loop, pairs on 1 and N threads each on its own
    /// stream, and a FIFO stream of blocks freed oldest first (with the memory held).
    /// With `--backend cuda`, the driver's own allocators (cuMemAlloc,
    /// cuMemAllocAsync) run the same workloads in the same process. The host's
    /// `malloc` runs them too, first, as a reference for host bookkeeping.
    Bench {
        #[command(flatten)]
        args: bench::BenchArgs,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Which backend is in use; the device's name and memory when a GPU is present.
    Info {
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// List the strategies.
    Strategies,
}

/// Exit status of a run that finished but found its traces inconsistent (double
/// frees, frees of unknown addresses, allocations at a live address).
const EXIT_TRACE_WARNINGS: u8 = 2;

/// Die quietly, as other Unix tools do, when the reader of standard output goes away
/// (`devpool compare --json | head -c 10`), instead of failing on the closed pipe.
fn default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default at the start of main,
    // before any other thread exists; SIG_DFL is a valid handler for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    default_sigpipe();
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Compare {
            traces,
            strategies,
            plots,
            json,
            config,
            backend,
        } => overlay(config).and_then(|o| {
            compare::compare(traces, strategies, plots, json, &backend, o.as_ref()).map(warned)
        }),
        Command::Replay {
            trace,
            strategy,
            plot,
            json,
            config,
            backend,
        } => overlay(config).and_then(|o| {
            compare::replay_one(trace, &strategy, plot, json, &backend, o.as_ref()).map(warned)
        }),
        Command::Bench { args, backend } => {
            bench::bench(args, &backend).map(|()| ExitCode::SUCCESS)
        }
        Command::Info { backend } => info::info(&backend).map(|()| ExitCode::SUCCESS),
        Command::Strategies => {
            for s in devpool::STRATEGIES {
                println!("{:18} {}", s.name, s.about);
            }
            Ok(ExitCode::SUCCESS)
        }
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("devpool: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Success, or the status that says the traces had faults.
fn warned(w: compare::Warned) -> ExitCode {
    if w {
        ExitCode::from(EXIT_TRACE_WARNINGS)
    } else {
        ExitCode::SUCCESS
    }
}

/// The `--config` settings, read.
fn overlay(text: Option<String>) -> error::Result<Option<overlay::Overlay>> {
    text.as_deref().map(overlay::Overlay::parse).transpose()
}

//! Write the synthetic streaming trace of the tests (an image pipeline) as an RMM CSV
//! log, to replay it with `devpool compare FILE`:
//!
//! ```sh
//! cargo run --release -p devpool-ring --example streaming_trace -- streaming.csv [STEPS]
//! ```
#[path = "../tests/common/streaming.rs"]
mod streaming;

use std::io::BufWriter;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: streaming_trace FILE.csv [STEPS]");
        std::process::exit(2);
    };
    let steps = match args.next().map(|s| s.parse::<usize>()) {
        None => 400,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("STEPS must be a positive number");
            std::process::exit(2);
        }
    };
    let trace = streaming::image_pipeline(steps);
    let file = match std::fs::File::create(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = devpool_trace::write_rmm_csv(&trace, BufWriter::new(file)) {
        eprintln!("{path}: {e}");
        std::process::exit(1);
    }
    println!(
        "{path}: {} events, {} steps, peak live {} bytes",
        trace.events.len(),
        steps,
        trace.peak_live_bytes()
    );
}

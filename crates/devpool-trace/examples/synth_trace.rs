//! Write a long synthetic trace in RMM's CSV log format, gzip-compressed, to measure
//! what reading and replaying a long trace costs (time, peak memory):
//!
//! ```text
//! cargo run --release -p devpool-trace --example synth_trace -- big.csv.gz 60000000
//! /usr/bin/time -v devpool replay big.csv.gz --strategy hybrid
//! ```
//!
//! About 4000 blocks are live at any time, sizes log-uniform in [256 B, 64 MiB], on
//! two streams; each event is 1 µs after the previous one.

use devpool_core::Rng;
use devpool_trace::RMM_CSV_HEADER;
use std::io::{BufWriter, Write};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(out), Some(events)) = (args.next(), args.next()) else {
        eprintln!("usage: synth_trace OUT.csv.gz EVENTS");
        std::process::exit(2);
    };
    let Ok(events) = events.parse::<u64>() else {
        eprintln!("synth_trace: EVENTS must be a number, not {events}");
        std::process::exit(2);
    };
    if let Err(e) = write(&out, events) {
        eprintln!("synth_trace: {out}: {e}");
        std::process::exit(1);
    }
}

fn write(out: &str, events: u64) -> std::io::Result<()> {
    let file = std::fs::File::create(out)?;
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    let mut w = BufWriter::with_capacity(1 << 20, gz);
    writeln!(w, "{RMM_CSV_HEADER}")?;
    let mut rng = Rng::new(60);
    let mut live: Vec<(u64, usize, u64)> = Vec::new();
    let mut next_ptr = 0x7f00_0000_0000u64;
    for i in 0..events {
        let us = i;
        let time = format!(
            "{:02}:{:02}:{:02}.{:06}",
            us / 3_600_000_000,
            us / 60_000_000 % 60,
            us / 1_000_000 % 60,
            us % 1_000_000
        );
        if live.len() < 4000 && (live.is_empty() || rng.below(2) == 0) {
            let size = rng.log_uniform(256, 64 << 20);
            let stream = rng.below(2);
            let ptr = next_ptr;
            next_ptr = next_ptr.wrapping_add(size as u64 + 256) & !255;
            writeln!(w, "0,{time},allocate,{ptr:#x},{size},{stream:#x}")?;
            live.push((ptr, size, stream));
        } else {
            let (ptr, size, stream) = live.swap_remove(rng.below(live.len() as u64) as usize);
            writeln!(w, "0,{time},free,{ptr:#x},{size},{stream:#x}")?;
        }
    }
    w.into_inner().map_err(|e| e.into_error())?.finish()?;
    Ok(())
}

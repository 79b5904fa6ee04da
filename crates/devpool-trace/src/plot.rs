//! [`plot_timelines`]: live and reserved bytes over a replay, as an SVG.

use crate::error::TraceError;
use crate::report::ReplayReport;
use plotters::prelude::*;
use std::path::Path;

/// Colours of the first reserved-bytes lines; further runs get colours of their own
/// ([`colour`]).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// The colour of run `i`: the palette, then hues spread by the golden angle, so no
/// two runs of a plot share a colour.
fn colour(i: usize) -> RGBColor {
    if let Some(&c) = PALETTE.get(i) {
        return c;
    }
    let hue = ((i - PALETTE.len()) as f64 * 0.381_966 + 0.05).fract();
    let (r, g, b) = HSLColor(hue, 0.75, 0.38).to_rgba().rgb();
    RGBColor(r, g, b)
}

/// The unit of the byte axis (bytes per unit, name) for values up to `max` bytes:
/// the largest in which `max` is at least 1.
fn unit(max: u64) -> (f64, &'static str) {
    [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        .into_iter()
        .find(|&(u, _)| max >= u)
        .map_or((1.0, "bytes"), |(u, n)| (u as f64, n))
}

/// Decimals that tell apart axis labels `step` apart.
fn decimals(step: f64) -> usize {
    if step >= 1.0 || step <= 0.0 {
        0
    } else {
        (-step.log10()).ceil() as usize
    }
}

/// Tick labels on an axis: at most 10, and no more than there are whole steps when
/// the axis counts events.
const LABELS: usize = 10;

/// How a run is named in the legend: its peak and ratio, or why it has no ratio.
fn legend(run: &ReplayReport, scale: f64, unit: &str) -> String {
    let peak = run.peak_reserved_bytes as f64 / scale;
    let ratio = if run.failed_allocations > 0 {
        format!("{} allocations failed: no ratio", run.failed_allocations)
    } else if run.peak_live_bytes == 0 {
        "nothing live: no ratio".to_string()
    } else if run.fragmentation_ratio < 1.0 {
        "held below live (memory the backend does not see): no ratio".to_string()
    } else {
        format!("{:.3}x", run.fragmentation_ratio)
    };
    format!("{} reserved, peak {peak:.2} {unit} ({ratio})", run.strategy)
}

/// Draw the timelines of `runs` (replays of one trace) into an SVG file at `path`:
/// live requested bytes once (from the first run) and each run's reserved bytes over
/// the event index, in the largest unit the peak fills (GiB, MiB, KiB or bytes), with
/// each strategy's fragmentation ratio in the legend, or why it has none (failed
/// allocations, held below live). Every run has a colour of its own.
pub fn plot_timelines(path: &Path, title: &str, runs: &[&ReplayReport]) -> Result<(), TraceError> {
    let label = path.display().to_string();
    let err = |e: &dyn std::fmt::Display| TraceError::Plot {
        path: label.clone(),
        msg: e.to_string(),
    };
    let Some(first) = runs.first() else {
        return Err(err(&"no replay to plot"));
    };
    let x_max = runs.iter().map(|r| r.events.max(1)).max().unwrap_or(1) as f64;
    let max_bytes = runs
        .iter()
        .flat_map(|r| r.timeline.iter())
        .map(|p| p.reserved_bytes.max(p.live_bytes))
        .max()
        .unwrap_or(0);
    let (scale, unit_name) = unit(max_bytes);
    let y_max = max_bytes as f64 / scale;
    let y_max = if y_max > 0.0 { y_max * 1.05 } else { 1.0 };
    let y_decimals = decimals(y_max / LABELS as f64);
    // Events are whole numbers: no more labels than there are events to name.
    let x_labels = LABELS.min(x_max as usize + 1);

    let root = SVGBackend::new(path, (1200, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("event")
        .y_desc(unit_name)
        .x_labels(x_labels)
        .y_labels(LABELS)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.y_decimals$}"))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| err(&e))?;

    for (i, run) in runs.iter().enumerate() {
        let color = colour(i);
        let reserved = run
            .timeline
            .iter()
            .map(|p| (p.event as f64, p.reserved_bytes as f64 / scale));
        chart
            .draw_series(LineSeries::new(reserved, color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(legend(run, scale, unit_name))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    // Live bytes last, so that the line shows above the reserved lines.
    let live = first
        .timeline
        .iter()
        .map(|p| (p.event as f64, p.live_bytes as f64 / scale));
    chart
        .draw_series(LineSeries::new(live, BLACK.stroke_width(1)))
        .map_err(|e| err(&e))?
        .label(format!(
            "live (requested), peak {:.2} {unit_name}",
            first.peak_live_bytes as f64 / scale
        ))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(1)));

    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

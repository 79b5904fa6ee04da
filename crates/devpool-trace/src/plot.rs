//! [`plot_timelines`]: live and reserved bytes over a replay, as an SVG.

use crate::error::TraceError;
use crate::report::ReplayReport;
use plotters::prelude::*;
use std::path::Path;

const GIB: f64 = (1u64 << 30) as f64;

/// Colours of the reserved-bytes lines, one per run (repeating past the end).
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

/// Draw the timelines of `runs` (replays of one trace) into an SVG file at `path`:
/// live requested bytes once (from the first run) and each run's reserved bytes, in
/// GiB over the event index, with each strategy's fragmentation ratio in the legend.
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
    let y_max = runs
        .iter()
        .flat_map(|r| r.timeline.iter())
        .map(|p| p.reserved_bytes.max(p.live_bytes))
        .max()
        .unwrap_or(0) as f64
        / GIB;
    let y_max = if y_max > 0.0 { y_max * 1.05 } else { 1.0 };

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
        .y_desc("GiB")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| err(&e))?;

    for (i, run) in runs.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let reserved = run
            .timeline
            .iter()
            .map(|p| (p.event as f64, p.reserved_bytes as f64 / GIB));
        chart
            .draw_series(LineSeries::new(reserved, color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(format!(
                "{} reserved, peak {:.2} GiB ({:.3}x)",
                run.strategy,
                run.peak_reserved_bytes as f64 / GIB,
                run.fragmentation_ratio
            ))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    // Live bytes last, so that the line shows above the reserved lines.
    let live = first
        .timeline
        .iter()
        .map(|p| (p.event as f64, p.live_bytes as f64 / GIB));
    chart
        .draw_series(LineSeries::new(live, BLACK.stroke_width(1)))
        .map_err(|e| err(&e))?
        .label(format!(
            "live (requested), peak {:.2} GiB",
            first.peak_live_bytes as f64 / GIB
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

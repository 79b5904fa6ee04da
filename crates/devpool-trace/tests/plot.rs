//! Timeline plots.
mod common;

use devpool_core::{direct, MockBackend};
use devpool_trace::{plot_timelines, read_trace, replay, ReplayOptions, TraceError};

#[test]
fn svg_has_one_line_per_series() {
    let trace = read_trace(&common::bundled("resnet50_train.csv.gz")).unwrap();
    let opts = ReplayOptions::default();
    let a = replay(&trace, &direct(MockBackend::shared()), &opts);
    let mut b = replay(&trace, &direct(MockBackend::shared()), &opts);
    b.strategy = "direct-again".into();
    let path = common::TempFile::new("timeline.svg");
    let path = path.path();
    plot_timelines(path, "resnet50_train", &[&a, &b]).unwrap();
    let svg = std::fs::read_to_string(path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(100)]);
    assert!(svg.contains("resnet50_train"));
    assert!(svg.contains("direct reserved"));
    assert!(svg.contains("direct-again reserved"));
    assert!(svg.contains("live (requested)"));
    // Live bytes once, reserved bytes per run: three data lines at least.
    assert!(svg.matches("<polyline").count() >= 3);
}

#[test]
fn nothing_to_plot_is_an_error() {
    let path = common::TempFile::new("empty.svg");
    let path = path.path();
    let e = plot_timelines(path, "t", &[]).unwrap_err();
    assert!(matches!(e, TraceError::Plot { .. }), "{e}");
}

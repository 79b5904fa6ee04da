//! Timeline plots.
mod common;

use devpool_core::direct;
use devpool_testing::MockBackend;
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

/// The text elements of an SVG: (x, y, text).
fn texts(svg: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(at) = rest.find("<text ") {
        rest = &rest[at..];
        let attr = |name: &str| {
            let key = format!(" {name}=\"");
            let i = rest.find(&key).map(|i| i + key.len()).unwrap_or(0);
            rest[i..].split('"').next().unwrap_or("").to_string()
        };
        let (x, y) = (attr("x"), attr("y"));
        let open = rest.find('>').unwrap() + 1;
        let close = rest.find("</text>").unwrap();
        out.push((x, y, rest[open..close].trim().to_string()));
        rest = &rest[close..];
    }
    out
}

#[test]
fn small_traces_get_axis_labels_that_differ() {
    // Three events, a few KiB: labels such as 0, 0, 1, 2, 2 or 0.0 GiB seven times
    // say nothing.
    let trace = devpool_trace::Trace::new(
        "tiny",
        vec![
            devpool_trace::TraceEvent::allocate(0x10, 1000),
            devpool_trace::TraceEvent::allocate(0x20, 5000),
            devpool_trace::TraceEvent::free(0x10, 1000),
        ],
    );
    let r = replay(
        &trace,
        &direct(MockBackend::shared()),
        &ReplayOptions::default(),
    );
    let path = common::TempFile::new("tiny.svg");
    let path = path.path();
    plot_timelines(path, "tiny", &[&r]).unwrap();
    let svg = std::fs::read_to_string(path).unwrap();
    let all = texts(&svg);
    let numeric: Vec<&(String, String, String)> =
        all.iter().filter(|t| t.2.parse::<f64>().is_ok()).collect();
    // Labels of the x axis share a y coordinate, those of the y axis an x coordinate.
    for axis in [0, 1] {
        let mut groups: std::collections::HashMap<&str, Vec<&str>> = Default::default();
        for t in &numeric {
            let key = if axis == 0 {
                t.1.as_str()
            } else {
                t.0.as_str()
            };
            groups.entry(key).or_default().push(&t.2);
        }
        for labels in groups.values().filter(|l| l.len() > 1) {
            let mut seen = labels.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), labels.len(), "repeated axis labels {labels:?}");
        }
    }
    assert!(
        all.iter().any(|t| t.2 == "KiB"),
        "the byte axis is in KiB here"
    );
}

#[test]
fn every_run_has_its_own_colour_and_failed_runs_no_ratio() {
    let trace = read_trace(&common::bundled("resnet50_train.csv.gz")).unwrap();
    let opts = ReplayOptions {
        measure_latency: false,
        ..ReplayOptions::default()
    };
    let base = replay(&trace, &direct(MockBackend::shared()), &opts);
    let mut runs: Vec<devpool_trace::ReplayReport> = (0..12)
        .map(|i| devpool_trace::ReplayReport {
            strategy: format!("run{i}"),
            ..base.clone()
        })
        .collect();
    runs[3].failed_allocations = 7;
    runs[4].fragmentation_ratio = 0.5;
    let refs: Vec<&devpool_trace::ReplayReport> = runs.iter().collect();
    let path = common::TempFile::new("twelve.svg");
    let path = path.path();
    plot_timelines(path, "twelve", &refs).unwrap();
    let svg = std::fs::read_to_string(path).unwrap();
    let mut colours: Vec<&str> = svg
        .split("<polyline")
        .skip(1)
        .filter_map(|p| p.split("stroke=\"").nth(1)?.split('"').next())
        .filter(|c| *c != "#000000")
        .collect();
    assert_eq!(colours.len(), 24, "a line and a legend mark per run");
    colours.sort();
    colours.dedup();
    assert_eq!(colours.len(), 12, "no two runs share a colour");
    let legend: Vec<String> = texts(&svg).into_iter().map(|t| t.2).collect();
    assert!(legend
        .iter()
        .any(|t| t.starts_with("run3 ") && t.contains("7 allocations failed: no ratio")));
    assert!(legend
        .iter()
        .any(|t| t.starts_with("run4 ") && t.contains("held below live")));
    assert!(legend
        .iter()
        .any(|t| t.starts_with("run5 ") && t.contains('x')));
}

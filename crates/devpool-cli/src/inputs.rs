//! The traces a command replays: the files, and a label for each that no other
//! trace of the run shares (tables, plots and JSON name traces by it).

use crate::error::CliError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A trace file and its label in this run.
pub struct Input {
    /// The file.
    pub path: PathBuf,
    /// The trace's name, made unique in the run.
    pub label: String,
}

/// The bundled traces: `traces/` under the working directory, else the one in the
/// source tree this binary was built from.
pub fn default_traces() -> Result<Vec<PathBuf>, CliError> {
    let here = PathBuf::from("traces");
    let dir = if here.is_dir() {
        here
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces")
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|source| CliError::NoTraceFolder {
            dir: dir.clone(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.ends_with(".csv") || n.ends_with(".csv.gz") || n.ends_with(".pickle")
        })
        .collect();
    v.sort();
    if v.is_empty() {
        return Err(CliError::NoTraces(dir));
    }
    Ok(v)
}

/// Label each file with its trace name; where names clash, with the folder it is in
/// too, and where that still clashes, with its place in the list.
pub fn label(paths: Vec<PathBuf>) -> Vec<Input> {
    let name = |p: &Path| devpool_trace::trace_name(p);
    let with_dir = |p: &Path| {
        let dir = p
            .parent()
            .and_then(|d| d.file_name())
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default();
        if dir.is_empty() {
            name(p)
        } else {
            format!("{dir}/{}", name(p))
        }
    };
    let mut count: HashMap<String, usize> = HashMap::new();
    for p in &paths {
        *count.entry(name(p)).or_default() += 1;
    }
    let mut labels: Vec<String> = paths
        .iter()
        .map(|p| {
            if count[&name(p)] > 1 {
                with_dir(p)
            } else {
                name(p)
            }
        })
        .collect();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for l in &mut labels {
        let n = seen.entry(l.clone()).or_default();
        *n += 1;
        if *n > 1 {
            *l = format!("{l}#{n}");
        }
    }
    paths
        .into_iter()
        .zip(labels)
        .map(|(path, label)| Input { path, label })
        .collect()
}

/// A file name for the plot of the trace labelled `label`: letters, digits, `-` and
/// `_` kept, anything else `_`. Labels that differ only in other characters get
/// their place in the run added, so that no plot overwrites another.
pub fn plot_names(labels: &[&str]) -> Vec<String> {
    let stem = |l: &str| -> String {
        l.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let mut count: HashMap<String, usize> = HashMap::new();
    for l in labels {
        *count.entry(stem(l)).or_default() += 1;
    }
    labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let s = stem(l);
            if count[&s] > 1 {
                format!("{s}_{}.svg", i + 1)
            } else {
                format!("{s}.svg")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clashing_names_get_distinct_labels_and_plots() {
        let paths: Vec<PathBuf> = ["a/x.csv", "b/x.csv.gz", "b/x.csv", "y.csv"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let labels: Vec<String> = label(paths).into_iter().map(|i| i.label).collect();
        assert_eq!(labels, ["a/x", "b/x", "b/x#2", "y"]);
        let refs: Vec<&str> = labels.iter().map(|s| s.as_str()).collect();
        let plots = plot_names(&refs);
        assert_eq!(plots, ["a_x.svg", "b_x.svg", "b_x_2.svg", "y.svg"]);
        assert_eq!(plot_names(&["a/b", "a_b"]), ["a_b_1.svg", "a_b_2.svg"]);
    }
}

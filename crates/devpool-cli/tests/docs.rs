//! What the README, the C header and the hybrid's crate docs say about names,
//! commands and preset figures is what the code does.
use devpool::hybrid::HybridConfig;
use devpool::{StrategySpec, STRATEGIES};
use std::path::Path;
use std::process::Command;

fn read(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The `backticked` words of `text`.
fn ticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The table rows of the README's "## Strategies" section.
fn strategy_rows(readme: &str) -> Vec<&str> {
    let section = readme
        .split("## Strategies")
        .nth(1)
        .expect("a Strategies section");
    let section = section.split("\n## ").next().unwrap();
    section.lines().filter(|l| l.starts_with("| `")).collect()
}

/// Sizes as the docs write them: `64 KiB` or `64K`.
fn sizes(bytes: usize) -> [String; 2] {
    let (v, long, short) = if bytes >= 1 << 30 {
        (bytes >> 30, "GiB", "G")
    } else if bytes >= 1 << 20 {
        (bytes >> 20, "MiB", "M")
    } else {
        (bytes >> 10, "KiB", "K")
    };
    [format!("{v} {long}"), format!("{v}{short}")]
}

fn says(text: &str, bytes: usize) -> bool {
    sizes(bytes).iter().any(|s| text.contains(s.as_str()))
}

#[test]
fn the_readme_names_every_strategy_and_only_real_ones() {
    let readme = read("README.md");
    let rows = strategy_rows(&readme);
    let mut named: Vec<&str> = Vec::new();
    for row in &rows {
        let first = row.split('|').nth(1).unwrap();
        for name in ticked(first) {
            assert!(
                name.parse::<StrategySpec>().is_ok(),
                "the README lists `{name}`, which is not a strategy name"
            );
            named.push(name);
        }
    }
    for s in STRATEGIES {
        assert!(
            named.contains(&s.name),
            "the README does not list `{}`",
            s.name
        );
    }
}

#[test]
fn the_readme_lists_every_command() {
    let help = Command::new(env!("CARGO_BIN_EXE_devpool"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 5, "{help}");
    let readme = read("README.md");
    let cli_row = readme
        .lines()
        .find(|l| l.starts_with("| `devpool-cli`"))
        .expect("a devpool-cli row");
    let usage = readme
        .split("Other commands:")
        .nth(1)
        .unwrap()
        .split("\n\n")
        .next()
        .unwrap();
    for c in commands {
        assert!(
            ticked(cli_row).contains(&c),
            "the crates table misses `{c}`: {cli_row}"
        );
        assert!(
            usage.contains(&format!("`devpool {c}")) || c == "compare",
            "the README's usage misses `devpool {c}`"
        );
    }
}

#[test]
fn preset_figures_in_the_docs_are_the_presets() {
    let (training, inference, buddy) = (
        HybridConfig::training(),
        HybridConfig::inference(),
        HybridConfig::with_buddy(),
    );
    assert_eq!(
        training.huge_min,
        usize::MAX,
        "the docs say training has no huge route"
    );
    assert_eq!(
        buddy.huge_min,
        usize::MAX,
        "the docs say with_buddy has no huge route"
    );
    let readme = read("README.md");
    let row = strategy_rows(&readme)
        .into_iter()
        .find(|r| r.starts_with("| `hybrid`"))
        .unwrap();
    assert!(
        says(row, training.small_max) && says(row, buddy.small_max),
        "{row}"
    );
    assert!(says(row, inference.huge_min), "{row}");

    let header = read("crates/devpool-ffi/include/devpool.h");
    // The comment just above the declaration.
    let decl = header
        .find("int devpool_configure(")
        .expect("devpool_configure in the header");
    let configure = &header[header[..decl].rfind("/*").unwrap()..decl];
    // A key's entry: its line and the continuation lines indented below it.
    let after = |key: &str| {
        let i = configure
            .find(key)
            .unwrap_or_else(|| panic!("no {key} in the header"));
        let mut lines = configure[i..].lines();
        let mut entry = lines.next().unwrap().to_string();
        for l in lines {
            match l.strip_prefix(" *    ") {
                Some(more) if more.starts_with(' ') => entry.push_str(more),
                _ => break,
            }
        }
        entry
    };
    let small = after("small_max=");
    assert!(
        says(&small, training.small_max) && says(&small, buddy.small_max),
        "{small}"
    );
    let huge = after("huge_min=");
    assert!(
        says(&huge, inference.huge_min) && huge.contains("off"),
        "{huge}"
    );
    let strategies = after("strategy=");
    for s in STRATEGIES {
        assert!(
            strategies
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .any(|w| w == s.name),
            "the header's strategy list misses {}: {strategies}",
            s.name
        );
    }

    let hybrid_docs = read("crates/devpool-hybrid/src/lib.rs");
    let small = hybrid_docs
        .lines()
        .find(|l| l.starts_with("//! | small"))
        .unwrap();
    assert!(
        says(small, training.small_max) && says(small, buddy.small_max),
        "{small}"
    );
    let huge = hybrid_docs
        .lines()
        .find(|l| l.starts_with("//! | huge"))
        .unwrap();
    assert!(
        says(huge, inference.huge_min) && huge.contains("off"),
        "{huge}"
    );
}

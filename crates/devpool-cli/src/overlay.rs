//! `--config`: settings laid over every strategy they concern, in the C ABI's
//! configuration-string form, so that a trade-off (say, fewer driver calls for more
//! memory) can be replayed beside the strategy's own settings.

use crate::error::{CliError, Result};
use devpool::StrategySpec;
use devpool_ffi::Config;

/// Keys `--config` refuses, and why: the commands set them otherwise.
const REFUSED: [(&str, &str); 4] = [
    ("strategy", "is set with --strategies, not here"),
    ("backend", "is set with --backend, not here"),
    (
        "mock_capacity",
        "is fixed for the mock of compare, replay and bench",
    ),
    ("log", "does not apply to compare, replay and bench"),
];

/// Parsed `--config` settings and the text they came from.
#[derive(Clone, Debug)]
pub struct Overlay {
    text: String,
    cfg: Config,
}

impl Overlay {
    /// Read `text` (`key=value` pairs separated by `;`).
    pub fn parse(text: &str) -> Result<Overlay> {
        for item in text.split(';') {
            let key = item.split('=').next().unwrap_or("").trim();
            if let Some((_, why)) = REFUSED.iter().find(|(k, _)| *k == key) {
                return Err(CliError::Config(format!("`{key}` {why}")));
            }
        }
        let mut cfg = Config::default();
        cfg.apply(text)
            .map_err(|e| CliError::Config(e.to_string()))?;
        Ok(Overlay {
            text: text.trim().to_string(),
            cfg,
        })
    }

    /// `spec` with the settings that concern it applied, and whether any did.
    pub fn apply(&self, spec: StrategySpec) -> (StrategySpec, bool) {
        let mut c = self.cfg.clone();
        c.strategy = spec.clone();
        let out = c.spec();
        let changed = out != spec;
        (out, changed)
    }

    /// The settings as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The name a report of `strategy` carries when the settings changed it.
    pub fn label(&self, strategy: &str) -> String {
        format!("{strategy} [{}]", self.text)
    }
}

/// The name of `strategy`'s rows and reports: with the `--config` settings where they
/// `changed` it.
pub fn row_name(strategy: &str, changed: bool, overlay: Option<&Overlay>) -> String {
    match overlay {
        Some(o) if changed => o.label(strategy),
        _ => strategy.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_apply_where_they_concern_the_strategy() {
        let o = Overlay::parse("move_memory=off; chunk_divisor=4").unwrap();
        let (mut spec, changed) = o.apply("hybrid".parse().unwrap());
        assert!(changed);
        let p = spec.pages_mut().unwrap();
        assert_eq!((p.move_memory, p.chunk_divisor), (false, 4));
        let (_, changed) = o.apply("slab".parse().unwrap());
        assert!(!changed, "the slab has no page layer");
        assert_eq!(
            o.label("hybrid"),
            "hybrid [move_memory=off; chunk_divisor=4]"
        );
    }

    #[test]
    fn bad_settings_and_keys_of_other_flags_are_refused() {
        for bad in [
            "strategy=slab",
            "backend=mock",
            "chunk_pages=0",
            "nonsense=1",
            "move_memory",
        ] {
            assert!(
                matches!(Overlay::parse(bad), Err(CliError::Config(_))),
                "{bad}"
            );
        }
    }
}

//! `--compare HOST_B`: the same run against two hosts, one after the other,
//! shown side by side with the ratios B/A of the mean and of p99.
//!
//! The usual use is one data set served twice, by the default server (A) and
//! by one started with a switch turned off (B), such as `--read-levels off`.

use std::path::{Path, PathBuf};

use crate::config::RunConfig;
use crate::run::{RunReport, run_scenario};
use crate::stats::render_comparison;

/// The two runs of a comparison.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// The run against `--host`.
    pub a: RunReport,
    /// The run against `--compare`.
    pub b: RunReport,
}

impl Comparison {
    /// Whether both runs were clean (see [`RunReport::is_clean`]).
    pub fn is_clean(&self) -> bool {
        self.a.is_clean() && self.b.is_clean()
    }

    /// The side-by-side table, then each run's failures, if any.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} at {} users/hour, A then B:\n",
            self.a.scenario, self.a.users_per_hour
        );
        out.push_str(&render_comparison(
            &self.a.host,
            &self.a.rows(),
            &self.b.host,
            &self.b.rows(),
        ));
        for (label, report) in [("A", &self.a), ("B", &self.b)] {
            if !report.is_clean() {
                out.push_str(&format!("--- {label}: {}", report.render()));
            }
        }
        out
    }
}

/// Runs `config` against its host, then against `host_b` with the same
/// settings. Report files get `-a` and `-b` before their extension.
pub async fn run_comparison(config: RunConfig, host_b: &str) -> anyhow::Result<Comparison> {
    let mut config_a = config.clone();
    config_a.report_files = suffixed(&config.report_files, "a");
    let mut config_b = config.clone();
    config_b.host = host_b.to_string();
    config_b.report_files = suffixed(&config.report_files, "b");
    // Check B before spending the time on A.
    config_b.validate()?;
    let a = run_scenario(config_a).await?;
    let b = run_scenario(config_b).await?;
    Ok(Comparison { a, b })
}

/// `report.html` → `report-a.html` for `suffix` `a`.
pub fn suffixed(paths: &[PathBuf], suffix: &str) -> Vec<PathBuf> {
    paths.iter().map(|path| suffix_path(path, suffix)).collect()
}

fn suffix_path(path: &Path, suffix: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(extension) => format!("{stem}-{suffix}.{}", extension.to_string_lossy()),
        None => format!("{stem}-{suffix}"),
    };
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_files_get_a_suffix() {
        let paths = vec![
            PathBuf::from("report.html"),
            PathBuf::from("out/run.md"),
            PathBuf::from("plain"),
        ];
        assert_eq!(
            suffixed(&paths, "b"),
            vec![
                PathBuf::from("report-b.html"),
                PathBuf::from("out/run-b.md"),
                PathBuf::from("plain-b")
            ]
        );
    }
}

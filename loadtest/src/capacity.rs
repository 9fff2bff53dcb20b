//! `capacity`: the highest arrival rate at which a scenario holds its p99.
//!
//! Short runs at rising rates: doubling from a start rate until a step fails
//! (whole-scenario p99 over the limit, any failure, or an incomplete run), then
//! halving the gap between the last rate that held and the first that failed
//! a few times. Every step is a bounded [`run_scenario`]; the search is
//! bounded by a maximum rate and a number of refinements.

use std::time::Duration;

use crate::config::{MAX_USERS, RunConfig, format_duration};
use crate::run::{RunReport, run_scenario};

/// Default first rate tried: ten users a second, so a default 10 s step has
/// 100 scenarios and its p99 is not simply the slowest of a handful (at one
/// user a second, idle-core wake-ups alone put a 10-user step's p99 past 50 ms
/// on this project's machine).
pub const DEFAULT_START_USERS_PER_HOUR: u64 = 36_000;
/// Default highest rate tried: a thousand users a second.
pub const DEFAULT_MAX_USERS_PER_HOUR: u64 = 3_600_000;
/// Default duration of each step.
pub const DEFAULT_STEP_DURATION: Duration = Duration::from_secs(10);
/// Default number of refinement steps between the last good and first bad rate.
pub const DEFAULT_REFINE_STEPS: u32 = 3;
/// Pause between steps, so one step's stragglers do not slow the next.
pub const PAUSE_BETWEEN_STEPS: Duration = Duration::from_secs(2);

/// Settings of a capacity search.
#[derive(Clone, Debug)]
pub struct CapacityConfig {
    /// The run settings of every step; its `users_per_hour` is replaced by the
    /// step's rate and its `duration` is the step duration. Report files are
    /// not written.
    pub run: RunConfig,
    /// Whole-scenario p99 limit, in milliseconds.
    pub p99_ms: f64,
    /// First rate tried.
    pub start_users_per_hour: u64,
    /// Highest rate tried.
    pub max_users_per_hour: u64,
    /// Refinement steps after the first failing rate.
    pub refine_steps: u32,
}

/// One step of the search.
#[derive(Clone, Debug)]
pub struct CapacityStep {
    /// The rate tried.
    pub users_per_hour: u64,
    /// Whether the step held: clean and whole-scenario p99 within the limit.
    pub held: bool,
    /// Why it did not hold, empty when it did.
    pub reason: String,
    /// The step's full report.
    pub report: RunReport,
}

/// The outcome of a capacity search.
#[derive(Clone, Debug)]
pub struct CapacityReport {
    /// The p99 limit, in milliseconds.
    pub p99_ms: f64,
    /// Every step, in the order run.
    pub steps: Vec<CapacityStep>,
    /// The highest rate that held, if any did.
    pub highest_held: Option<u64>,
}

impl CapacityReport {
    /// One line per step, then the verdict.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for step in &self.steps {
            out.push_str(&render_step(step, self.p99_ms));
            out.push('\n');
        }
        match self.highest_held {
            Some(rate) => out.push_str(&format!(
                "highest rate that held: {rate} users/hour ({:.2} users/s) with whole-scenario p99 <= {} ms\n",
                rate as f64 / 3600.0,
                self.p99_ms
            )),
            None => out.push_str(&format!(
                "no rate held: even the first step failed (p99 limit {} ms); try a lower --start-users-per-hour\n",
                self.p99_ms
            )),
        }
        out
    }
}

/// One line describing a step: rate, users, scenario p50/p99, failures, the
/// load test's own CPU (share of one core), verdict.
pub fn render_step(step: &CapacityStep, p99_ms: f64) -> String {
    let total = &step.report.scenario_total;
    format!(
        "{:>9} users/hour ({:>5} users in {}): scenario p50 {:>9.3} ms, p99 {:>9.3} ms (limit {p99_ms}), {} failed, load test CPU {:>3.0} %: {}",
        step.users_per_hour,
        step.report.users,
        format_duration(step.report.duration),
        total.p50_ms,
        total.p99_ms,
        step.report.failures(),
        100.0 * step.report.client_cpu_share(),
        if step.held {
            "held".to_string()
        } else {
            format!("FAILED ({})", step.reason)
        }
    )
}

/// Whether a step's report holds under `p99_ms`, and why not.
pub fn verdict(report: &RunReport, p99_ms: f64) -> (bool, String) {
    let mut reasons = report.problems();
    if report.scenario_total.timed == 0 {
        reasons.push("no scenario finished".to_string());
    } else if report.scenario_total.p99_ms > p99_ms {
        reasons.push(format!(
            "p99 {:.3} ms over {p99_ms} ms",
            report.scenario_total.p99_ms
        ));
    }
    (reasons.is_empty(), reasons.join("; "))
}

/// The search over rates, apart from running them.
#[derive(Clone, Debug)]
pub struct RateSearch {
    next: Option<u64>,
    good: Option<u64>,
    bad: Option<u64>,
    max: u64,
    refinements_left: u32,
}

impl RateSearch {
    /// A search doubling from `start` up to `max`, then refining `refine_steps` times.
    pub fn new(start: u64, max: u64, refine_steps: u32) -> Self {
        let start = start.max(1);
        RateSearch {
            next: Some(start.min(max.max(1))),
            good: None,
            bad: None,
            max: max.max(1),
            refinements_left: refine_steps,
        }
    }

    /// The next rate to try, or `None` when the search is over.
    pub fn next_rate(&self) -> Option<u64> {
        self.next
    }

    /// The highest rate that held so far.
    pub fn highest_held(&self) -> Option<u64> {
        self.good
    }

    /// Records whether `rate` held and picks the next rate.
    pub fn record(&mut self, rate: u64, held: bool) {
        if held {
            self.good = Some(self.good.map_or(rate, |good| good.max(rate)));
        } else {
            self.bad = Some(self.bad.map_or(rate, |bad| bad.min(rate)));
        }
        self.next = match (self.good, self.bad) {
            // Still doubling.
            (_, None) => (rate < self.max).then(|| rate.saturating_mul(2).min(self.max)),
            // The first rate failed: nothing to refine.
            (None, Some(_)) => None,
            (Some(good), Some(bad)) => {
                let gap = bad.saturating_sub(good);
                if self.refinements_left == 0 || good >= bad || gap <= (good / 20).max(1) {
                    None
                } else {
                    self.refinements_left -= 1;
                    Some(good + gap / 2)
                }
            }
        };
    }
}

/// Runs the search, calling `progress` after each step.
pub async fn find_capacity(
    config: CapacityConfig,
    mut progress: impl FnMut(&CapacityStep),
) -> anyhow::Result<CapacityReport> {
    let mut run = config.run.clone();
    run.report_files.clear();
    run.users_per_hour = config.start_users_per_hour;
    run.validate()?;
    // No step may start more users than one run allows.
    let duration_ms = run.duration.as_millis().max(1);
    let max_rate = u64::try_from(MAX_USERS as u128 * 3_600_000 / duration_ms)
        .unwrap_or(u64::MAX)
        .min(config.max_users_per_hour);
    let mut search = RateSearch::new(config.start_users_per_hour, max_rate, config.refine_steps);
    let mut steps = Vec::new();
    while let Some(rate) = search.next_rate() {
        if !steps.is_empty() {
            tokio::time::sleep(PAUSE_BETWEEN_STEPS).await;
        }
        let mut step_config = run.clone();
        step_config.users_per_hour = rate;
        let report = run_scenario(step_config).await?;
        let (held, reason) = verdict(&report, config.p99_ms);
        search.record(rate, held);
        let step = CapacityStep {
            users_per_hour: rate,
            held,
            reason,
            report,
        };
        progress(&step);
        steps.push(step);
    }
    Ok(CapacityReport {
        p99_ms: config.p99_ms,
        steps,
        highest_held: search.highest_held(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search against a server that holds up to `capacity`.
    fn search(start: u64, max: u64, refine: u32, capacity: u64) -> (Vec<u64>, Option<u64>) {
        let mut search = RateSearch::new(start, max, refine);
        let mut tried = Vec::new();
        while let Some(rate) = search.next_rate() {
            assert!(tried.len() < 100, "unbounded search");
            tried.push(rate);
            search.record(rate, rate <= capacity);
        }
        (tried, search.highest_held())
    }

    #[test]
    fn doubles_then_refines() {
        let (tried, best) = search(1000, 1_000_000, 3, 5000);
        assert_eq!(tried, vec![1000, 2000, 4000, 8000, 6000, 5000, 5500]);
        assert_eq!(best, Some(5000));
    }

    #[test]
    fn stops_at_the_maximum() {
        let (tried, best) = search(1000, 5000, 3, u64::MAX);
        assert_eq!(tried, vec![1000, 2000, 4000, 5000]);
        assert_eq!(best, Some(5000));
    }

    #[test]
    fn reports_nothing_when_the_start_fails() {
        let (tried, best) = search(1000, 1_000_000, 3, 10);
        assert_eq!(tried, vec![1000]);
        assert_eq!(best, None);
    }

    #[test]
    fn refinement_stops_when_the_gap_is_small() {
        let (tried, best) = search(100, 1_000_000, 10, 150);
        // 100 holds, 200 fails; 150 holds; 175, 162 and 156 fail; then the
        // gap, 6, is within 150 / 20 = 7: stop.
        assert_eq!(tried, vec![100, 200, 150, 175, 162, 156]);
        assert_eq!(best, Some(150));
    }

    #[test]
    fn no_refinement_when_asked_for_none() {
        let (tried, best) = search(1000, 1_000_000, 0, 5000);
        assert_eq!(tried, vec![1000, 2000, 4000, 8000]);
        assert_eq!(best, Some(4000));
    }
}

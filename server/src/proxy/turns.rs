//! Turns at the upstream (issue 45): what keeps a node's background work
//! from taking its upstream down, for both proxies.
//!
//! - [`UpstreamTurns::sync_turn`]: at most `--upstream-syncs-at-once`
//!   background syncs (an account's sync task's sync, a JMAP mirror's poll,
//!   and the message downloads inside them) run against the upstream at
//!   once; the others wait their turn, counted in
//!   `fastview_upstream_syncs_waiting`. Interactive work (a client's
//!   forwarded call or download, a write and the sync that records it, an
//!   evicted message read again) takes no turn: it never queues behind the
//!   background.
//! - [`UpstreamTurns::failed`]: an upstream that asks to wait (429, 503,
//!   IMAP `[UNAVAILABLE]`) pauses every background sync of the node until
//!   its Retry-After has passed (else the failed task's backoff); it is
//!   logged once when it starts, and each backoff is counted in
//!   `fastview_upstream_backoffs_total{reason}`.
//! - [`Backoff`]: each task's wait before trying again after a failure:
//!   the upstream's Retry-After when it sent one, else exponential with
//!   jitter, capped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::metrics::Metrics;
use crate::proxy::upstream::{Throttle, UpstreamError};

/// The default of `--upstream-syncs-at-once`: small, since a first sync
/// reads every message of an account, and an upstream on SQLite ran out
/// of connections under 100 at once (issue 45).
pub const DEFAULT_SYNCS_AT_ONCE: usize = 4;

/// The first wait after a failure without Retry-After (doubled each time).
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// The longest Retry-After taken as it is; a longer one (or an HTTP date
/// far ahead) is cut to this, so that a misconfigured upstream cannot stop
/// the mirrors for a day.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(15 * 60);

/// The background syncs of one node against its one upstream.
pub struct UpstreamTurns {
    syncs: Semaphore,
    /// Until when every background sync waits (the upstream asked it).
    paused_until: Mutex<Option<Instant>>,
    /// Whether the upstream is throttling now: set by a 429/503, cleared
    /// by the next sync that succeeds (so the log says each start once).
    throttling: AtomicBool,
    metrics: Arc<Metrics>,
}

/// A background sync's turn, held while it runs (a guard: dropping it
/// gives the turn to the next one).
pub struct SyncTurn<'a> {
    _permit: SemaphorePermit<'a>,
    metrics: &'a Metrics,
}

impl Drop for SyncTurn<'_> {
    fn drop(&mut self) {
        self.metrics.upstream_syncs_running.dec();
    }
}

/// Decrements the waiting gauge when a wait ends, taken or cancelled.
struct Waiting<'a>(&'a Metrics);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.upstream_syncs_waiting.dec();
    }
}

impl UpstreamTurns {
    /// Turns for `syncs_at_once` background syncs at once (at least one),
    /// counted in `metrics`.
    pub fn new(syncs_at_once: usize, metrics: Arc<Metrics>) -> Self {
        Self {
            syncs: Semaphore::new(syncs_at_once.max(1)),
            paused_until: Mutex::new(None),
            throttling: AtomicBool::new(false),
            metrics,
        }
    }

    /// Waits for a background sync's turn: until the upstream's pause (if
    /// any) has passed and fewer than `--upstream-syncs-at-once` syncs run.
    /// A sync takes its turn before its account's lock, so a queued sync
    /// never holds off the account's interactive work.
    pub async fn sync_turn(&self) -> SyncTurn<'_> {
        self.metrics.upstream_syncs_waiting.inc();
        let waiting = Waiting(&self.metrics);
        loop {
            self.wait_out_pause().await;
            let Ok(permit) = self.syncs.acquire().await else {
                unreachable!("the semaphore is never closed");
            };
            // A pause that began while this one waited for a permit.
            if self.pause_left().is_some() {
                drop(permit);
                continue;
            }
            drop(waiting);
            self.metrics.upstream_syncs_running.inc();
            return SyncTurn {
                _permit: permit,
                metrics: &self.metrics,
            };
        }
    }

    /// How long the upstream's pause lasts from now, if one is on.
    fn pause_left(&self) -> Option<Duration> {
        let until = (*self.paused_until.lock().ok()?)?;
        until
            .checked_duration_since(Instant::now())
            .filter(|left| !left.is_zero())
    }

    async fn wait_out_pause(&self) {
        while let Some(left) = self.pause_left() {
            tokio::time::sleep(left).await;
        }
    }

    /// Notes that a background sync failed with `error` and that its task
    /// waits `wait` ([`Backoff::after`]) before trying again: counted by
    /// reason (`throttled`: 429; `unavailable`: 503 or IMAP
    /// `[UNAVAILABLE]`; `error`: no answer, or one that is not what was
    /// asked). An upstream that asks to wait pauses every background sync
    /// of the node for `wait` too, and is logged when it starts to. A
    /// refused login and a local failure are not the upstream's load: not
    /// counted.
    pub fn failed(&self, error: &UpstreamError, wait: Duration) {
        let reason = match error {
            UpstreamError::Throttled { why, .. } => why.label(),
            UpstreamError::Unreachable(_) | UpstreamError::Refused(_) => "error",
            UpstreamError::LoginRefused | UpstreamError::Store(_) | UpstreamError::Ingest(_) => {
                return;
            }
        };
        self.metrics.count_upstream_backoff(reason);
        let UpstreamError::Throttled { why, retry_after } = error else {
            return;
        };
        if let Ok(mut until) = self.paused_until.lock() {
            let end = Instant::now() + wait;
            *until = Some(until.map_or(end, |until| until.max(end)));
        }
        if !self.throttling.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                reason = why.label(),
                retry_after_seconds = retry_after.map(|wait| wait.as_secs()),
                pause_seconds = wait.as_secs_f64(),
                "the upstream asks to wait: background syncs pause for pause_seconds \
                 (its Retry-After when sent), then go on at most --upstream-syncs-at-once \
                 at a time; clients' own requests still go through"
            );
        }
    }

    /// Notes that a background sync succeeded: the upstream is no longer
    /// throttling (the next time it starts is logged again).
    pub fn succeeded(&self) {
        if self.throttling.swap(false, Ordering::AcqRel) {
            tracing::info!("the upstream answers background syncs again");
        }
    }
}

/// One task's wait before trying again after failures in a row.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    cap: Duration,
}

impl Backoff {
    /// A backoff starting at 1 s and doubling up to `cap` (at least 1 s).
    pub fn new(cap: Duration) -> Self {
        Self {
            next: FIRST_BACKOFF,
            cap: cap.max(FIRST_BACKOFF),
        }
    }

    /// The wait after a failure with `error`: its Retry-After (at most
    /// [`MAX_RETRY_AFTER`]) and up to a tenth more at random, when the
    /// upstream sent one; else the next exponential step, between half of
    /// it and all of it at random ("equal jitter"), so that tasks that
    /// failed together do not come back together. Each call doubles the
    /// step up to the cap.
    pub fn after(&mut self, error: &UpstreamError) -> Duration {
        let step = self.next;
        self.next = (self.next * 2).min(self.cap);
        if let UpstreamError::Throttled {
            retry_after: Some(asked),
            ..
        } = error
        {
            let asked = (*asked).min(MAX_RETRY_AFTER);
            return asked + asked.mul_f64(rand::random::<f64>() / 10.0);
        }
        step / 2 + step.mul_f64(rand::random::<f64>() / 2.0)
    }

    /// After a success: the next failure waits the first step again.
    pub fn reset(&mut self) {
        self.next = FIRST_BACKOFF;
    }
}

impl Throttle {
    /// The `reason` label of `fastview_upstream_backoffs_total`.
    pub fn label(self) -> &'static str {
        match self {
            Throttle::TooManyRequests => "throttled",
            Throttle::Unavailable => "unavailable",
        }
    }
}

/// A Retry-After header's value (RFC 9110 §10.2.3): delay-seconds, or an
/// HTTP-date (IMF-fixdate, as RFC 2822 reads it) counted from `now`
/// (zero when past). `None` when it is neither.
pub fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    Some(
        (at.with_timezone(&chrono::Utc) - now)
            .to_std()
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::{Backoff, MAX_RETRY_AFTER, UpstreamTurns, parse_retry_after};
    use crate::metrics::Metrics;
    use crate::proxy::upstream::{Throttle, UpstreamError};

    #[test]
    fn retry_after_is_seconds_or_an_http_date() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-07T12:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let check = |value: &str, expected: Option<u64>| {
            assert_eq!(
                parse_retry_after(value, now),
                expected.map(Duration::from_secs),
                "{value}"
            );
        };
        check("2", Some(2));
        check(" 120 ", Some(120));
        check("Mon, 07 Dec 2026 12:00:30 GMT", Some(30));
        check("Mon, 07 Dec 2026 11:00:00 GMT", Some(0));
        check("soon", None);
        check("-1", None);
    }

    #[test]
    fn backoff_doubles_with_jitter_up_to_its_cap_and_takes_retry_after() {
        let unreachable = UpstreamError::Unreachable("gone".into());
        let mut backoff = Backoff::new(Duration::from_secs(10));
        let waits: Vec<Duration> = (0..6).map(|_| backoff.after(&unreachable)).collect();
        for (wait, step) in waits.iter().zip([1, 2, 4, 8, 10, 10]) {
            let step = Duration::from_secs(step);
            assert!(*wait >= step / 2 && *wait <= step, "{wait:?} for {step:?}");
        }
        backoff.reset();
        assert!(backoff.after(&unreachable) <= Duration::from_secs(1));
        let asked = |seconds| UpstreamError::Throttled {
            why: Throttle::TooManyRequests,
            retry_after: Some(Duration::from_secs(seconds)),
        };
        let wait = backoff.after(&asked(2));
        assert!(wait >= Duration::from_secs(2) && wait <= Duration::from_millis(2200));
        let wait = backoff.after(&asked(86_400));
        assert!(wait >= MAX_RETRY_AFTER && wait <= MAX_RETRY_AFTER * 11 / 10);
    }

    #[tokio::test]
    async fn turns_are_bounded_and_paused_while_the_upstream_asks_to_wait() {
        let metrics = Arc::new(Metrics::new());
        let turns = UpstreamTurns::new(2, metrics.clone());
        let first = turns.sync_turn().await;
        let _second = turns.sync_turn().await;
        assert_eq!(metrics.upstream_syncs_running.get(), 2);
        let third = tokio::time::timeout(Duration::from_millis(10), turns.sync_turn()).await;
        assert!(third.is_err(), "a third turn while two run");
        assert_eq!(metrics.upstream_syncs_waiting.get(), 0);
        drop(first);
        // A 503: every background sync waits out the pause, though a turn
        // is free (a lower bound only: never a tighter figure).
        let throttled = UpstreamError::Throttled {
            why: Throttle::Unavailable,
            retry_after: None,
        };
        let pause = Duration::from_millis(200);
        let started = tokio::time::Instant::now();
        turns.failed(&throttled, pause);
        let _after = turns.sync_turn().await;
        assert!(started.elapsed() >= pause);
        let backoffs = metrics
            .upstream_backoffs
            .get_or_create(&crate::metrics::BackoffLabel {
                reason: "unavailable",
            })
            .get();
        assert_eq!(backoffs, 1);
    }
}

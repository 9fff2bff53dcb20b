//! An account's follow task: it listens to the upstream's event source
//! (or, when the upstream gives none, polls every few seconds while a
//! client is active), syncs on each change, and ends when the account is
//! idle.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;
use serde_json::{Map, Value, json};

use crate::proxy::jmap::client::UpstreamSession;
use crate::proxy::jmap::mirror::mirrored::{ACTIVE_CLIENT, Mirror, Mirrored, USING};
use crate::proxy::turns::Backoff;
use crate::proxy::upstream::UpstreamError;

impl Mirror {
    /// The account task: it listens to the upstream's event source for
    /// Email changes (opened before each sync, so no change between the
    /// sync and the listening is missed), syncs, and waits for a change, a
    /// write through this node or a poll; until the account has been idle
    /// for `idle` or the credential is refused. Then the mirror is no longer
    /// answered from and the credential is dropped. Without an event source
    /// (issue 45) it polls every `poll_active` while a client is active
    /// ([`Listener::pace`]) and asks for the event source again after `poll`.
    pub(super) async fn follow(
        self: Arc<Self>,
        mirrored: Arc<Mirrored>,
        session: Arc<UpstreamSession>,
    ) {
        let mut listener = Listener::new(self.poll_active.min(self.poll));
        let mut backoff = Backoff::new(self.poll);
        // Whether the last wait ended by a poll alone (no event, no write
        // to catch up with).
        let mut polled = false;
        // Whether the last wait ended by an event naming only states the
        // mirror already has.
        let mut already = false;
        while let Some((authorization, last_used)) = mirrored.credential() {
            if last_used.elapsed() > self.idle {
                break;
            }
            self.listen_when_due(&mut listener, &session, &authorization)
                .await;
            let writes = mirrored.writes.load(Ordering::Acquire);
            let caught_up = mirrored.synced_through.load(Ordering::Acquire) >= writes;
            if !(caught_up && already) {
                // The poll and the sync are background work: they take a
                // turn at the upstream, before the account's lock, so a
                // queued sync never holds off the account's clients.
                let turn = self.turns.sync_turn().await;
                let settled = caught_up
                    && polled
                    && self.unchanged(&mirrored, &session, &authorization).await;
                if !settled {
                    let guard = mirrored.syncing.write().await;
                    match self
                        .sync_locked(&mirrored, guard, &session, &authorization)
                        .await
                    {
                        Ok(()) => {
                            backoff.reset();
                            self.turns.succeeded();
                        }
                        Err(UpstreamError::LoginRefused) => break,
                        Err(error) => {
                            let wait = backoff.after(&error);
                            self.turns.failed(&error, wait);
                            tracing::warn!(account = %mirrored.upstream_id, %error, retry_in = ?wait, "mirror sync failed");
                            drop(turn);
                            tokio::time::sleep(wait).await;
                            polled = false;
                            already = false;
                            continue;
                        }
                    }
                }
            }
            polled = false;
            already = false;
            if mirrored.synced_through.load(Ordering::Acquire) < writes {
                continue;
            }
            match self.wait(&mirrored, &mut listener, last_used).await {
                // A change the mirror already has (its own write, caught up
                // with) needs no sync: a sync holds the account's calls off
                // the mirror while it runs.
                Woke::Change(told) => {
                    already = told.is_some_and(|told| mirrored.already_at(&told));
                }
                Woke::Poll => polled = true,
                Woke::Other => {}
            }
        }
        mirrored.set_fresh(None);
        if let Ok(mut credential) = mirrored.authorization.lock() {
            *credential = None;
        }
        if let Ok(mut following) = mirrored.following.lock() {
            *following = false;
        }
    }

    /// Opens the upstream's event source when none is open and it is time
    /// to ask: at once after a stream ended, `poll` after the upstream
    /// answered without one (meanwhile the task polls).
    async fn listen_when_due(
        &self,
        listener: &mut Listener,
        session: &UpstreamSession,
        authorization: &HeaderValue,
    ) {
        if listener.events.is_some() || listener.listen_at.is_some_and(|at| Instant::now() < at) {
            return;
        }
        match self.listen(session, authorization).await {
            Listening::Open(events) => {
                listener.events = Some(events);
                listener.listen_at = None;
            }
            Listening::Unavailable { status, why } => {
                self.fell_back(status, &why);
                listener.listen_at = Some(Instant::now() + self.poll);
            }
        }
    }

    /// Notes that the upstream's event source gave an account's mirror no
    /// stream (`fastview_upstream_event_source_fallbacks_total`); the first
    /// time the upstream answers so with a status, says so in the log (an
    /// upstream that does not answer is an outage, which the syncs report).
    fn fell_back(&self, status: Option<reqwest::StatusCode>, why: &str) {
        self.metrics.upstream_event_source_fallbacks.inc();
        if let Some(status) = status
            && !self.event_source_warned.swap(true, Ordering::AcqRel)
        {
            tracing::warn!(
                %status,
                %why,
                active_poll_seconds = self.poll_active.min(self.poll).as_secs_f64(),
                idle_poll_seconds = self.poll.as_secs_f64(),
                "the JMAP upstream's event source gives no stream: its mirrors poll \
                 instead (every active_poll_seconds while a client is active, backing \
                 off to idle_poll_seconds), and ask for it again every idle_poll_seconds"
            );
        }
    }

    /// Waits for what the account task acts on next: the event stream's
    /// change, a write through this node, or a poll's time; without an
    /// event stream, a poll every [`Listener::pace`], or at once when a
    /// client comes back. Each poll is counted
    /// (`fastview_upstream_polls_total`).
    async fn wait(&self, mirrored: &Mirrored, listener: &mut Listener, last_used: Instant) -> Woke {
        let Some(stream) = listener.events.as_mut() else {
            let pace = listener.pace(self.poll_active, self.poll, last_used.elapsed());
            return tokio::select! {
                () = mirrored.wake.notified() => Woke::Other,
                () = mirrored.client_returned.notified() => self.polling("none"),
                () = tokio::time::sleep(jittered(pace)) => self.polling("none"),
            };
        };
        tokio::select! {
            heard = changed(stream) => match heard {
                Heard::Change(told) => {
                    listener.retry = Duration::from_secs(1);
                    Woke::Change(told)
                }
                Heard::Ended => {
                    // The stream ended or failed: listen again, not at once.
                    listener.events = None;
                    tokio::time::sleep(listener.retry).await;
                    listener.retry = (listener.retry * 2).min(self.poll);
                    Woke::Other
                }
            },
            () = mirrored.wake.notified() => Woke::Other,
            () = tokio::time::sleep(jittered(self.poll)) => self.polling("open"),
        }
    }

    /// A poll's time came (`event_source`: `open` or `none`, its label).
    fn polling(&self, event_source: &'static str) -> Woke {
        self.metrics.count_upstream_poll(event_source);
        Woke::Poll
    }

    /// Whether the upstream's Email, Mailbox and Thread states are still
    /// the ones the mirror's last sync reached: one round trip of three
    /// `/get`s of no ids (counted as method `poll`). A poll that finds them
    /// so runs no sync, and a sync holds the account's calls off the mirror
    /// while it runs ([`Mirror::hold`]): under load, a hundred accounts'
    /// polls forwarded thousands of calls to the upstream (ADR 0009).
    /// `false` when the mirror has no such states or the upstream answers
    /// otherwise: the sync then runs and reports; `true` when it cannot be
    /// reached (an outage: nothing to sync until it is back).
    async fn unchanged(
        &self,
        mirrored: &Mirrored,
        session: &UpstreamSession,
        authorization: &HeaderValue,
    ) -> bool {
        let Some([email, mailbox, thread]) = mirrored.states() else {
            return false;
        };
        let id = &mirrored.upstream_id;
        let request = json!({"using": USING, "methodCalls": [
            ["Email/get", {"accountId": id, "ids": []}, "e"],
            ["Mailbox/get", {"accountId": id, "ids": []}, "m"],
            ["Thread/get", {"accountId": id, "ids": []}, "t"],
        ]});
        match self
            .upstream
            .call(session, authorization, &request, "poll")
            .await
        {
            Ok(response) => states_are(&response, [&email, &mailbox, &thread]),
            // An upstream that cannot be reached has nothing new to sync:
            // the mirror keeps answering what it holds (a sync would hold
            // the account's calls off it only to fail; issue 45).
            Err(UpstreamError::Unreachable(_)) => true,
            Err(_) => false,
        }
    }

    /// The upstream's event source for Email and Mailbox changes: open
    /// when it answers `200` (RFC 8620 §7.3, `text/event-stream`); else
    /// why not (Cyrus 3.6 built without WebSockets answers `204 No
    /// Content`: it never pushes), and the task polls.
    async fn listen(&self, session: &UpstreamSession, authorization: &HeaderValue) -> Listening {
        let url =
            match session.event_source_target(Some("types=Email,Mailbox&closeafter=no&ping=30")) {
                Ok(url) => url,
                Err(error) => {
                    return Listening::Unavailable {
                        status: None,
                        why: error.to_string(),
                    };
                }
            };
        let request = self
            .upstream
            .stream(reqwest::Method::GET, url.clone())
            .header(reqwest::header::AUTHORIZATION, authorization.clone());
        match self.upstream.forward(request, "eventsource").await {
            Ok(response) if response.status() == reqwest::StatusCode::OK => {
                Listening::Open(response)
            }
            Ok(response) => Listening::Unavailable {
                status: Some(response.status()),
                why: format!("GET {url}"),
            },
            Err(error) => Listening::Unavailable {
                status: None,
                why: error.to_string(),
            },
        }
    }
}

/// What opening the upstream's event source gave.
enum Listening {
    /// A stream of its events.
    Open(reqwest::Response),
    /// No stream: the status the upstream answered with (`None`: no
    /// answer), and what was asked or what failed.
    Unavailable {
        status: Option<reqwest::StatusCode>,
        why: String,
    },
}

/// What an account task knows of the upstream's event source, and how
/// often it polls without one.
struct Listener {
    /// The stream, while open.
    events: Option<reqwest::Response>,
    /// When to ask for the event source again after the upstream gave
    /// none; `None`: at the task's next turn.
    listen_at: Option<Instant>,
    /// The wait before asking again after a stream ended (doubling up to
    /// `poll`).
    retry: Duration,
    /// The last wait between polls without a stream.
    pace: Duration,
}

impl Listener {
    fn new(active: Duration) -> Self {
        Self {
            events: None,
            listen_at: None,
            retry: Duration::from_secs(1),
            pace: active,
        }
    }

    /// The wait before the next poll without an event stream: `active`
    /// (`--upstream-poll-active`) while the account's client made a request
    /// within [`ACTIVE_CLIENT`] (`since_request` ago), else twice the last
    /// wait, never over `idle` (`--upstream-poll`).
    fn pace(&mut self, active: Duration, idle: Duration, since_request: Duration) -> Duration {
        let active = active.min(idle);
        self.pace = if since_request < ACTIVE_CLIENT {
            active
        } else {
            (self.pace * 2).clamp(active, idle)
        };
        self.pace
    }
}

/// Why an account task's wait ended.
enum Woke {
    /// The event stream told of a change, with its StateChange when read.
    Change(Option<Value>),
    /// A poll's time came.
    Poll,
    /// A write through this node to catch up with, or the stream ended.
    Other,
}

/// Whether a response to [`Mirror::unchanged`]'s three calls (Email/get,
/// Mailbox/get, Thread/get, in that order) names exactly `states`, in the
/// same order: an error, a missing or other state is a change.
fn states_are(response: &Map<String, Value>, states: [&str; 3]) -> bool {
    let Some(Value::Array(responses)) = response.get("methodResponses") else {
        return false;
    };
    responses.len() == states.len()
        && responses
            .iter()
            .zip(states)
            .all(|(answer, state)| answer[1]["state"].as_str() == Some(state))
}

/// `poll` and up to a quarter more, at random: mirrors that started
/// together (a node's restart, the logins of a busy minute) do not sync in
/// the same instant poll after poll. A sync holds its account's calls off
/// the mirror while it runs ([`Mirror::hold`]), so a hundred at once sent a
/// hundred accounts' calls to the upstream together (ADR 0009).
fn jittered(poll: Duration) -> Duration {
    poll + poll.mul_f64(rand::random::<f64>() / 4.0)
}

/// What an event stream told: a change, with the StateChange it carried
/// when the chunk held exactly one that reads as JSON; or its end.
enum Heard {
    Change(Option<Value>),
    Ended,
}

/// Reads an event stream until it tells of a change (any event but a
/// ping, RFC 8620 §7.3) or ends or fails.
async fn changed(stream: &mut reqwest::Response) -> Heard {
    loop {
        match stream.chunk().await {
            Ok(Some(chunk)) => {
                let text = String::from_utf8_lossy(&chunk);
                if text.contains("event: state") || text.contains("event:state") {
                    return Heard::Change(state_change(&text));
                }
            }
            Ok(None) | Err(_) => return Heard::Ended,
        }
    }
}

/// The StateChange of an event stream chunk that holds one `state` event
/// whose data is one line of JSON; `None` for anything else (the caller
/// then syncs, as for any change).
fn state_change(text: &str) -> Option<Value> {
    if text.matches("event:").count() != 1 {
        return None;
    }
    let mut data = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim_start);
    let (Some(line), None) = (data.next(), data.next()) else {
        return None;
    };
    serde_json::from_str(line).ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{ACTIVE_CLIENT, Listener, jittered, state_change, states_are};

    #[test]
    fn without_an_event_source_polls_are_fast_while_a_client_is_active_then_back_off() {
        let (active, idle) = (Duration::from_secs(2), Duration::from_secs(60));
        let mut listener = Listener::new(active);
        let just_now = Duration::from_secs(1);
        assert_eq!(listener.pace(active, idle, just_now), active);
        assert_eq!(listener.pace(active, idle, just_now), active);
        // A client quiet for longer than ACTIVE_CLIENT: the wait doubles,
        // up to the idle bound.
        let quiet = ACTIVE_CLIENT + Duration::from_secs(1);
        let waits: Vec<u64> = (0..7)
            .map(|_| listener.pace(active, idle, quiet).as_secs())
            .collect();
        assert_eq!(waits, [4, 8, 16, 32, 60, 60, 60]);
        // Back to the active pace as soon as it makes a request.
        assert_eq!(listener.pace(active, idle, just_now), active);
        // An active pace over the idle bound is the idle bound.
        let mut slow = Listener::new(idle);
        assert_eq!(slow.pace(Duration::from_secs(90), idle, just_now), idle);
        assert_eq!(slow.pace(Duration::from_secs(90), idle, quiet), idle);
    }

    #[test]
    fn a_state_event_is_read_only_when_it_is_one_line_of_json() {
        let one = "event: state\nid: 1\ndata: {\"@type\":\"StateChange\",\"changed\":{\"a\":{\"Email\":\"5\"}}}\n\n";
        assert_eq!(
            state_change(one),
            Some(serde_json::json!({"@type": "StateChange", "changed": {"a": {"Email": "5"}}}))
        );
        let two = format!("{one}{one}");
        assert_eq!(state_change(&two), None);
        assert_eq!(state_change("event: state\ndata: {\"cut"), None);
        assert_eq!(state_change("event: state\ndata: {}\ndata: {}\n\n"), None);
    }

    #[test]
    fn a_poll_settles_only_on_the_three_states_of_the_last_sync() {
        let answer = |e: &str, m: &str, t: &str| {
            let response = serde_json::json!({"methodResponses": [
                ["Email/get", {"state": e, "list": []}, "e"],
                ["Mailbox/get", {"state": m, "list": []}, "m"],
                ["Thread/get", {"state": t, "list": []}, "t"]]});
            response.as_object().unwrap().clone()
        };
        let last = ["E1", "M1", "T1"];
        assert!(states_are(&answer("E1", "M1", "T1"), last));
        // A mailbox renamed, a thread merged, a new email: each a change.
        assert!(!states_are(&answer("E1", "M2", "T1"), last));
        assert!(!states_are(&answer("E1", "M1", "T2"), last));
        assert!(!states_are(&answer("E2", "M1", "T1"), last));
        let error = serde_json::json!({"methodResponses": [
            ["error", {"type": "serverFail"}, "e"],
            ["Mailbox/get", {"state": "M1", "list": []}, "m"],
            ["Thread/get", {"state": "T1", "list": []}, "t"]]});
        assert!(!states_are(error.as_object().unwrap(), last));
        assert!(!states_are(&serde_json::Map::new(), last));
    }

    #[test]
    fn polls_are_spread_over_a_quarter_of_the_interval() {
        let poll = std::time::Duration::from_secs(60);
        let waits: Vec<_> = (0..200).map(|_| jittered(poll)).collect();
        assert!(waits.iter().all(|w| *w >= poll && *w <= poll * 5 / 4));
        // Spread, not one instant: 200 draws land in both halves.
        assert!(waits.iter().any(|w| *w < poll * 9 / 8));
        assert!(waits.iter().any(|w| *w > poll * 9 / 8));
    }
}

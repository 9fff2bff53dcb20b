//! An account's follow task: it listens to the upstream's event source
//! (or polls), syncs on each change, and ends when the account is idle.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use reqwest::header::HeaderValue;
use serde_json::{Map, Value, json};

use crate::proxy::jmap::client::UpstreamSession;
use crate::proxy::jmap::mirror::mirrored::{Mirror, Mirrored, USING};
use crate::proxy::upstream::UpstreamError;

impl Mirror {
    /// The account task: it listens to the upstream's event source for
    /// Email changes (opened before each sync, so no change between the
    /// sync and the listening is missed), syncs, and waits for a change, a
    /// write through this node or `poll`; until the account has been idle
    /// for `idle` or the credential is refused. Then the mirror is no longer
    /// answered from and the credential is dropped.
    pub(super) async fn follow(
        self: Arc<Self>,
        mirrored: Arc<Mirrored>,
        session: Arc<UpstreamSession>,
    ) {
        let mut events: Option<reqwest::Response> = None;
        let mut retry = Duration::from_secs(1);
        // Whether the last wait ended by the poll's timer alone (no event,
        // no write to catch up with).
        let mut polled = false;
        // Whether the last wait ended by an event naming only states the
        // mirror already has.
        let mut already = false;
        while let Some((authorization, last_used)) = mirrored.credential() {
            if last_used.elapsed() > self.idle {
                break;
            }
            if events.is_none() {
                events = self.listen(&session, &authorization).await;
            }
            let writes = mirrored.writes.load(Ordering::Acquire);
            let caught_up = mirrored.synced_through.load(Ordering::Acquire) >= writes;
            let settled = caught_up
                && (already
                    || (polled && self.unchanged(&mirrored, &session, &authorization).await));
            polled = false;
            already = false;
            if !settled {
                let guard = mirrored.syncing.write().await;
                match self
                    .sync_locked(&mirrored, guard, &session, &authorization)
                    .await
                {
                    Ok(()) => {}
                    Err(UpstreamError::LoginRefused) => break,
                    Err(error) => {
                        tracing::warn!(account = %mirrored.upstream_id, %error, "mirror sync failed");
                    }
                }
            }
            if mirrored.synced_through.load(Ordering::Acquire) < writes {
                continue;
            }
            let change = async {
                match events.as_mut() {
                    Some(stream) => changed(stream).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                heard = change => match heard {
                    Heard::Change(told) => {
                        retry = Duration::from_secs(1);
                        // A change the mirror already has (its own write,
                        // caught up with) needs no sync: a sync holds the
                        // account's calls off the mirror while it runs.
                        already = told.is_some_and(|told| mirrored.already_at(&told));
                    }
                    Heard::Ended => {
                        // The stream ended or failed: listen again, not at once.
                        events = None;
                        tokio::time::sleep(retry).await;
                        retry = (retry * 2).min(self.poll);
                    }
                },
                () = mirrored.wake.notified() => {}
                () = tokio::time::sleep(jittered(self.poll)) => polled = true,
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

    /// Whether the upstream's Email, Mailbox and Thread states are still
    /// the ones the mirror's last sync reached: one round trip of three
    /// `/get`s of no ids (counted as method `poll`). A poll that finds them
    /// so runs no sync, and a sync holds the account's calls off the mirror
    /// while it runs ([`Mirror::hold`]): under load, a hundred accounts'
    /// polls forwarded thousands of calls to the upstream (ADR 0009).
    /// `false` when the mirror has no such states or the upstream does not
    /// answer: the sync then runs and reports.
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
        let Ok(response) = self
            .upstream
            .call(session, authorization, &request, "poll")
            .await
        else {
            return false;
        };
        states_are(&response, [&email, &mailbox, &thread])
    }

    /// The upstream's event source for Email changes, open; `None` when it
    /// cannot be opened (the task then polls).
    async fn listen(
        &self,
        session: &UpstreamSession,
        authorization: &HeaderValue,
    ) -> Option<reqwest::Response> {
        let url = session
            .event_source_target(Some("types=Email,Mailbox&closeafter=no&ping=30"))
            .ok()?;
        let request = self
            .upstream
            .stream(reqwest::Method::GET, url)
            .header(reqwest::header::AUTHORIZATION, authorization.clone());
        let response = self.upstream.forward(request, "eventsource").await.ok()?;
        response.status().is_success().then_some(response)
    }
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
    use super::{jittered, state_change, states_are};

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

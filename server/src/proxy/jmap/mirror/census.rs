//! The census after a sync (the module doc of `mirror.rs`): whether the
//! mirror holds every upstream email, the Thread state of its Email state,
//! and whether the upstream's `queryState` is its Email state.

use serde_json::json;

use crate::proxy::jmap::mirror::mirrored::Census;
use crate::proxy::jmap::mirror::sync::Sync;
use crate::proxy::upstream::UpstreamError;

impl Sync<'_> {
    /// The census of the account after a sync that reached `state` (module
    /// doc); `None` when the upstream's Email state is no longer `state`
    /// or it did not answer each call.
    pub(super) async fn census(&self, state: &str) -> Result<Option<Census>, UpstreamError> {
        let calls = json!([
            ["Email/get", {"accountId": self.upstream_id, "ids": []}, "s"],
            ["Thread/get", {"accountId": self.upstream_id, "ids": []}, "t"],
            ["Email/query", {"accountId": self.upstream_id, "limit": 0, "calculateTotal": true}, "n"],
            ["Email/get", {"accountId": self.upstream_id, "ids": []}, "e"],
        ]);
        let Some(responses) = self.call(calls).await? else {
            return Ok(None);
        };
        let answer = |name: &str| {
            responses
                .iter()
                .find(|r| r[0] == name)
                .map(|r| &r[1])
                .cloned()
        };
        // The calls of one request need not see one state: the Email state
        // asked before and after the others must both be the sync's.
        let after = responses
            .iter()
            .rev()
            .find(|r| r[0] == "Email/get")
            .and_then(|r| r[1]["state"].as_str());
        if after != Some(state) {
            return Ok(None);
        }
        let (Some(emails), Some(threads), Some(query)) = (
            answer("Email/get"),
            answer("Thread/get"),
            answer("Email/query"),
        ) else {
            return Ok(None);
        };
        let (Some(email_state), Some(thread_state), Some(query_state), Some(total)) = (
            emails["state"].as_str(),
            threads["state"].as_str(),
            query["queryState"].as_str(),
            query["total"].as_i64(),
        ) else {
            return Ok(None);
        };
        if email_state != state {
            return Ok(None);
        }
        let (mapped, stored) = self.mirror.store.mirror_census(self.account).await?;
        Ok(Some(Census {
            email_state: email_state.to_string(),
            thread_state: thread_state.to_string(),
            mints_query_states: query_state != email_state,
            complete: total == mapped && mapped == stored,
        }))
    }
}

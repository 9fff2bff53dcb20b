//! Query states the proxy mints, and Email/queryChanges since one of them
//! (RFC 8620 §5.6, issue 45 item 5, ADR 0009).
//!
//! In front of an upstream whose `queryState` is not its Email state
//! (Cyrus's `25:0` beside `25`), an Email/query answered from the mirror
//! cannot carry the upstream's query state: it carries one the proxy
//! mints, [`MINTED_PREFIX`] then the local account and its local query
//! state. An Email/queryChanges since such a state is answered from the
//! mirror (the local Email/queryChanges on the mirror's account, its ids
//! made the upstream's) or with `cannotCalculateChanges`; it never reaches
//! the upstream. A client that takes a minted state straight to the
//! upstream gets `cannotCalculateChanges` there and queries again, as
//! RFC 8620 §5.6 allows.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::jmap::ids;
use crate::proxy::jmap::forward::local_query_arguments;
use crate::proxy::jmap::forward::proxied::Proxied;
use crate::proxy::jmap::forward::shape::LOCAL_SORT_PROPERTIES;
use crate::proxy::upstream::UpstreamError;

/// What every query state the proxy mints begins with: no upstream's own
/// state does (Cyrus's are digits and colons, Fastview's digits, others'
/// base32, hex or UUIDs), so a minted state is told apart by it alone.
pub const MINTED_PREFIX: &str = "fastview~mirror~";

/// The query state the proxy mints for a query answered from local
/// account `account` at its local query state `local_state`.
pub(super) fn minted_query_state(account: i64, local_state: &str) -> String {
    format!("{MINTED_PREFIX}{account}~{local_state}")
}

/// A minted query state's local account and local query state; `None` for
/// any other string (an upstream's state).
pub(super) fn parse_minted(state: &str) -> Option<(i64, &str)> {
    let (account, local_state) = state.strip_prefix(MINTED_PREFIX)?.split_once('~')?;
    Some((account.parse().ok()?, local_state))
}

/// How long an Email/queryChanges since a minted state waits for a sync
/// of its account that runs, before it answers `cannotCalculateChanges`.
const SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// `cannotCalculateChanges` saying `why` (RFC 8620 §5.6): the client
/// queries again.
fn cannot(why: &str) -> (String, Value) {
    let answer = json!({"type": "cannotCalculateChanges", "description": why});
    ("error".to_string(), answer)
}

impl Proxied<'_> {
    /// An Email/queryChanges since a minted query state (module doc): the
    /// response's name (`Email/queryChanges` or `error`) and arguments.
    /// `cannotCalculateChanges` when the mirror cannot answer it now (a
    /// sync runs, its census is not complete), the state is another
    /// account's, the filter or sort is not one the mirror answers, or an
    /// email of the changes is no longer mirrored (one destroyed upstream:
    /// its upstream id went with it).
    pub(super) async fn email_query_changes(
        &self,
        arguments: &Map<String, Value>,
        call_id: &str,
        seen: &HashMap<String, String>,
    ) -> Result<(String, Value), UpstreamError> {
        let Some(account_id) = arguments.get("accountId").and_then(Value::as_str) else {
            return Ok(cannot("no accountId"));
        };
        let since = arguments.get("sinceQueryState").and_then(Value::as_str);
        let Some((minted_account, local_since)) = since.and_then(parse_minted) else {
            return Ok(cannot("not a query state of this server"));
        };
        // Not forwarded: a sync that runs (as one does after the change a
        // client was told of) is waited for, a while.
        self.mirror.sync_settled(account_id, SYNC_WAIT).await;
        let Some((ready, _census, _held)) = self.complete_at(account_id, seen).await else {
            return Ok(cannot("the mail is being synced; query again"));
        };
        if ready.account.id != minted_account {
            return Ok(cannot("not a query state of this account"));
        }
        let sorted_here = match arguments.get("sort") {
            None | Some(Value::Null) => true,
            Some(Value::Array(sort)) => sort.iter().all(|comparator| {
                (comparator.get("property").and_then(Value::as_str))
                    .is_some_and(|p| LOCAL_SORT_PROPERTIES.contains(&p))
            }),
            Some(_) => false,
        };
        let local = local_query_arguments(arguments, &ready).filter(|_| sorted_here);
        let Some(mut local) = local else {
            return Ok(cannot("the changes of this query are not calculated here"));
        };
        local.insert("sinceQueryState".into(), Value::String(local_since.into()));
        let store = &*self.jmap.store;
        let names = &self.mirror.names;
        if let Some(up_to) = arguments.get("upToId").and_then(Value::as_str) {
            // An upToId the mirror does not map is dropped: without it the
            // changes are a superset, which RFC 8620 §5.6 allows.
            match names
                .by_upstream(store, ready.account.id, &[up_to])
                .await?
                .pop()
            {
                Some(mapped) => {
                    local.insert("upToId".into(), ids::email_id(mapped.email_id).into());
                }
                None => {
                    local.remove("upToId");
                }
            }
        }
        let Some((name, answer)) = self
            .local_response(&ready.account, "Email/queryChanges", local, call_id)
            .await
        else {
            return Ok(cannot("the mirror did not answer"));
        };
        let mut answer = answer.into_value();
        if name != "Email/queryChanges" {
            return Ok((name, answer));
        }
        let Some((removed, added)) = self.upstream_changes(ready.account.id, &answer).await? else {
            return Ok(cannot(
                "an email of the changes is no longer on the mail server; query again",
            ));
        };
        let new_state = answer["newQueryState"].as_str().unwrap_or_default();
        answer["newQueryState"] = minted_query_state(ready.account.id, new_state).into();
        answer["oldQueryState"] = Value::String(since.unwrap_or_default().into());
        answer["accountId"] = Value::String(account_id.into());
        answer["removed"] = Value::Array(removed);
        answer["added"] = Value::Array(added);
        Ok((name, answer))
    }

    /// The `removed` and `added` of the local Email/queryChanges `answer`
    /// on local account `account` in upstream ids, all or none: `None`
    /// when one is not mapped (an email destroyed, whose upstream id went
    /// with it) or the answer is not understood.
    async fn upstream_changes(
        &self,
        account: i64,
        answer: &Value,
    ) -> Result<Option<(Vec<Value>, Vec<Value>)>, UpstreamError> {
        let local = |id: &Value| id.as_str().and_then(ids::parse_email_id);
        let removed: Option<Vec<i64>> =
            (answer["removed"].as_array()).and_then(|list| list.iter().map(local).collect());
        let added: Option<Vec<(i64, Value)>> = (answer["added"].as_array()).and_then(|list| {
            (list.iter())
                .map(|item| Some((local(&item["id"])?, item["index"].clone())))
                .collect()
        });
        let (Some(removed), Some(added)) = (removed, added) else {
            return Ok(None);
        };
        let local_ids: Vec<i64> = (removed.iter())
            .chain(added.iter().map(|(id, _)| id))
            .copied()
            .collect();
        let mapped = (self.mirror.names)
            .by_local(&*self.jmap.store, account, &local_ids)
            .await?;
        let upstream_of: HashMap<i64, &str> = mapped
            .iter()
            .map(|m| (m.email_id, m.upstream_id.as_str()))
            .collect();
        let upstream = |id: &i64| upstream_of.get(id).map(|id| Value::String(id.to_string()));
        let removed: Option<Vec<Value>> = removed.iter().map(upstream).collect();
        let added: Option<Vec<Value>> = (added.iter())
            .map(|(id, index)| Some(json!({"id": upstream(id)?, "index": index})))
            .collect();
        Ok(removed.zip(added))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_query_state_is_told_apart_from_any_upstream_state() {
        let minted = minted_query_state(7, "42");
        assert_eq!(minted, "fastview~mirror~7~42");
        assert_eq!(parse_minted(&minted), Some((7, "42")));
        for upstream in [
            "25:0",
            "42",
            "",
            "fastview~mirror~",
            "fastview~mirror~x~1",
            "Sa1b2",
        ] {
            assert_eq!(parse_minted(upstream), None, "{upstream}");
        }
    }
}

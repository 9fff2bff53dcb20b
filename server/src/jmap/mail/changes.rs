//! Foo/changes (RFC 8620 §5.2) for every type but Quota, from the store's
//! change log ([`crate::store::Store::changes`]); Email/changes,
//! Thread/changes, Identity/changes and EmailSubmission/changes are
//! [`changes_response`] itself.
//!
//! A state string is the modseq of the type's last change (`"12"`); a page
//! cut inside one large write (a batch import with a small `maxChanges`)
//! leads to an intermediate state `"12:40"` that only Foo/changes accepts.
//! A `sinceState` that does not parse, lies in the future or before the
//! retained log is `cannotCalculateChanges`.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::jmap::args;
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::ids;
use crate::jmap::vacation::SINGLETON;
use crate::store::{ChangeType, Changes, LogPosition};

/// The arguments of a Foo/changes (RFC 8620 §5.2).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangesArgs {
    pub account_id: String,
    pub since_state: String,
    pub max_changes: Option<u64>,
}

args::account_arguments!(ChangesArgs);

/// Parses a state string a client sends back; anything this server never
/// issued is `cannotCalculateChanges`.
pub fn parse_state(state: &str) -> Result<LogPosition, MethodError> {
    LogPosition::parse(state).ok_or_else(|| {
        MethodError::CannotCalculateChanges(format!("{state:?} is not a state of this server"))
    })
}

/// Handles one Foo/changes call of a type whose response adds nothing to
/// [`changes`]'s (Email, Thread, Identity, EmailSubmission): `kind`'s
/// changes.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id, ?kind))]
pub async fn changes_response(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
    kind: ChangeType,
) -> Result<Value, MethodError> {
    Ok(changes(ctx, arguments, kind).await?.0)
}

/// The id of an object of `kind` (`singleton` for the one VacationResponse).
fn object_id(kind: ChangeType) -> fn(i64) -> String {
    match kind {
        ChangeType::Email => ids::email_id,
        ChangeType::Mailbox => ids::mailbox_id,
        ChangeType::Thread => ids::thread_id,
        ChangeType::Identity => ids::identity_id,
        ChangeType::VacationResponse => |_| SINGLETON.to_string(),
        ChangeType::EmailSubmission => ids::submission_id,
    }
}

/// Runs one Foo/changes call for `kind`; returns the response arguments
/// and the changes (for type-specific additions).
pub async fn changes(
    ctx: &CallContext<'_>,
    arguments: Map<String, Value>,
    kind: ChangeType,
) -> Result<(Value, Changes), MethodError> {
    let id = object_id(kind);
    let request: ChangesArgs = args::parse_for(ctx.account, arguments)?;
    let cap = ctx.jmap.limits.max_objects_in_get.max(1);
    let max = match request.max_changes {
        Some(0) => {
            return Err(MethodError::InvalidArguments(
                "maxChanges must be greater than 0".into(),
            ));
        }
        Some(max) => max.min(cap),
        None => cap,
    };
    let since = parse_state(&request.since_state)?;
    let changes = ctx
        .jmap
        .store
        .changes(ctx.account.id, kind, since, max as usize)
        .await?;
    let list = |ids: &[i64]| ids.iter().map(|n| id(*n)).collect::<Vec<_>>();
    let response = json!({
        "accountId": request.account_id,
        "oldState": request.since_state,
        "newState": changes.new_state.to_string(),
        "hasMoreChanges": changes.has_more,
        "created": list(&changes.created),
        "updated": list(&changes.updated),
        "destroyed": list(&changes.destroyed),
    });
    Ok((response, changes))
}

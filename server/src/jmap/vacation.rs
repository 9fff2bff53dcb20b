//! VacationResponse/get and VacationResponse/set (RFC 8621 §8): one object
//! per account, id `singleton`, disabled until set. It answers mail
//! delivered to the account while enabled and within its dates.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::jmap::Jmap;
use crate::jmap::args::{parse_utc_date, utc_date};
use crate::jmap::call::CallContext;
use crate::jmap::error::{MethodError, SetError};
use crate::jmap::mail::get::{ListedObject, object_of};
use crate::jmap::mail::set::{SetArgs, SetOutcome};
use crate::store::VacationResponse;

/// The id of the one VacationResponse (RFC 8621 §8).
pub const SINGLETON: &str = "singleton";

/// Every VacationResponse property.
const PROPERTIES: &[&str] = &[
    "id",
    "isEnabled",
    "fromDate",
    "toDate",
    "subject",
    "textBody",
    "htmlBody",
];

/// The one VacationResponse of an account, numbered 0.
impl ListedObject for VacationResponse {
    const PROPERTIES: &'static [&'static str] = PROPERTIES;

    fn to_json(&self, properties: &[&'static str]) -> Value {
        let date = |seconds: Option<i64>| seconds.map(utc_date);
        object_of(properties, |property| match property {
            "id" => json!(SINGLETON),
            "isEnabled" => json!(self.is_enabled),
            "fromDate" => json!(date(self.from_date)),
            "toDate" => json!(date(self.to_date)),
            "subject" => json!(self.subject),
            "textBody" => json!(self.text_body),
            _ => json!(self.html_body),
        })
    }

    fn jmap_id(&self) -> String {
        SINGLETON.to_string()
    }

    async fn read_all(jmap: &Jmap, account: i64) -> Result<(i64, Arc<Vec<Self>>), MethodError> {
        let state = jmap.store.states(account).await?.vacation_response;
        let response = jmap.store.vacation_response(account).await?;
        Ok((state, Arc::new(vec![response])))
    }
}

/// `response` with the properties of an update applied; a property of the
/// wrong type is `invalidProperties` naming it.
fn apply(
    mut response: VacationResponse,
    patch: &Map<String, Value>,
) -> Result<VacationResponse, SetError> {
    let invalid = |name: &str, what: &str| {
        SetError::invalid_properties(&[name], format!("{name} must be {what}"))
    };
    let text = |name: &str, value: &Value| match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(text.clone())),
        _ => Err(invalid(name, "a string or null")),
    };
    let date = |name: &str, value: &Value| match value {
        Value::Null => Ok(None),
        Value::String(text) => parse_utc_date(text)
            .map(Some)
            .ok_or_else(|| invalid(name, "a UTCDate or null")),
        _ => Err(invalid(name, "a UTCDate or null")),
    };
    for (name, value) in patch {
        match name.as_str() {
            "isEnabled" => {
                response.is_enabled = value.as_bool().ok_or_else(|| invalid(name, "a boolean"))?
            }
            "fromDate" => response.from_date = date(name, value)?,
            "toDate" => response.to_date = date(name, value)?,
            "subject" => response.subject = text(name, value)?,
            "textBody" => response.text_body = text(name, value)?,
            "htmlBody" => response.html_body = text(name, value)?,
            "id" if value.as_str() == Some(SINGLETON) => {}
            "id" => return Err(invalid(name, "\"singleton\"")),
            other => return Err(SetError::invalid_properties(&[other], "unknown property")),
        }
    }
    Ok(response)
}

/// Handles one VacationResponse/set call (the standard arguments, RFC 8620
/// §5.3): only an update of `singleton`.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn vacation_set(
    ctx: &mut CallContext<'_>,
    request: SetArgs<Value>,
) -> Result<Value, MethodError> {
    let old_state = request
        .check(ctx, |states| states.vacation_response)
        .await?;
    let store = ctx.jmap.store.clone();
    let account = ctx.account.id;
    let singleton = || SetError::new("singleton", "there is one VacationResponse, \"singleton\"");
    let mut outcome = SetOutcome::default();
    for creation_id in request.create.unwrap_or_default().into_keys() {
        outcome.not_created.push((creation_id, singleton()));
    }
    for (id, patch) in request.update.unwrap_or_default() {
        if id != SINGLETON {
            outcome.not_updated.push((id, SetError::not_found()));
            continue;
        }
        let current = store.vacation_response(account).await?;
        match apply(current, &patch) {
            Ok(response) => {
                store.set_vacation_response(account, &response).await?;
                outcome.updated.insert(id, Value::Null);
            }
            Err(error) => outcome.not_updated.push((id, error)),
        }
    }
    for id in request.destroy.unwrap_or_default() {
        outcome.not_destroyed.push((id, singleton()));
    }
    let new_state = store.states(account).await?.vacation_response;
    Ok(outcome.into_response(request.account_id, old_state, new_state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_changes_what_it_names_and_checks_types() {
        let patch = json!({"isEnabled": true, "fromDate": "2026-12-24T00:00:00Z",
            "subject": "Away", "textBody": null});
        let response = apply(VacationResponse::default(), patch.as_object().unwrap()).unwrap();
        assert_eq!(
            response,
            VacationResponse {
                is_enabled: true,
                from_date: Some(1_798_070_400),
                to_date: None,
                subject: Some("Away".into()),
                text_body: None,
                html_body: None,
            }
        );
        assert_eq!(
            response.to_json(PROPERTIES),
            json!({"id": "singleton", "isEnabled": true, "fromDate": "2026-12-24T00:00:00Z",
                "toDate": null, "subject": "Away", "textBody": null, "htmlBody": null})
        );
        for (bad, property) in [
            (json!({"isEnabled": "yes"}), "isEnabled"),
            (json!({"toDate": "tomorrow"}), "toDate"),
            (json!({"subject": 5}), "subject"),
            (json!({"color": "red"}), "color"),
        ] {
            let error = apply(VacationResponse::default(), bad.as_object().unwrap()).unwrap_err();
            assert_eq!(error.properties, vec![property.to_string()]);
        }
    }
}

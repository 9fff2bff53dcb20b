//! The Session object (RFC 8620 §2): capabilities with their limits, the
//! user's account, and the URLs of the API, download, upload and event source.

use serde_json::{Value, json};

use super::Limits;
use super::ids;
use super::request::{
    CAPABILITY_CORE, CAPABILITY_MAIL, CAPABILITY_QUOTA, CAPABILITY_SUBMISSION, CAPABILITY_VACATION,
};
use crate::store::Account;

/// Sort properties Email/query accepts (RFC 8621 §4.4.2 `emailQuerySortOptions`).
pub const EMAIL_SORT_OPTIONS: &[&str] = &[
    "receivedAt",
    "sentAt",
    "size",
    "from",
    "to",
    "subject",
    "hasKeyword",
    "someInThreadHaveKeyword",
    "allInThreadHaveKeyword",
];

/// The session state string (RFC 8620 §2 `state`): it changes exactly when
/// the session object would: the account, the server's capabilities, or its
/// event source's push access, which names the day (UTC) it is issued on
/// ([`push_access_day`]) and the credential the session is fetched with
/// (`credential`, a short tag the HTTP layer gives: a changed password or
/// another token is another session). A client that watches `sessionState`
/// therefore fetches a fresh session, and push access, after either changes.
pub fn session_state(account: &Account, credential: &str) -> String {
    // Written piece by piece, not with `format!`: every API response
    // carries it (issue 20).
    let version = env!("CARGO_PKG_VERSION");
    let mut state = String::with_capacity(version.len() + credential.len() + 32);
    state.push_str(version);
    state.push('-');
    state.push_str(itoa::Buffer::new().format(account.id));
    state.push('-');
    state.push_str(itoa::Buffer::new().format(push_access_day(chrono::Utc::now().timestamp())));
    state.push('-');
    state.push_str(credential);
    state
}

/// The day (UTC, days since 1970) of `now` (unix seconds): a session's push
/// access is the same all day, so the session object (and its state) is too.
pub fn push_access_day(now: i64) -> i64 {
    now.div_euclid(86_400)
}

/// Builds the session for an account. `base_url` is absolute, without a
/// trailing slash; `push_access` is the signed access its `eventSourceUrl`
/// carries for a browser (`crate::http::push_access`), `credential` the tag
/// of the credential it was made for ([`session_state`]). `submission`:
/// whether the instance can send (`crate::mail::delivery::Route::offers_submission`);
/// without, `urn:ietf:params:jmap:submission` is advertised nowhere (RFC
/// 8620 §2: the capabilities are what the server supports).
pub fn session(
    account: &Account,
    limits: &Limits,
    base_url: &str,
    push_access: &str,
    credential: &str,
    submission: bool,
) -> Value {
    let account_id = ids::account_id(account.id);
    let mut session = json!({
        "capabilities": {
            CAPABILITY_CORE: {
                "maxSizeUpload": limits.max_size_upload,
                "maxConcurrentUpload": limits.max_concurrent_upload,
                "maxSizeRequest": limits.max_size_request,
                "maxConcurrentRequests": limits.max_concurrent_requests,
                "maxCallsInRequest": limits.max_calls_in_request,
                "maxObjectsInGet": limits.max_objects_in_get,
                "maxObjectsInSet": limits.max_objects_in_set,
                "collationAlgorithms": ["i;ascii-numeric", "i;ascii-casemap", "i;unicode-casemap"],
            },
            CAPABILITY_MAIL: {},
            CAPABILITY_QUOTA: {},
            CAPABILITY_SUBMISSION: {},
            CAPABILITY_VACATION: {},
        },
        "accounts": {
            account_id.clone(): {
                "name": account.email,
                "isPersonal": true,
                "isReadOnly": false,
                "accountCapabilities": {
                    CAPABILITY_CORE: {},
                    CAPABILITY_MAIL: {
                        "maxMailboxesPerEmail": null,
                        "maxMailboxDepth": limits.max_mailbox_depth,
                        "maxSizeMailboxName": limits.max_size_mailbox_name,
                        "maxSizeAttachmentsPerEmail": limits.max_size_upload,
                        "emailQuerySortOptions": EMAIL_SORT_OPTIONS,
                        "mayCreateTopLevelMailbox": true,
                    },
                    CAPABILITY_QUOTA: {},
                    // RFC 8621 §1.3.2: no delayed sending, no SMTP extensions
                    // passed through.
                    CAPABILITY_SUBMISSION: {
                        "maxDelayedSend": 0,
                        "submissionExtensions": {},
                    },
                    CAPABILITY_VACATION: {},
                },
            },
        },
        "primaryAccounts": {
            CAPABILITY_CORE: account_id,
            CAPABILITY_MAIL: account_id,
            CAPABILITY_QUOTA: account_id,
            CAPABILITY_SUBMISSION: account_id,
            CAPABILITY_VACATION: account_id,
        },
        "username": account.email,
        "apiUrl": format!("{base_url}/jmap/api"),
        "downloadUrl": format!("{base_url}/jmap/download/{{accountId}}/{{blobId}}/{{name}}?type={{type}}"),
        "uploadUrl": format!("{base_url}/jmap/upload/{{accountId}}/"),
        "eventSourceUrl": format!("{base_url}/jmap/eventsource?types={{types}}&closeafter={{closeafter}}&ping={{ping}}&access={push_access}"),
        "state": session_state(account, credential),
    });
    if !submission {
        for place in [
            "/capabilities",
            &format!("/accounts/{account_id}/accountCapabilities"),
            "/primaryAccounts",
        ] {
            if let Some(capabilities) = session.pointer_mut(place).and_then(Value::as_object_mut) {
                capabilities.remove(CAPABILITY_SUBMISSION);
            }
        }
    }
    session
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submission_is_advertised_only_when_the_instance_can_send() {
        let account = Account {
            id: 7,
            email: "a@example.com".into(),
            password_hash: String::new(),
        };
        let limits = Limits::default();
        let with = session(&account, &limits, "http://x", "p", "c", true);
        let without = session(&account, &limits, "http://x", "p", "c", false);
        let account_id = ids::account_id(7);
        let places = |session: &Value| {
            [
                session["capabilities"].get(CAPABILITY_SUBMISSION).cloned(),
                session["accounts"][&account_id]["accountCapabilities"]
                    .get(CAPABILITY_SUBMISSION)
                    .cloned(),
                session["primaryAccounts"]
                    .get(CAPABILITY_SUBMISSION)
                    .cloned(),
            ]
        };
        assert_eq!(
            places(&with),
            [
                Some(json!({})),
                Some(json!({"maxDelayedSend": 0, "submissionExtensions": {}})),
                Some(json!(account_id)),
            ]
        );
        assert_eq!(places(&without), [None, None, None]);
        // The rest is the same.
        assert_eq!(
            without["primaryAccounts"][CAPABILITY_MAIL],
            json!(account_id)
        );
        assert_eq!(
            without["capabilities"].as_object().unwrap().len() + 1,
            with["capabilities"].as_object().unwrap().len()
        );
    }

    #[test]
    fn the_session_state_names_version_account_day_and_credential() {
        let account = Account {
            id: 42,
            email: "a@example.com".into(),
            password_hash: String::new(),
        };
        let state = session_state(&account, "p0011223344556677");
        let day = push_access_day(chrono::Utc::now().timestamp());
        // Read the day again: a test run across midnight (UTC) sees either.
        assert!(
            [day - 1, day]
                .into_iter()
                .any(|day| state
                    == format!("{}-42-{day}-p0011223344556677", env!("CARGO_PKG_VERSION"))),
            "{state}"
        );
    }
}

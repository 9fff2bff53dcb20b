//! EmailSubmission/get, /changes, /query, /set (RFC 8621 §7).
//!
//! A create checks the identity, the Email and the envelope (derived from
//! the message when null, §7.5), stores the message as it leaves (Bcc
//! removed) and the submission with its deliveries in one transaction
//! (`Store::create_submission`), then delivers at once: a recipient that
//! is an account here gets a copy in its inbox, any other goes to the SMTP
//! relay (`serve --smtp-relay`; without one such recipients are
//! `invalidRecipients`), `mail/delivery.rs`. Local recipients and the
//! others are two deliveries: the local one is made before the answer, the
//! other is waited for at most [`crate::jmap::Limits::submit_wait`] and
//! goes on after the answer (its recipients `queued` in it), so a slow or
//! silent relay never holds the call. What is not delivered at once stays
//! queued and `fastview serve` retries it.
//!
//! Every submission counts against the account's hourly send limits
//! (`serve --max-sent-messages-per-hour`, `--max-sent-recipients-per-hour`,
//! local recipients included; counted in the store, so on every node and
//! across restarts): past them a create is `overQuota` (messages) or
//! `tooManyRecipients` with `maxRecipients` the recipients left this hour.
//! Sending is immediate (`maxDelayedSend` 0): `undoStatus` is `final`.
//! `onSuccessUpdateEmail` / `onSuccessDestroyEmail` run as one implicit
//! Email/set whose response follows this one.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::identity::{may_send_as, plausible_address};
use crate::jmap::Jmap;
use crate::jmap::args::{self, utc_date};
use crate::jmap::call::CallContext;
use crate::jmap::error::{MethodError, SetError};
use crate::jmap::ids;
use crate::jmap::mail::email;
use crate::jmap::mail::get::{ListedObject, object_of};
use crate::jmap::mail::set::{SetArgs, SetOutcome};
use crate::mail::delivery;
use crate::mail::header::HeaderFields;
use crate::mail::submission::{
    Outgoing, derived_envelope, from_addresses, originators, sender_addresses,
};
use crate::store::{
    Delivery, EmailMeta, IdentityRow, SendLimitHit, SendLimits, StoreError, SubmissionRow,
};

/// Every EmailSubmission property (RFC 8621 §7).
const PROPERTIES: &[&str] = &[
    "id",
    "identityId",
    "emailId",
    "threadId",
    "envelope",
    "sendAt",
    "undoStatus",
    "deliveryStatus",
    "dsnBlobIds",
    "mdnBlobIds",
];

/// Recipients one submission may have (`tooManyRecipients` above).
pub const MAX_RECIPIENTS: usize = 100;

impl ListedObject for SubmissionRow {
    const PROPERTIES: &'static [&'static str] = PROPERTIES;

    fn to_json(&self, properties: &[&'static str]) -> Value {
        let parsed = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
        object_of(properties, |property| match property {
            "id" => json!(ids::submission_id(self.id)),
            "identityId" => json!(ids::identity_id(self.identity_id)),
            "emailId" => json!(ids::email_id(self.email_id)),
            "threadId" => json!(ids::thread_id(self.thread_id)),
            "envelope" => parsed(&self.envelope),
            "sendAt" => json!(utc_date(self.send_at)),
            "undoStatus" => json!(self.undo_status),
            "deliveryStatus" => parsed(&self.delivery_status),
            _ => json!([]),
        })
    }

    fn jmap_id(&self) -> String {
        ids::submission_id(self.id)
    }

    async fn read_all(jmap: &Jmap, account: i64) -> Result<(i64, Arc<Vec<Self>>), MethodError> {
        let state = jmap.store.states(account).await?.email_submission;
        Ok((state, Arc::new(jmap.store.submissions(account).await?)))
    }
}

/// EmailSubmission/set arguments (RFC 8621 §7.5).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetRequest {
    #[serde(flatten)]
    set: SetArgs,
    on_success_update_email: Option<Map<String, Value>>,
    on_success_destroy_email: Option<Vec<String>>,
}

args::account_arguments!(SetRequest, set.account_id);

/// A submission ready to store: the row, the message as it leaves, and
/// who gets it: accounts on this server (`local`), and the others.
struct Planned {
    row: SubmissionRow,
    message: Vec<u8>,
    mail_from: String,
    local: Vec<String>,
    remote: Vec<String>,
}

/// Handles one EmailSubmission/set call: creates (sends), then updates
/// (only `undoStatus`, which cannot change once final: `cannotUnsend`),
/// then destroys (the records; deliveries go on); then the implicit
/// Email/set of `onSuccessUpdateEmail` and `onSuccessDestroyEmail`.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn submission_set(
    ctx: &mut CallContext<'_>,
    mut request: SetRequest,
) -> Result<Value, MethodError> {
    let (store, account) = (ctx.jmap.store.clone(), ctx.account.id);
    let old_state = request
        .set
        .check(ctx, |states| states.email_submission)
        .await?;
    let mut set = SubmissionSet::default();
    set.create(ctx, request.set.create.take().unwrap_or_default())
        .await?;
    let rows = store.submissions(account).await?;
    set.update(ctx, &rows, request.set.update.take().unwrap_or_default());
    set.destroy(ctx, &rows, request.set.destroy.take().unwrap_or_default())
        .await?;
    let new_state = store.states(account).await?.email_submission;
    let response = set
        .outcome
        .into_response(request.set.account_id.clone(), old_state, new_state);
    let implicit = implicit_email_set(
        &request.set.account_id,
        &set.sent,
        request.on_success_update_email,
        request.on_success_destroy_email,
    );
    if let Some(arguments) = implicit {
        follow_up_email_set(ctx, arguments).await;
    }
    ctx.jmap
        .writer
        .keep_sent_copies(account, set.sent_copies)
        .await;
    Ok(response)
}

/// What an EmailSubmission/set has done so far.
#[derive(Default)]
struct SubmissionSet {
    outcome: SetOutcome,
    /// Submission id (or `#creationId`) → the Email it sent.
    sent: HashMap<String, i64>,
    /// What each create sent, for its copy in Sent when the writer keeps one.
    sent_copies: Vec<(i64, Vec<u8>)>,
}

impl SubmissionSet {
    /// Plans and sends each create, in creation-id order.
    async fn create(
        &mut self,
        ctx: &mut CallContext<'_>,
        creates: HashMap<String, Map<String, Value>>,
    ) -> Result<(), MethodError> {
        let (store, account) = (&ctx.jmap.store, ctx.account.id);
        let send_as = SendAs {
            identities: store.identities(account).await?,
            aliases: store.aliases(account).await?,
        };
        let mut creates: Vec<_> = creates.into_iter().collect();
        creates.sort_by(|a, b| a.0.cmp(&b.0));
        for (creation_id, object) in creates {
            let planned = match plan_create(ctx, &send_as, &object).await? {
                Ok(planned) => planned,
                Err(error) => {
                    self.outcome.not_created.push((creation_id, error));
                    continue;
                }
            };
            let keeps_copy = ctx.jmap.writer.files_sent_copies();
            let message = keeps_copy.then(|| planned.message.clone());
            let (id, email_id, created) = match send(ctx, planned).await? {
                Ok(sent) => sent,
                Err(error) => {
                    self.outcome.not_created.push((creation_id, error));
                    continue;
                }
            };
            if let Some(message) = message {
                self.sent_copies.push((email_id, message));
            }
            let jmap_id = ids::submission_id(id);
            ctx.created_ids.insert(creation_id.clone(), jmap_id.clone());
            self.sent.insert(format!("#{creation_id}"), email_id);
            self.sent.insert(jmap_id, email_id);
            self.outcome.created.insert(creation_id, created);
        }
        Ok(())
    }

    /// Updates: only `undoStatus`, which cannot change once final.
    fn update(
        &mut self,
        ctx: &CallContext<'_>,
        rows: &[SubmissionRow],
        updates: HashMap<String, Map<String, Value>>,
    ) {
        for (id, patch) in updates {
            let Some(row) = known_row(rows, ctx.created_ids, &id) else {
                self.outcome.not_updated.push((id, SetError::not_found()));
                continue;
            };
            match undo_status_error(row, &patch) {
                Some(error) => self.outcome.not_updated.push((id, error)),
                None => {
                    self.sent.insert(id.clone(), row.email_id);
                    self.outcome.updated.insert(id, Value::Null);
                }
            }
        }
    }

    /// Destroys the records (deliveries go on).
    async fn destroy(
        &mut self,
        ctx: &CallContext<'_>,
        rows: &[SubmissionRow],
        destroy: Vec<String>,
    ) -> Result<(), MethodError> {
        for id in destroy {
            let Some(row) = known_row(rows, ctx.created_ids, &id) else {
                self.outcome.not_destroyed.push((id, SetError::not_found()));
                continue;
            };
            match ctx
                .jmap
                .store
                .destroy_submission(ctx.account.id, row.id)
                .await
            {
                Ok(()) => {
                    self.sent.insert(id.clone(), row.email_id);
                    self.outcome.destroyed.push(id);
                }
                Err(StoreError::NotFound) => {
                    self.outcome.not_destroyed.push((id, SetError::not_found()))
                }
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }
}

/// The submission an id or `#creationId` names among `rows`.
fn known_row<'r>(
    rows: &'r [SubmissionRow],
    created_ids: &HashMap<String, String>,
    id: &str,
) -> Option<&'r SubmissionRow> {
    let id = match id.strip_prefix('#') {
        Some(creation) => created_ids.get(creation).cloned()?,
        None => id.to_string(),
    };
    let id = ids::parse_submission_id(&id)?;
    rows.iter().find(|row| row.id == id)
}

/// Why a patch of `row` is refused, if it is: only `undoStatus` may change,
/// and only to `canceled`, which a message sent at once cannot become.
fn undo_status_error(row: &SubmissionRow, patch: &Map<String, Value>) -> Option<SetError> {
    match patch.get("undoStatus").and_then(Value::as_str) {
        _ if patch.keys().any(|key| key != "undoStatus") => Some(SetError::invalid_properties(
            &["undoStatus"],
            "only undoStatus may change",
        )),
        Some(status) if status == row.undo_status => None,
        Some("canceled") => Some(SetError::new(
            "cannotUnsend",
            "the message was sent at once and cannot be recalled",
        )),
        _ => Some(SetError::invalid_properties(
            &["undoStatus"],
            "undoStatus may only become \"canceled\"",
        )),
    }
}

/// Runs the implicit Email/set and adds its response (or its error) after
/// this call's, as RFC 8621 §7.5 says.
async fn follow_up_email_set(ctx: &mut CallContext<'_>, arguments: Map<String, Value>) {
    let answered = match args::parse_for(ctx.account, arguments) {
        Ok(request) => email::set::email_set(ctx, request).await,
        Err(error) => Err(error),
    };
    let follow_up = match answered {
        Ok(response) => ("Email/set".to_string(), response),
        Err(error) => (
            "error".to_string(),
            crate::jmap::call::error_response("Email/set", "implicit", &error),
        ),
    };
    ctx.follow_ups.push(follow_up);
}

/// The arguments of the implicit Email/set (RFC 8621 §7.5), or `None` when
/// there is nothing to do: the patches and destroys of the submissions that
/// succeeded (`sent`: submission id or `#creationId` → email row id).
fn implicit_email_set(
    account_id: &str,
    sent: &HashMap<String, i64>,
    update: Option<Map<String, Value>>,
    destroy: Option<Vec<String>>,
) -> Option<Map<String, Value>> {
    let mut updates = Map::new();
    for (submission, patch) in update.unwrap_or_default() {
        if let Some(email) = sent.get(&submission) {
            updates.insert(ids::email_id(*email), patch);
        }
    }
    let destroys: Vec<String> = destroy
        .unwrap_or_default()
        .iter()
        .filter_map(|submission| sent.get(submission))
        .map(|email| ids::email_id(*email))
        .collect();
    if updates.is_empty() && destroys.is_empty() {
        return None;
    }
    let mut arguments = Map::new();
    arguments.insert("accountId".into(), json!(account_id));
    if !updates.is_empty() {
        arguments.insert("update".into(), Value::Object(updates));
    }
    if !destroys.is_empty() {
        arguments.insert("destroy".into(), json!(destroys));
    }
    Some(arguments)
}

/// What the account may send as, read once per call: its identities and
/// the aliases an operator granted it.
struct SendAs {
    identities: Vec<IdentityRow>,
    aliases: Vec<String>,
}

/// Checks one create and reads what it sends; `Ok(Err(_))` is the
/// SetError for this create, `Err(_)` a failure of the whole call.
async fn plan_create(
    ctx: &CallContext<'_>,
    send_as: &SendAs,
    object: &Map<String, Value>,
) -> Result<Result<Planned, SetError>, MethodError> {
    if let Err(error) = check_properties(object) {
        return Ok(Err(error));
    }
    let (identity, email) = match identity_and_email(ctx, send_as, object).await? {
        Ok(found) => found,
        Err(error) => return Ok(Err(error)),
    };
    let aliases = &send_as.aliases;
    let own = &ctx.account.email;
    if !may_send_as(own, aliases, &identity.email) {
        let why = format!("this account may no longer send as {}", identity.email);
        return Ok(Err(SetError::new("forbiddenFrom", why)));
    }
    let (outgoing, fields) = match read_outgoing(ctx, &email).await? {
        Ok(read) => read,
        Err(error) => return Ok(Err(error)),
    };
    let may = |address: &str| may_send_as(own, aliases, address);
    if let Err(error) = check_originators(&fields, &may) {
        return Ok(Err(error));
    }
    let (mail_from, recipients) = match envelope_of(object.get("envelope"), &fields, &may) {
        Ok((from, recipients)) => {
            // §7.5: an address the identity may not send as gives way to
            // the identity's.
            let from = from.unwrap_or_else(|| identity.email.clone());
            (from, recipients)
        }
        Err(error) => return Ok(Err(error)),
    };
    let (local, remote) = match sort_recipients(ctx, &recipients).await? {
        Ok(sorted) => sorted,
        Err(error) => return Ok(Err(error)),
    };
    Ok(Ok(Planned {
        row: submission_row(identity.id, &email, &mail_from, &recipients),
        message: outgoing.message,
        mail_from,
        local,
        remote,
    }))
}

/// The identity and the Email a create names (`identityId`, `emailId`,
/// either a `#creationId`), or `invalidProperties` for the one not found.
async fn identity_and_email<'s>(
    ctx: &CallContext<'_>,
    send_as: &'s SendAs,
    object: &Map<String, Value>,
) -> Result<Result<(&'s IdentityRow, EmailMeta), SetError>, MethodError> {
    let reference = |name: &str| {
        let id = object.get(name)?.as_str()?;
        match id.strip_prefix('#') {
            Some(creation) => ctx.created_ids.get(creation).cloned(),
            None => Some(id.to_string()),
        }
    };
    let identity = reference("identityId")
        .and_then(|id| ids::parse_identity_id(&id))
        .and_then(|id| send_as.identities.iter().find(|row| row.id == id));
    let Some(identity) = identity else {
        return Ok(Err(SetError::invalid_properties(
            &["identityId"],
            "no such identity",
        )));
    };
    let email = match reference("emailId").and_then(|id| ids::parse_email_id(&id)) {
        Some(id) => ctx
            .jmap
            .store
            .email_meta(ctx.account.id, &[id])
            .await?
            .into_iter()
            .next(),
        None => None,
    };
    match email {
        Some(email) => Ok(Ok((identity, email))),
        None => Ok(Err(SetError::invalid_properties(
            &["emailId"],
            "no such email",
        ))),
    }
}

/// `invalidProperties` for a property a client may not give: a server-set
/// one or an unknown one (only identityId, emailId and envelope are the
/// client's).
fn check_properties(object: &Map<String, Value>) -> Result<(), SetError> {
    for name in object.keys() {
        if !matches!(name.as_str(), "identityId" | "emailId" | "envelope") {
            let why = match PROPERTIES.contains(&name.as_str()) {
                true => "server-set property",
                false => "unknown property",
            };
            return Err(SetError::invalid_properties(&[name.as_str()], why));
        }
    }
    Ok(())
}

/// The stored message of `email` read into what leaves ([`Outgoing`]),
/// its header fields parsed once for every check; `tooLarge` past
/// `maxSizeUpload`, `invalidEmail` for a header read two ways.
async fn read_outgoing(
    ctx: &CallContext<'_>,
    email: &EmailMeta,
) -> Result<Result<(Outgoing, HeaderFields), SetError>, MethodError> {
    let max_size = ctx.jmap.limits.max_size_upload;
    if email.size as u64 > max_size {
        let error = SetError::new("tooLarge", format!("at most {max_size} octets may be sent"));
        return Ok(Err(error.with("maxSize", json!(max_size))));
    }
    let raw = match ctx.jmap.blobs.get(&email.blob_id).await {
        Ok(Some(raw)) => raw,
        Ok(None) => {
            return Err(MethodError::server_fail(
                "reading a message to send",
                "missing",
            ));
        }
        Err(error) => return Err(MethodError::server_fail("reading a message to send", error)),
    };
    // What is checked is what leaves: the message read once into the
    // octets the relay sends (issue 43).
    Ok(Outgoing::prepare(&raw)
        .map(|outgoing| {
            let fields = outgoing.fields();
            (outgoing, fields)
        })
        .map_err(|error| SetError::new("invalidEmail", error.to_string())))
}

/// `forbiddenFrom` unless every originator the message names is one the
/// account may send as (`may`), read by the strict grammar (so that no mail
/// program reads another address; `invalidEmail` when it cannot) and as
/// Email/get reads them; a message needs a From.
fn check_originators(fields: &HeaderFields, may: &dyn Fn(&str) -> bool) -> Result<(), SetError> {
    let strict =
        originators(fields).map_err(|error| SetError::new("invalidEmail", error.to_string()))?;
    let (froms, senders) = (from_addresses(fields), sender_addresses(fields));
    let foreign = strict.iter().chain(&froms).chain(&senders).any(|a| !may(a));
    if froms.is_empty() || foreign {
        let why = "the From, Sender, Resent-From and Resent-Sender fields must name only \
                   addresses this account may send as";
        return Err(SetError::new("forbiddenFrom", why));
    }
    Ok(())
}

/// The envelope: the client's, or derived from the header (RFC 8621 §7.5;
/// its MAIL FROM `None` when the message's is not one the account may send
/// as); `forbiddenMailFrom`, `noRecipients`, `tooManyRecipients`.
fn envelope_of(
    given: Option<&Value>,
    fields: &HeaderFields,
    may: &dyn Fn(&str) -> bool,
) -> Result<(Option<String>, Vec<String>), SetError> {
    let (mail_from, recipients) = match given {
        None | Some(Value::Null) => {
            let (from, recipients) = derived_envelope(fields)
                .map_err(|error| SetError::new("invalidEmail", error.to_string()))?;
            (from.filter(|from| may(from)), recipients)
        }
        Some(envelope) => match given_envelope(envelope) {
            Some((from, recipients)) => (Some(from), recipients),
            None => {
                let why = "envelope must be {mailFrom, rcptTo}";
                return Err(SetError::invalid_properties(&["envelope"], why));
            }
        },
    };
    if let Some(from) = mail_from.as_deref().filter(|from| !may(from)) {
        let why = format!("this account may not use {from} as the envelope sender");
        return Err(SetError::new("forbiddenMailFrom", why));
    }
    if recipients.is_empty() {
        return Err(SetError::new(
            "noRecipients",
            "the envelope has no recipient",
        ));
    }
    if recipients.len() > MAX_RECIPIENTS {
        let why = format!("at most {MAX_RECIPIENTS} recipients per submission");
        let error = SetError::new("tooManyRecipients", why);
        return Err(error.with("maxRecipients", json!(MAX_RECIPIENTS)));
    }
    Ok((mail_from, recipients))
}

/// The recipients as (accounts here, the others), or `invalidRecipients`.
/// With a relay (or each account's own submission server) any address may
/// be sent to; without, only the accounts here. When every recipient goes
/// to the account's own server, none is delivered here.
async fn sort_recipients(
    ctx: &CallContext<'_>,
    recipients: &[String],
) -> Result<Result<(Vec<String>, Vec<String>), SetError>, MethodError> {
    let relay = ctx.jmap.route.reaches_any_address();
    let mut invalid_recipients = Vec::new();
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    for recipient in recipients {
        if !plausible_address(recipient) {
            invalid_recipients.push(recipient.clone());
            continue;
        }
        let store = &ctx.jmap.store;
        let here =
            ctx.jmap.route.delivers_here() && store.account_for_address(recipient).await?.is_some();
        match (here, relay) {
            (true, _) => local.push(recipient.clone()),
            (false, true) => remote.push(recipient.clone()),
            (false, false) => invalid_recipients.push(recipient.clone()),
        }
    }
    if invalid_recipients.is_empty() {
        return Ok(Ok((local, remote)));
    }
    let why = match relay {
        true => "these are not addresses mail can be sent to",
        false => "only accounts on this server can be sent to: no SMTP relay is set up",
    };
    let error = SetError::new("invalidRecipients", why);
    Ok(Err(
        error.with("invalidRecipients", json!(invalid_recipients))
    ))
}

/// The submission's row: its envelope, sent now, every recipient queued.
fn submission_row(
    identity: i64,
    email: &EmailMeta,
    mail_from: &str,
    recipients: &[String],
) -> SubmissionRow {
    let envelope = json!({
        "mailFrom": {"email": mail_from, "parameters": null},
        "rcptTo": recipients.iter().map(|r| json!({"email": r, "parameters": null})).collect::<Vec<_>>(),
    });
    let queued = serde_json::from_str::<Value>(&delivery::queued()).unwrap_or(Value::Null);
    let statuses: Map<String, Value> = recipients
        .iter()
        .map(|r| (r.clone(), queued.clone()))
        .collect();
    SubmissionRow {
        id: 0,
        identity_id: identity,
        email_id: email.id,
        thread_id: email.thread_id,
        envelope: envelope.to_string(),
        send_at: chrono::Utc::now().timestamp(),
        undo_status: "final".into(),
        delivery_status: Value::Object(statuses).to_string(),
    }
}

/// A client's Envelope (RFC 8621 §7): (mailFrom, rcptTo addresses), or
/// `None` when it is not one. Parameters are accepted and not passed on
/// (`submissionExtensions` is empty).
fn given_envelope(value: &Value) -> Option<(String, Vec<String>)> {
    let address = |value: &Value| -> Option<String> {
        let object = value.as_object()?;
        if object
            .keys()
            .any(|key| key != "email" && key != "parameters")
        {
            return None;
        }
        match object.get("parameters") {
            None | Some(Value::Null) | Some(Value::Object(_)) => {}
            _ => return None,
        }
        object.get("email")?.as_str().map(str::to_string)
    };
    let object = value.as_object()?;
    if object
        .keys()
        .any(|key| key != "mailFrom" && key != "rcptTo")
    {
        return None;
    }
    let mail_from = address(object.get("mailFrom")?)?;
    let given = object
        .get("rcptTo")?
        .as_array()?
        .iter()
        .map(address)
        .collect::<Option<Vec<_>>>()?;
    // Each recipient once, as the derived envelope has them.
    let mut recipients: Vec<String> = Vec::with_capacity(given.len());
    for recipient in given {
        if !recipients
            .iter()
            .any(|r| r.eq_ignore_ascii_case(&recipient))
        {
            recipients.push(recipient);
        }
    }
    Some((mail_from, recipients))
}

/// The SetError of a create past an hourly send limit.
fn send_limit_error(hit: SendLimitHit) -> SetError {
    match hit {
        SendLimitHit::Messages { limit } => SetError::new(
            "overQuota",
            format!("this account may send {limit} messages an hour: try again later"),
        ),
        SendLimitHit::Recipients { limit, left } => SetError::new(
            "tooManyRecipients",
            format!("this account may send to {limit} recipients an hour; {left} left this hour"),
        )
        .with("maxRecipients", json!(left.clamp(0, MAX_RECIPIENTS as i64))),
    }
}

/// The deliveries of a planned submission: one for the accounts here and
/// one for the others, each marked whether it is remote (to the relay or
/// the account's own server).
fn deliveries_of(account: i64, blob_id: &str, planned: &Planned) -> (Vec<bool>, Vec<Delivery>) {
    [(false, &planned.local), (true, &planned.remote)]
        .into_iter()
        .filter(|(_, recipients)| !recipients.is_empty())
        .map(|(remote, recipients)| {
            (
                remote,
                Delivery {
                    id: 0,
                    submission_id: 0,
                    account_id: account,
                    blob_id: blob_id.to_string(),
                    mail_from: planned.mail_from.clone(),
                    recipients: serde_json::to_string(recipients).unwrap_or_default(),
                    send_at: planned.row.send_at,
                    attempts: 0,
                    lease: 0,
                },
            )
        })
        .unzip()
}

/// Delivers each of submission `id`'s deliveries at once: a local one
/// before the call answers, a remote one for at most `submit_wait`, after
/// which it goes on without the call. A failure leaves it queued, and
/// `serve` retries it.
async fn deliver_now(
    ctx: &CallContext<'_>,
    id: i64,
    deliveries: impl Iterator<Item = (bool, Delivery)>,
) {
    let now = chrono::Utc::now().timestamp();
    for (remote, delivery) in deliveries {
        let (store, blobs) = (ctx.jmap.store.clone(), ctx.jmap.blobs.clone());
        let route = ctx.jmap.route.clone();
        let work = async move {
            let courier = delivery::Courier {
                store: store.as_ref(),
                blobs: &blobs,
                outbound: route.outbound(),
                host: delivery::HOST,
            };
            if let Err(error) = delivery::deliver_through(courier, &delivery, now).await {
                tracing::warn!(submission = id, %error, "delivery left for a retry");
            }
        };
        if remote {
            let _ = tokio::time::timeout(ctx.jmap.limits.submit_wait, tokio::spawn(work)).await;
        } else {
            work.await;
        }
    }
}

/// Stores the message as it leaves and the submission with its deliveries
/// (local recipients, the others), within the hourly send limits, then
/// delivers: the local recipients at once, the others for at most
/// [`crate::jmap::Limits::submit_wait`] before answering (the delivery goes
/// on). Returns the submission id, the Email it sent and the `created`
/// entry (its server-set properties as they are now), or the SetError of a
/// send limit.
async fn send(
    ctx: &CallContext<'_>,
    mut planned: Planned,
) -> Result<Result<(i64, i64, Value), SetError>, MethodError> {
    let (store, blobs) = (&ctx.jmap.store, &ctx.jmap.blobs);
    let account = ctx.account.id;
    let blob_id = blobs
        .put(std::mem::take(&mut planned.message))
        .await
        .map_err(|error| MethodError::server_fail("storing a message to send", error))?;
    let (remote, deliveries) = deliveries_of(account, &blob_id, &planned);
    let optional = |limit: u64| (limit > 0).then(|| i64::try_from(limit).unwrap_or(i64::MAX));
    let limits = &ctx.jmap.limits;
    let send_limits = SendLimits {
        now: planned.row.send_at,
        messages_per_hour: optional(limits.max_sent_messages_per_hour),
        recipients_per_hour: optional(limits.max_sent_recipients_per_hour),
    };
    let (id, deliveries) = match store
        .create_submission(account, &planned.row, &deliveries, send_limits)
        .await
    {
        Ok(created) => created,
        Err(StoreError::SendLimit(hit)) => return Ok(Err(send_limit_error(hit))),
        Err(error) => return Err(error.into()),
    };
    deliver_now(ctx, id, remote.into_iter().zip(deliveries)).await;
    let row = store.submission(account, id).await?;
    let delivery_status = row
        .as_ref()
        .map(|row| serde_json::from_str(&row.delivery_status).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    let created = json!({
        "id": ids::submission_id(id),
        "threadId": ids::thread_id(planned.row.thread_id),
        "sendAt": utc_date(planned.row.send_at),
        "undoStatus": planned.row.undo_status,
        "deliveryStatus": delivery_status,
        "dsnBlobIds": [],
        "mdnBlobIds": [],
    });
    Ok(Ok((id, planned.row.email_id, created)))
}

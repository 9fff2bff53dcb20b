//! The IMAP proxy plugged into the seams the layers below declare, all on
//! [`Upstream`]:
//!
//! - [`MailWriter`]: every write goes to the upstream first (its refusal of
//!   one object is that object's `forbidden`), then into the store by a
//!   sync (ADR 0008); a sent message is also APPENDed to the upstream's
//!   Sent mailbox; Email/copy is refused.
//! - [`AccountSubmission`]: mail leaves through the upstream's submission
//!   server as the account's user (`--upstream-smtp`); without one the
//!   instance does not offer submission.
//! - [`LoginCheck`]: a Basic login is an IMAP LOGIN at the upstream.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::Upstream;
use crate::http::auth::LoginCheck;
use crate::http::error::HttpError;
use crate::mail::delivery::AccountSubmission;
use crate::mail::ingest::PreparedEmail;
use crate::mail::relay::Relay;
use crate::mail::writer::{Imported, MailWriter, ObjectResult, WriteError};
use crate::proxy::upstream::UpstreamError;
use crate::store::{Account, EmailUpdate, Inserted, MailboxPatch, NewMailbox, UpdateOutcome};

impl From<UpstreamError> for WriteError {
    /// The upstream's failure of a whole call: a store or ingest error as
    /// itself, anything else (unreachable, a refused login, a refusal of
    /// the session) as [`WriteError::Unavailable`].
    fn from(error: UpstreamError) -> Self {
        match error {
            UpstreamError::Store(error) => WriteError::Store(error),
            UpstreamError::Ingest(error) => WriteError::Ingest(error),
            other => WriteError::Unavailable(other.to_string()),
        }
    }
}

/// The IMAP proxy behind the seams: one [`Upstream`], shared.
#[derive(Clone)]
pub struct ImapProxy(pub Arc<Upstream>);

#[async_trait]
impl MailWriter for ImapProxy {
    async fn update_emails(
        &self,
        account: i64,
        updates: &[EmailUpdate],
    ) -> Result<Vec<ObjectResult<UpdateOutcome>>, WriteError> {
        Ok(self.0.update_emails(account, updates).await?)
    }

    async fn destroy_emails(
        &self,
        account: i64,
        ids: &[i64],
    ) -> Result<(Vec<i64>, HashMap<i64, String>), WriteError> {
        Ok(self.0.destroy_emails(account, ids).await?)
    }

    /// APPENDed upstream, then stored by a sync (CRLF line ends, as IMAP
    /// carries a message): the blob and size are those of the email the
    /// sync stored, which holds the octets the upstream keeps.
    async fn import(
        &self,
        account: i64,
        prepared: PreparedEmail,
    ) -> Result<ObjectResult<Imported>, WriteError> {
        let (blob_id, size) = (prepared.email.blob_id.clone(), prepared.email.size);
        let inserted = match self.0.append(account, prepared).await? {
            Ok(inserted) => inserted,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let id = match inserted {
            Inserted::New(id) | Inserted::Duplicate(id) => id,
        };
        let meta = self.0.store().email_meta(account, &[id]).await?;
        let (blob_id, size) = meta
            .first()
            .map_or((blob_id, size), |m| (m.blob_id.clone(), m.size));
        Ok(Ok(Imported {
            inserted,
            blob_id,
            size,
        }))
    }

    async fn create_mailbox(
        &self,
        account: i64,
        new: &NewMailbox,
    ) -> Result<ObjectResult<i64>, WriteError> {
        Ok(self.0.create_mailbox(account, new).await?)
    }

    async fn update_mailbox(
        &self,
        account: i64,
        id: i64,
        patch: &MailboxPatch,
    ) -> Result<ObjectResult<()>, WriteError> {
        Ok(self.0.update_mailbox(account, id, patch).await?)
    }

    async fn destroy_mailbox(
        &self,
        account: i64,
        id: i64,
        remove_emails: bool,
    ) -> Result<ObjectResult<()>, WriteError> {
        Ok(self.0.destroy_mailbox(account, id, remove_emails).await?)
    }

    fn files_sent_copies(&self) -> bool {
        true
    }

    /// The sent copies go to the Sent mailbox upstream, as IMAP users
    /// expect of their server: unless the client already put the Email
    /// there (the usual `onSuccessUpdateEmail` of a JMAP client moves the
    /// draft), the message as it left (without Bcc) is APPENDed with
    /// `\Seen`. One read of the Sent mailbox and of the Emails for all of
    /// them. Best effort: a refusal is logged, the submission stands.
    async fn keep_sent_copies(&self, account: i64, sent: Vec<(i64, Vec<u8>)>) {
        if sent.is_empty() {
            return;
        }
        let store = self.0.store();
        let emails: Vec<i64> = sent.iter().map(|(email, _)| *email).collect();
        let (sent_mailbox, metas) = match store.role_mailbox(account, "sent").await {
            Ok(None) => return,
            Ok(Some(mailbox)) => match store.email_meta(account, &emails).await {
                Ok(metas) => (mailbox, metas),
                Err(error) => {
                    tracing::warn!(account, %error, "the sent copies could not be stored");
                    return;
                }
            },
            Err(error) => {
                tracing::warn!(account, %error, "the sent copies could not be stored");
                return;
            }
        };
        let in_sent = |email: i64| {
            metas
                .iter()
                .any(|m| m.id == email && m.mailbox_ids.contains(&sent_mailbox))
        };
        let now = chrono::Utc::now().timestamp();
        for (_, message) in sent.into_iter().filter(|(email, _)| !in_sent(*email)) {
            let seen = vec!["$seen".to_string()];
            let copy = crate::mail::ingest::prepare(message, vec![sent_mailbox], seen, |_| now);
            match self.0.append(account, copy).await {
                Ok(Ok(_)) => {}
                Ok(Err(refusal)) => tracing::warn!(account, %refusal, "the sent copy was refused"),
                Err(error) => tracing::warn!(account, %error, "the sent copy could not be stored"),
            }
        }
    }

    /// Email/copy between accounts has no second account to copy from
    /// here. (Without `--upstream-smtp` submission is not offered at all,
    /// [`AccountSubmission::sends`]: its methods are `unknownMethod`.)
    fn refuses(&self, method: &str) -> Option<String> {
        (method == "Email/copy").then(|| {
            format!(
                "this server mirrors the IMAP server {}; {method} has no other account here",
                self.0.url()
            )
        })
    }
}

#[async_trait]
impl AccountSubmission for ImapProxy {
    fn submission_for(&self, account: i64) -> Option<Relay> {
        self.0.submission_for(account)
    }

    async fn file_bounce(&self, account: i64, dsn: Vec<u8>) -> Result<(), String> {
        self.0
            .append_to_inbox(account, dsn)
            .await
            .map_err(|error| error.to_string())
    }

    /// Only with `--upstream-smtp`.
    fn sends(&self) -> bool {
        self.0.sends()
    }
}

#[async_trait]
impl LoginCheck for ImapProxy {
    async fn verify(&self, user: &str, password: &str) -> Result<Option<Account>, HttpError> {
        match self.0.verify(user, password).await {
            Ok(true) => self
                .0
                .account(user)
                .await
                .map(Some)
                .map_err(|error| HttpError::Internal(error.to_string())),
            Ok(false) => Ok(None),
            Err(error) => Err(HttpError::UpstreamUnavailable(error.to_string())),
        }
    }

    fn use_account(&self, account: i64, user: &str, password: &str) {
        self.0.use_account(account, user, password)
    }
}

/// Installs the IMAP proxy in a serving instance (`serve --upstream
/// imaps://…`): its writer, outbound route and login check take the
/// place of the local ones. Returns the upstream, whose background work
/// (eviction, master-login syncs) the caller starts.
pub fn install(
    options: super::UpstreamOptions,
    app: &crate::app::App,
    jmap: &mut crate::jmap::Jmap,
    auth: &mut crate::http::auth::Authenticator,
) -> Arc<Upstream> {
    let outage_grace = options.outage_grace;
    let upstream = Upstream::new(
        options,
        app.store.clone(),
        app.blobs.clone(),
        jmap.metrics.clone(),
    );
    let proxy = ImapProxy(upstream.clone());
    jmap.writer = Arc::new(proxy.clone());
    jmap.route = crate::mail::delivery::Route::PerAccount(Arc::new(proxy.clone()));
    auth.install_login_check(Arc::new(proxy), outage_grace);
    upstream
}

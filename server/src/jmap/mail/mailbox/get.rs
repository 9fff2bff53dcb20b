//! Mailbox/get (RFC 8621 §2.1, RFC 8620 §5.1): a [`ListedObject`] read
//! through the kept mailboxes ([`super::kept::KeptMailboxes`]).

use std::sync::Arc;

use serde_json::Value;

use super::{MAILBOX_PROPERTIES, mailbox_json};
use crate::jmap::Jmap;
use crate::jmap::error::MethodError;
use crate::jmap::ids;
use crate::jmap::mail::get::ListedObject;
use crate::store::MailboxRow;

impl ListedObject for MailboxRow {
    const PROPERTIES: &'static [&'static str] = MAILBOX_PROPERTIES;

    fn to_json(&self, properties: &[&'static str]) -> Value {
        mailbox_json(self, properties)
    }

    fn jmap_id(&self) -> String {
        ids::mailbox_id(self.id)
    }

    async fn read_all(jmap: &Jmap, account: i64) -> Result<(i64, Arc<Vec<Self>>), MethodError> {
        Ok(jmap.mailboxes.read(&*jmap.store, account).await?)
    }
}

//! The Mailbox data type (RFC 8621 §2).

pub mod changes;
pub mod get;
pub mod kept;
pub mod query;
pub mod query_changes;
pub mod set;

use serde_json::{Map, Value, json};

use crate::jmap::ids;
use crate::store::MailboxRow;

/// Every Mailbox property (RFC 8621 §2), the default of Mailbox/get.
pub const MAILBOX_PROPERTIES: &[&str] = &[
    "id",
    "name",
    "parentId",
    "role",
    "sortOrder",
    "totalEmails",
    "unreadEmails",
    "totalThreads",
    "unreadThreads",
    "myRights",
    "isSubscribed",
];

/// The rights of the owner on each of its mailboxes (RFC 8621 §2 `myRights`).
pub fn my_rights() -> Value {
    json!({
        "mayReadItems": true,
        "mayAddItems": true,
        "mayRemoveItems": true,
        "maySetSeen": true,
        "maySetKeywords": true,
        "mayCreateChild": true,
        "mayRename": true,
        "mayDelete": true,
        "maySubmit": true,
    })
}

/// Renders the requested properties of one mailbox (names already validated).
pub fn mailbox_json(row: &MailboxRow, properties: &[&str]) -> Value {
    let mut object = Map::new();
    for property in properties {
        let value = match *property {
            "id" => json!(ids::mailbox_id(row.id)),
            "name" => json!(row.name),
            "parentId" => json!(row.parent_id.map(ids::mailbox_id)),
            "role" => json!(row.role),
            "sortOrder" => json!(row.sort_order),
            "totalEmails" => json!(row.total_emails),
            "unreadEmails" => json!(row.unread_emails),
            "totalThreads" => json!(row.total_threads),
            "unreadThreads" => json!(row.unread_threads),
            "myRights" => my_rights(),
            "isSubscribed" => json!(row.is_subscribed),
            _ => continue,
        };
        object.insert(property.to_string(), value);
    }
    Value::Object(object)
}

//! The scenarios: what one user does, as a list of [`Step`]s of JMAP calls.
//!
//! Every scenario starts the way a JMAP client does: it fetches the session
//! resource, then the mailboxes, then the newest 30 messages of the inbox;
//! they differ in which `Email/get` calls follow. One module each:
//!
//! | scenario   | module       | after the list query |
//! |------------|--------------|----------------------|
//! | `adr-0012` | [`adr_0012`] | 10 × `Email/get` of `mailboxIds`, `keywords` |
//! | `adr-0013` | [`adr_0013`] | as `adr-0012`, then 8 × `Email/get` of the fast-view list properties |
//! | `webmail`  | [`webmail`]  | 1 × fast-view list, then one message opened with its HTML body |
//! | `full`     | [`full`]     | as `adr-0013`, but the 8 gets also ask every body value |

pub mod adr_0012;
pub mod adr_0013;
pub mod full;
pub mod webmail;

use std::fmt;
use std::str::FromStr;

/// Request name of the session fetch (`GET /.well-known/jmap`).
pub const SESSION: &str = "GET session";
/// Request name of `Mailbox/get`.
pub const MAILBOX_GET: &str = "Mailbox/get";
/// Request name of `Email/query`.
pub const EMAIL_QUERY: &str = "Email/query";
/// Request name of `Email/get` with [`METADATA_PROPERTIES`].
pub const EMAIL_GET_METADATA: &str = "Email/get metadata";
/// Request name of `Email/get` with [`FAST_VIEW_PROPERTIES`].
pub const EMAIL_GET_FAST_VIEW: &str = "Email/get fast view";
/// Request name of `Email/get` with the fast-view properties and every body value.
pub const EMAIL_GET_FULL: &str = "Email/get full";
/// Request name of `Email/get` opening one message (HTML body values).
pub const EMAIL_GET_MESSAGE: &str = "Email/get message";

/// How many messages the list query asks for.
pub const LIST_LIMIT: u64 = 30;

/// The properties a mail list needs to place and flag messages.
pub const METADATA_PROPERTIES: &[&str] = &["mailboxIds", "keywords"];

/// The properties a webmail's message list shows (the "fast view").
pub const FAST_VIEW_PROPERTIES: &[&str] = &[
    "id",
    "threadId",
    "mailboxIds",
    "keywords",
    "hasAttachment",
    "from",
    "to",
    "subject",
    "receivedAt",
    "size",
    "preview",
];

/// The fast-view properties plus the body structure and values.
pub const FULL_PROPERTIES: &[&str] = &[
    "id",
    "threadId",
    "mailboxIds",
    "keywords",
    "hasAttachment",
    "from",
    "to",
    "subject",
    "receivedAt",
    "size",
    "preview",
    "textBody",
    "htmlBody",
    "attachments",
    "bodyValues",
];

/// The properties a webmail asks for to show one opened message.
pub const MESSAGE_PROPERTIES: &[&str] = &[
    "id",
    "threadId",
    "mailboxIds",
    "keywords",
    "from",
    "to",
    "cc",
    "replyTo",
    "subject",
    "sentAt",
    "receivedAt",
    "htmlBody",
    "textBody",
    "attachments",
    "bodyValues",
];

/// One of the load-test scenarios (`--scenario`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// `adr-0012`: list metadata, 10 × `Email/get` of `mailboxIds`, `keywords`.
    Adr0012,
    /// `adr-0013`: `adr-0012` plus 8 × `Email/get` of the fast-view properties.
    Adr0013,
    /// `webmail`: one fast-view list, then one message opened.
    Webmail,
    /// `full`: `adr-0013` with every body value fetched (the worst case).
    Full,
}

impl Scenario {
    /// Every scenario, in the order the README lists them.
    pub const ALL: [Scenario; 4] = [
        Scenario::Adr0012,
        Scenario::Adr0013,
        Scenario::Webmail,
        Scenario::Full,
    ];

    /// The name used on the command line and in reports, such as `adr-0012`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Adr0012 => "adr-0012",
            Scenario::Adr0013 => "adr-0013",
            Scenario::Webmail => "webmail",
            Scenario::Full => "full",
        }
    }

    /// What one user does, in order.
    pub fn steps(self) -> Vec<Step> {
        match self {
            Scenario::Adr0012 => adr_0012::steps(),
            Scenario::Adr0013 => adr_0013::steps(),
            Scenario::Webmail => webmail::steps(),
            Scenario::Full => full::steps(),
        }
    }

    /// The request names of this scenario, in order, each once.
    pub fn request_names(self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        for step in self.steps() {
            if !names.contains(&step.call.request_name()) {
                names.push(step.call.request_name());
            }
        }
        names
    }

    /// How many requests of each name one user makes, in scenario order.
    pub fn calls_per_user(self) -> Vec<(&'static str, u64)> {
        let mut counts: Vec<(&'static str, u64)> = Vec::new();
        for step in self.steps() {
            let name = step.call.request_name();
            match counts.iter_mut().find(|(n, _)| *n == name) {
                Some((_, count)) => *count += u64::from(step.times),
                None => counts.push((name, u64::from(step.times))),
            }
        }
        counts
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Scenario::ALL
            .into_iter()
            .find(|scenario| scenario.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| {
                let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
                format!("unknown scenario {text:?}; one of {}", names.join(", "))
            })
    }
}

/// One step of a scenario: a JMAP call made `times` times in a row.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The call.
    pub call: Call,
    /// How many times in a row it is made.
    pub times: u32,
}

impl Step {
    /// The call made once.
    pub fn once(call: Call) -> Self {
        Step { call, times: 1 }
    }

    /// The call made `times` times in a row.
    pub fn repeat(times: u32, call: Call) -> Self {
        Step { call, times }
    }
}

/// A JMAP call a scenario makes. Each is its own HTTP request.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `GET /.well-known/jmap`: the session resource (RFC 8620 §2).
    Session,
    /// `Mailbox/get` of every mailbox, to find the inbox (role `inbox`).
    MailboxGet,
    /// `Email/query` of the inbox, newest first (`receivedAt` descending).
    EmailQuery {
        /// The `limit` argument.
        limit: u64,
    },
    /// `Email/get` of ids the query returned.
    EmailGet(EmailGet),
}

impl Call {
    /// The request (and goose transaction) name statistics are grouped by.
    pub fn request_name(&self) -> &'static str {
        match self {
            Call::Session => SESSION,
            Call::MailboxGet => MAILBOX_GET,
            Call::EmailQuery { .. } => EMAIL_QUERY,
            Call::EmailGet(get) => get.name,
        }
    }
}

/// The arguments of an `Email/get` step.
#[derive(Clone, Debug, PartialEq)]
pub struct EmailGet {
    /// Request name, such as [`EMAIL_GET_METADATA`].
    pub name: &'static str,
    /// Which of the queried ids to ask for.
    pub ids: IdSelection,
    /// The `properties` argument.
    pub properties: &'static [&'static str],
    /// Which body values to fetch.
    pub body_values: BodyValues,
}

/// Which of the ids `Email/query` returned an `Email/get` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdSelection {
    /// All of them (the list view).
    All,
    /// The first (newest) one (opening a message).
    First,
}

/// Which body values an `Email/get` fetches (RFC 8621 §4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyValues {
    /// None: no `fetch*BodyValues` argument.
    None,
    /// `fetchHTMLBodyValues: true`.
    Html,
    /// `fetchAllBodyValues: true`.
    All,
}

/// The start every scenario shares: session, mailboxes, inbox query.
pub(crate) fn list_query_steps() -> Vec<Step> {
    vec![
        Step::once(Call::Session),
        Step::once(Call::MailboxGet),
        Step::once(Call::EmailQuery { limit: LIST_LIMIT }),
    ]
}

/// `Email/get` of every listed id with [`METADATA_PROPERTIES`].
pub(crate) fn metadata_get() -> Call {
    Call::EmailGet(EmailGet {
        name: EMAIL_GET_METADATA,
        ids: IdSelection::All,
        properties: METADATA_PROPERTIES,
        body_values: BodyValues::None,
    })
}

/// `Email/get` of every listed id with [`FAST_VIEW_PROPERTIES`].
pub(crate) fn fast_view_get() -> Call {
    Call::EmailGet(EmailGet {
        name: EMAIL_GET_FAST_VIEW,
        ids: IdSelection::All,
        properties: FAST_VIEW_PROPERTIES,
        body_values: BodyValues::None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for scenario in Scenario::ALL {
            assert_eq!(scenario.name().parse::<Scenario>().unwrap(), scenario);
            assert_eq!(scenario.to_string(), scenario.name());
        }
        assert!("adr-0014".parse::<Scenario>().is_err());
    }

    #[test]
    fn calls_per_user() {
        assert_eq!(
            Scenario::Adr0012.calls_per_user(),
            vec![
                (SESSION, 1),
                (MAILBOX_GET, 1),
                (EMAIL_QUERY, 1),
                (EMAIL_GET_METADATA, 10)
            ]
        );
        assert_eq!(
            Scenario::Adr0013.calls_per_user(),
            vec![
                (SESSION, 1),
                (MAILBOX_GET, 1),
                (EMAIL_QUERY, 1),
                (EMAIL_GET_METADATA, 10),
                (EMAIL_GET_FAST_VIEW, 8)
            ]
        );
        assert_eq!(
            Scenario::Webmail.calls_per_user(),
            vec![
                (SESSION, 1),
                (MAILBOX_GET, 1),
                (EMAIL_QUERY, 1),
                (EMAIL_GET_FAST_VIEW, 1),
                (EMAIL_GET_MESSAGE, 1)
            ]
        );
        assert_eq!(
            Scenario::Full.calls_per_user(),
            vec![
                (SESSION, 1),
                (MAILBOX_GET, 1),
                (EMAIL_QUERY, 1),
                (EMAIL_GET_METADATA, 10),
                (EMAIL_GET_FULL, 8)
            ]
        );
    }

    #[test]
    fn every_scenario_starts_with_the_session() {
        for scenario in Scenario::ALL {
            assert_eq!(scenario.steps()[0].call, Call::Session);
        }
    }
}

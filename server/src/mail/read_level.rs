//! The read-level planner (ADR 0002): decides, once per Email/get and before
//! any I/O, which sources the requested properties need.
//!
//! Sources, cheapest first:
//! - metadata: the `emails` row with its mailboxIds and keywords (always read,
//!   it also proves the id exists in the account);
//! - header: the stored header block, parsed without the body;
//! - fast view: the projection row (preview, hasAttachment), see [`crate::mail::fast_view`];
//! - full: the raw message from the blob store, parsed once.
//!
//! The planner is pure: it maps property lists to a [`ReadPlan`]. Architecture
//! invariant: a property added to [`EmailProperty`] does not compile until this
//! match says where it is read from.

use crate::mail::property::EmailProperty;

/// The highest source a call reads; the metrics label of an Email/get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReadLevel {
    Metadata,
    Header,
    FastView,
    Full,
}

impl ReadLevel {
    /// The label used in `fastview_email_get_total{read_level=…}`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadLevel::Metadata => "metadata",
            ReadLevel::Header => "header",
            ReadLevel::FastView => "fast_view",
            ReadLevel::Full => "full",
        }
    }
}

/// Server switches that turn optimisations off to measure them (ADR 0002, 0003).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadSwitches {
    /// `--read-levels on|off`: off reads and parses the full message for every Email/get.
    pub read_levels: bool,
    /// `--fast-view on|off`: off computes preview and hasAttachment from the full message.
    pub fast_view: bool,
}

impl Default for ReadSwitches {
    fn default() -> Self {
        Self {
            read_levels: true,
            fast_view: true,
        }
    }
}

/// What the Email/get body-value flags ask for (RFC 8621 §4.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BodyValueFlags {
    pub fetch_text: bool,
    pub fetch_html: bool,
    pub fetch_all: bool,
}

impl BodyValueFlags {
    fn any(self) -> bool {
        self.fetch_text || self.fetch_html || self.fetch_all
    }
}

/// The sources one Email/get reads, for every id of the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadPlan {
    /// Parse the stored header block (never set together with `full`: the full
    /// message carries its headers).
    pub header: bool,
    /// Read the fast-view projection rows.
    pub fast_view: bool,
    /// Read and parse the raw message.
    pub full: bool,
}

impl ReadPlan {
    /// The call's read level: the highest source in the plan.
    pub fn level(&self) -> ReadLevel {
        if self.full {
            ReadLevel::Full
        } else if self.fast_view {
            ReadLevel::FastView
        } else if self.header {
            ReadLevel::Header
        } else {
            ReadLevel::Metadata
        }
    }
}

/// The source one property needs, under the given switches.
fn source_of(property: &EmailProperty, flags: BodyValueFlags, switches: ReadSwitches) -> ReadLevel {
    use EmailProperty::*;
    let level = match property {
        Id | BlobId | ThreadId | MailboxIds | Keywords | Size | ReceivedAt => ReadLevel::Metadata,
        MessageId | InReplyTo | References | Sender | From | To | Cc | Bcc | ReplyTo | Subject
        | SentAt | Headers | Header(_) => ReadLevel::Header,
        HasAttachment | Preview if switches.fast_view => ReadLevel::FastView,
        HasAttachment | Preview => ReadLevel::Full,
        // bodyValues holds only what a fetch flag asks for; without one it is `{}`.
        BodyValues if !flags.any() => ReadLevel::Metadata,
        BodyStructure | BodyValues | TextBody | HtmlBody | Attachments => ReadLevel::Full,
    };
    if switches.read_levels || level == ReadLevel::FastView {
        level
    } else {
        ReadLevel::Full
    }
}

/// Plans the reads of one Email/get from its `properties` and body-value flags.
/// `bodyProperties` never changes the plan: body parts always come from the full message.
pub fn plan(
    properties: &[EmailProperty],
    flags: BodyValueFlags,
    switches: ReadSwitches,
) -> ReadPlan {
    let mut plan = ReadPlan {
        header: false,
        fast_view: false,
        full: !switches.read_levels,
    };
    for property in properties {
        match source_of(property, flags, switches) {
            ReadLevel::Metadata => {}
            ReadLevel::Header => plan.header = true,
            ReadLevel::FastView => plan.fast_view = true,
            ReadLevel::Full => plan.full = true,
        }
    }
    if plan.full {
        plan.header = false;
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: ReadSwitches = ReadSwitches {
        read_levels: true,
        fast_view: true,
    };
    const NO_FLAGS: BodyValueFlags = BodyValueFlags {
        fetch_text: false,
        fetch_html: false,
        fetch_all: false,
    };

    fn check(
        properties: &[&str],
        flags: BodyValueFlags,
        switches: ReadSwitches,
        expected: (bool, bool, bool),
    ) {
        let properties: Vec<_> = properties
            .iter()
            .map(|p| EmailProperty::parse(p).unwrap_or_else(|| panic!("{p}")))
            .collect();
        let got = plan(&properties, flags, switches);
        assert_eq!(
            (got.header, got.fast_view, got.full),
            expected,
            "{properties:?} {flags:?} {switches:?}"
        );
    }

    #[test]
    fn every_rfc8621_property_maps_to_its_source() {
        // (property, header, fast_view, full) with both switches on.
        let table: &[(&str, (bool, bool, bool))] = &[
            ("id", (false, false, false)),
            ("blobId", (false, false, false)),
            ("threadId", (false, false, false)),
            ("mailboxIds", (false, false, false)),
            ("keywords", (false, false, false)),
            ("size", (false, false, false)),
            ("receivedAt", (false, false, false)),
            ("messageId", (true, false, false)),
            ("inReplyTo", (true, false, false)),
            ("references", (true, false, false)),
            ("sender", (true, false, false)),
            ("from", (true, false, false)),
            ("to", (true, false, false)),
            ("cc", (true, false, false)),
            ("bcc", (true, false, false)),
            ("replyTo", (true, false, false)),
            ("subject", (true, false, false)),
            ("sentAt", (true, false, false)),
            ("headers", (true, false, false)),
            ("header:X-Anything:asText:all", (true, false, false)),
            ("header:From:asAddresses", (true, false, false)),
            ("preview", (false, true, false)),
            ("hasAttachment", (false, true, false)),
            ("bodyValues", (false, false, false)),
            ("bodyStructure", (false, false, true)),
            ("textBody", (false, false, true)),
            ("htmlBody", (false, false, true)),
            ("attachments", (false, false, true)),
        ];
        for (property, expected) in table {
            check(&[property], NO_FLAGS, ON, *expected);
        }
    }

    #[test]
    fn levels_combine_and_switches_force_full_reads() {
        let fetch_text = BodyValueFlags {
            fetch_text: true,
            ..NO_FLAGS
        };
        check(&["id", "preview"], NO_FLAGS, ON, (false, true, false));
        check(&["subject", "preview"], NO_FLAGS, ON, (true, true, false));
        check(&["subject", "textBody"], NO_FLAGS, ON, (false, false, true));
        check(&["bodyValues"], fetch_text, ON, (false, false, true));
        let no_fast_view = ReadSwitches {
            read_levels: true,
            fast_view: false,
        };
        check(
            &["id", "preview"],
            NO_FLAGS,
            no_fast_view,
            (false, false, true),
        );
        check(
            &["id", "subject"],
            NO_FLAGS,
            no_fast_view,
            (true, false, false),
        );
        let no_levels = ReadSwitches {
            read_levels: false,
            fast_view: true,
        };
        check(
            &["id", "keywords"],
            NO_FLAGS,
            no_levels,
            (false, false, true),
        );
        check(&["id", "preview"], NO_FLAGS, no_levels, (false, true, true));
    }

    #[test]
    fn level_names_the_highest_source() {
        let plan_of = |header, fast_view, full| {
            ReadPlan {
                header,
                fast_view,
                full,
            }
            .level()
        };
        assert_eq!(plan_of(false, false, false), ReadLevel::Metadata);
        assert_eq!(plan_of(true, false, false), ReadLevel::Header);
        assert_eq!(plan_of(true, true, false), ReadLevel::FastView);
        assert_eq!(plan_of(false, true, true), ReadLevel::Full);
    }
}

//! The read-level planner (ADR 0002): decides, once per Email/get and before
//! any I/O, which sources the requested properties need.
//!
//! Sources, cheapest first:
//! - metadata: the `emails` row with its mailboxIds and keywords (always read,
//!   it also proves the id exists in the account);
//! - header: the stored header block, parsed without the body;
//! - fast view: the projection row (preview, hasAttachment), see [`crate::mail::fast_view`];
//! - structure: the stored part tree ([`crate::mail::structure`]) for
//!   `bodyStructure`, `textBody`, `htmlBody`, `attachments`; with the header
//!   block too when `bodyProperties` asks for part headers (the root part's
//!   header octets are the message's header block);
//! - body values: the structure, and the byte ranges of the parts whose
//!   values are asked, read from the blob store and checked;
//! - full: the raw message from the blob store, parsed once: only under
//!   `--read-levels off`, or for preview/hasAttachment under `--fast-view off`.
//!
//! The planner is pure: it maps property lists to a [`ReadPlan`]. Architecture
//! invariant: a property added to [`EmailProperty`] does not compile until this
//! match says where it is read from.

use crate::mail::property::{BodyProperty, EmailProperty};

/// The highest source a call reads; the metrics label of an Email/get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReadLevel {
    Metadata,
    Header,
    FastView,
    Structure,
    BodyValues,
    Full,
}

impl ReadLevel {
    /// The label used in `fastview_email_get_total{read_level=…}`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadLevel::Metadata => "metadata",
            ReadLevel::Header => "header",
            ReadLevel::FastView => "fast_view",
            ReadLevel::Structure => "structure",
            ReadLevel::BodyValues => "body_values",
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
    /// Read the stored part trees (never set together with `full`).
    pub structure: bool,
    /// Read the ranges of the parts whose body values are asked (implies
    /// `structure`).
    pub body_values: bool,
    /// Fill the root part's header from the header block (implies `header`):
    /// `bodyProperties` names `headers` or a `header:` form.
    pub part_headers: bool,
    /// Read and parse the raw message.
    pub full: bool,
}

impl ReadPlan {
    /// The call's read level: the highest source in the plan.
    pub fn level(&self) -> ReadLevel {
        if self.full {
            ReadLevel::Full
        } else if self.body_values {
            ReadLevel::BodyValues
        } else if self.structure {
            ReadLevel::Structure
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
        BodyValues => ReadLevel::BodyValues,
        BodyStructure | TextBody | HtmlBody | Attachments => ReadLevel::Structure,
    };
    if switches.read_levels || level == ReadLevel::FastView {
        level
    } else {
        ReadLevel::Full
    }
}

/// Plans the reads of one Email/get from its `properties`, `bodyProperties`
/// and body-value flags. `bodyProperties` matters only for part headers
/// (`headers`, `header:…`), which need the header block beside the tree.
pub fn plan(
    properties: &[EmailProperty],
    body_properties: &[BodyProperty],
    flags: BodyValueFlags,
    switches: ReadSwitches,
) -> ReadPlan {
    let mut plan = ReadPlan {
        header: false,
        fast_view: false,
        structure: false,
        body_values: false,
        part_headers: false,
        full: !switches.read_levels,
    };
    for property in properties {
        match source_of(property, flags, switches) {
            ReadLevel::Metadata => {}
            ReadLevel::Header => plan.header = true,
            ReadLevel::FastView => plan.fast_view = true,
            ReadLevel::Structure => plan.structure = true,
            ReadLevel::BodyValues => plan.body_values = true,
            ReadLevel::Full => plan.full = true,
        }
    }
    if plan.full {
        // The whole message carries its header and its parts.
        plan.header = false;
        plan.structure = false;
        plan.body_values = false;
    } else if plan.body_values || plan.structure {
        plan.structure = true;
        plan.part_headers = body_properties
            .iter()
            .any(|property| matches!(property, BodyProperty::Headers | BodyProperty::Header(_)));
        plan.header |= plan.part_headers;
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

    /// A plan as the letters of its sources: `h`eader, fast `v`iew,
    /// `s`tructure, body `b`values, `p`art headers, `f`ull; `-` for none.
    fn letters(plan: ReadPlan) -> String {
        let sources = [
            (plan.header, 'h'),
            (plan.fast_view, 'v'),
            (plan.structure, 's'),
            (plan.body_values, 'b'),
            (plan.part_headers, 'p'),
            (plan.full, 'f'),
        ];
        let out: String = sources
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, c)| c)
            .collect();
        if out.is_empty() { "-".into() } else { out }
    }

    fn check(
        properties: &[&str],
        body_properties: &[&str],
        flags: BodyValueFlags,
        switches: ReadSwitches,
        expected: &str,
    ) {
        let properties: Vec<_> = properties
            .iter()
            .map(|p| EmailProperty::parse(p).unwrap_or_else(|| panic!("{p}")))
            .collect();
        let body_properties: Vec<_> = body_properties
            .iter()
            .map(|p| BodyProperty::parse(p).unwrap_or_else(|| panic!("{p}")))
            .collect();
        let got = letters(plan(&properties, &body_properties, flags, switches));
        assert_eq!(
            got, expected,
            "{properties:?} {body_properties:?} {flags:?} {switches:?}"
        );
    }

    #[test]
    fn every_rfc8621_property_maps_to_its_source() {
        let fetch_text = BodyValueFlags {
            fetch_text: true,
            ..NO_FLAGS
        };
        // (property, plan) with both switches on and the default bodyProperties.
        let table: &[(&str, BodyValueFlags, &str)] = &[
            ("id", NO_FLAGS, "-"),
            ("blobId", NO_FLAGS, "-"),
            ("threadId", NO_FLAGS, "-"),
            ("mailboxIds", NO_FLAGS, "-"),
            ("keywords", NO_FLAGS, "-"),
            ("size", NO_FLAGS, "-"),
            ("receivedAt", NO_FLAGS, "-"),
            ("messageId", NO_FLAGS, "h"),
            ("inReplyTo", NO_FLAGS, "h"),
            ("references", NO_FLAGS, "h"),
            ("sender", NO_FLAGS, "h"),
            ("from", NO_FLAGS, "h"),
            ("to", NO_FLAGS, "h"),
            ("cc", NO_FLAGS, "h"),
            ("bcc", NO_FLAGS, "h"),
            ("replyTo", NO_FLAGS, "h"),
            ("subject", NO_FLAGS, "h"),
            ("sentAt", NO_FLAGS, "h"),
            ("headers", NO_FLAGS, "h"),
            ("header:X-Anything:asText:all", NO_FLAGS, "h"),
            ("header:From:asAddresses", NO_FLAGS, "h"),
            ("preview", NO_FLAGS, "v"),
            ("hasAttachment", NO_FLAGS, "v"),
            ("bodyValues", NO_FLAGS, "-"),
            ("bodyValues", fetch_text, "sb"),
            ("bodyStructure", NO_FLAGS, "s"),
            ("textBody", NO_FLAGS, "s"),
            ("htmlBody", NO_FLAGS, "s"),
            ("attachments", NO_FLAGS, "s"),
        ];
        let defaults: Vec<String> = BodyProperty::default_list()
            .iter()
            .map(|p| p.name().to_string())
            .collect();
        let defaults: Vec<&str> = defaults.iter().map(String::as_str).collect();
        for (property, flags, expected) in table {
            check(&[property], &defaults, *flags, ON, expected);
        }
    }

    #[test]
    fn part_headers_add_the_header_block_to_the_structure() {
        check(&["textBody"], &["partId", "headers"], NO_FLAGS, ON, "hsp");
        check(
            &["bodyStructure"],
            &["header:Content-Type:asText"],
            NO_FLAGS,
            ON,
            "hsp",
        );
        check(&["subject"], &["headers"], NO_FLAGS, ON, "h");
        check(&["bodyStructure"], &["partId", "type"], NO_FLAGS, ON, "s");
    }

    #[test]
    fn levels_combine_and_switches_force_full_reads() {
        let fetch_text = BodyValueFlags {
            fetch_text: true,
            ..NO_FLAGS
        };
        check(&["id", "preview"], &[], NO_FLAGS, ON, "v");
        check(&["subject", "preview"], &[], NO_FLAGS, ON, "hv");
        check(&["subject", "textBody"], &[], NO_FLAGS, ON, "hs");
        check(&["bodyValues", "htmlBody"], &[], fetch_text, ON, "sb");
        let no_fast_view = ReadSwitches {
            read_levels: true,
            fast_view: false,
        };
        check(&["id", "preview"], &[], NO_FLAGS, no_fast_view, "f");
        check(&["preview", "textBody"], &[], NO_FLAGS, no_fast_view, "f");
        check(&["id", "subject"], &[], NO_FLAGS, no_fast_view, "h");
        let no_levels = ReadSwitches {
            read_levels: false,
            fast_view: true,
        };
        check(&["id", "keywords"], &[], NO_FLAGS, no_levels, "f");
        check(&["id", "preview"], &[], NO_FLAGS, no_levels, "vf");
        check(&["bodyValues"], &["headers"], fetch_text, no_levels, "f");
    }

    #[test]
    fn level_names_the_highest_source() {
        let none = ReadPlan {
            header: false,
            fast_view: false,
            structure: false,
            body_values: false,
            part_headers: false,
            full: false,
        };
        assert_eq!(none.level(), ReadLevel::Metadata);
        // Each source added on top of the ones before names the level.
        type AddSource = fn(&mut ReadPlan);
        let steps: [(AddSource, ReadLevel); 4] = [
            (|plan| plan.header = true, ReadLevel::Header),
            (|plan| plan.fast_view = true, ReadLevel::FastView),
            (|plan| plan.structure = true, ReadLevel::Structure),
            (|plan| plan.body_values = true, ReadLevel::BodyValues),
        ];
        let mut plan = none;
        for (add, level) in steps {
            add(&mut plan);
            assert_eq!(plan.level(), level);
        }
        let view = ReadPlan {
            header: true,
            fast_view: true,
            ..none
        };
        assert_eq!(ReadPlan { full: true, ..view }.level(), ReadLevel::Full);
    }
}

//! SearchSnippet/get (RFC 8621 §5): for each email, its subject and a piece
//! of its body text with the words the filter's `text` / `body` conditions
//! match marked `<mark>…</mark>` and everything else HTML-escaped; `null`
//! where nothing matches. The words are matched by the rules of
//! [`crate::mail::search`], the ones Email/query's index applies, so a
//! snippet marks what made the email a result.
//!
//! The body text is read as Email/get reads body values: the stored part
//! tree, then only the byte ranges of the `textBody` parts
//! ([`crate::mail::load`]), charged to the request's parse budget first.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::mail::email::query::parse_filter;
use crate::jmap::mail::get::{found, requested_ids};
use crate::jmap::{args, ids};
use crate::mail::body::{self, BodyOctets};
use crate::mail::load::{BodyReads, LoadedEmail};
use crate::mail::property::EmailProperty;
use crate::mail::query::Filter;
use crate::mail::read_level::{BodyValueFlags, ReadPlan};
use crate::mail::search;
use crate::store::{SearchScope, SearchTerm};

/// SearchSnippet/get arguments (RFC 8621 §5.1).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetRequest {
    account_id: String,
    filter: Option<Value>,
    email_ids: Vec<String>,
}

args::account_arguments!(GetRequest);

/// Handles one SearchSnippet/get call.
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id))]
pub async fn search_snippet_get(
    ctx: &mut CallContext<'_>,
    request: GetRequest,
) -> Result<Value, MethodError> {
    let jmap = ctx.jmap;
    // Plan: the terms to mark, per scope.
    let filter = request.filter.as_ref().map(parse_filter).transpose()?;
    let (subject_terms, body_terms) = terms(filter.as_ref());
    let requested = requested_ids(request.email_ids, jmap.limits.max_objects_in_get)?;
    let numeric: Vec<i64> = requested
        .iter()
        .filter_map(|id| ids::parse_email_id(id))
        .collect();
    // Load: subjects from the header blocks, body text by its parts' ranges.
    let wants_subject = !subject_terms.is_empty();
    let flags = BodyValueFlags {
        fetch_text: true,
        ..BodyValueFlags::default()
    };
    let loaded = load_texts(ctx, &numeric, wants_subject, !body_terms.is_empty(), flags).await?;
    // Render, off the async workers: decoding and marking walk the text.
    let snippets = jmap
        .work
        .run(ctx.account.id, move || {
            loaded
                .iter()
                .map(|email| {
                    (
                        email.meta.id,
                        snippet(email, &subject_terms, &body_terms, flags),
                    )
                })
                .collect::<Vec<_>>()
        })
        .await;
    let (list, not_found) = found(&requested, |id| {
        let id = ids::parse_email_id(id)?;
        snippets
            .iter()
            .find(|(email, _)| *email == id)
            .map(|(_, snippet)| snippet.clone())
    });
    Ok(json!({
        "accountId": request.account_id,
        "list": list,
        // RFC 8621 §5.1: null when every id was found.
        "notFound": if not_found.is_empty() { Value::Null } else { json!(not_found) },
    }))
}

/// Loads the emails' metadata, their header blocks when a subject is to
/// be marked, and the text of their `textBody` parts (`flags`) when a body
/// is, those octets charged to the request's parse budget first.
async fn load_texts(
    ctx: &mut CallContext<'_>,
    numeric: &[i64],
    wants_subject: bool,
    wants_body: bool,
    flags: BodyValueFlags,
) -> Result<Vec<LoadedEmail>, MethodError> {
    let jmap = ctx.jmap;
    let (mut loaded, _) = jmap.loader.load_meta(ctx.account.id, numeric).await?;
    let plan = ReadPlan {
        header: wants_subject,
        fast_view: false,
        structure: wants_body,
        body_values: wants_body,
        part_headers: false,
        full: false,
    };
    jmap.loader
        .complete(ctx.account.id, &mut loaded, plan)
        .await?;
    if wants_body {
        let reads = BodyReads::plan(&loaded, flags);
        ctx.budget
            .charge_parse_or_refuse(reads.octets(), &jmap.limits)?;
        jmap.loader.load_bodies(&mut loaded, reads).await?;
    }
    Ok(loaded)
}

/// The terms of the filter's full-text conditions that are not negated:
/// those a subject may match (`text`), and those a body may match (`text`
/// and `body`).
fn terms(filter: Option<&Filter>) -> (Vec<SearchTerm>, Vec<SearchTerm>) {
    fn walk(filter: &Filter, subject: &mut Vec<SearchTerm>, body: &mut Vec<SearchTerm>) {
        match filter {
            Filter::And(conditions) | Filter::Or(conditions) => conditions
                .iter()
                .for_each(|condition| walk(condition, subject, body)),
            Filter::Text(search) => {
                if search.scope == SearchScope::All {
                    subject.extend(search.terms.iter().cloned());
                }
                body.extend(search.terms.iter().cloned());
            }
            // What a NOT matched is not why the email is a result.
            _ => {}
        }
    }
    let (mut subject, mut body) = (Vec::new(), Vec::new());
    if let Some(filter) = filter {
        walk(filter, &mut subject, &mut body);
    }
    (subject, body)
}

/// One SearchSnippet object.
fn snippet(
    email: &LoadedEmail,
    subject_terms: &[SearchTerm],
    body_terms: &[SearchTerm],
    flags: BodyValueFlags,
) -> Value {
    let subject = email
        .header
        .as_ref()
        .and_then(|fields| {
            let property = EmailProperty::Subject.header_property()?;
            match fields.value(&property) {
                Value::String(subject) => Some(subject),
                _ => None,
            }
        })
        .and_then(|subject| search::highlight(&subject, subject_terms, false));
    let preview = match (&email.structure, &email.bodies) {
        (Some(tree), Some(bodies)) => tree.root().and_then(|root| {
            let lists = tree.partition();
            let parts = body::value_parts(root, &lists, flags);
            body::part_texts(&parts, BodyOctets::Parts(bodies))
                .into_iter()
                .map(|part| search::collapsed(&part.into_text()))
                .find_map(|text| search::highlight(&text, body_terms, true))
        }),
        _ => None,
    };
    json!({
        "emailId": ids::email_id(email.meta.id),
        "subject": subject,
        "preview": preview,
    })
}

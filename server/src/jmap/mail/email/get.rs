//! Email/get (RFC 8621 §4.2): plan, load once, render.
//!
//! 1. Plan: parse `properties` / `bodyProperties` and decide the read level
//!    ([`crate::mail::read_level::plan`]) before any I/O.
//! 2. Load: one batched load for all ids at that level ([`crate::mail::load`]).
//! 3. Render: pure, per email ([`super::render`]).

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::render::{BodyOptions, EmailSources, render_email};
use crate::jmap::dispatch::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::{args, ids};
use crate::mail::fast_view::FastView;
use crate::mail::load::LoadedEmail;
use crate::mail::message::parse_message;
use crate::mail::property::{BodyProperty, EmailProperty};
use crate::mail::read_level::{self, BodyValueFlags, ReadLevel};
use crate::metrics::ReadLevelLabel;

/// Email/get arguments (RFC 8620 §5.1, RFC 8621 §4.2).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetRequest {
    account_id: String,
    ids: Option<Vec<String>>,
    properties: Option<Vec<String>>,
    body_properties: Option<Vec<String>>,
    #[serde(default)]
    fetch_text_body_values: bool,
    #[serde(default, rename = "fetchHTMLBodyValues")]
    fetch_html_body_values: bool,
    #[serde(default)]
    fetch_all_body_values: bool,
    #[serde(default)]
    max_body_value_bytes: u64,
}

/// Parses property names; unknown or malformed ones are `invalidArguments` naming them.
pub(crate) fn parse_properties<T>(
    names: &[String],
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, MethodError> {
    let mut parsed = Vec::with_capacity(names.len());
    let mut invalid = Vec::new();
    for name in names {
        match parse(name) {
            Some(property) => parsed.push(property),
            None => invalid.push(name.as_str()),
        }
    }
    if invalid.is_empty() {
        Ok(parsed)
    } else {
        Err(MethodError::InvalidArguments(format!(
            "unknown or invalid properties: {}",
            invalid.join(", ")
        )))
    }
}

/// Handles one Email/get call.
#[tracing::instrument(skip_all, fields(account = ctx.account.id, read_level))]
pub async fn email_get(
    ctx: &mut CallContext<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, MethodError> {
    let request: GetRequest = args::parse(arguments)?;
    args::check_account(ctx.account, &request.account_id)?;
    let jmap = ctx.jmap;

    // Plan.
    let mut properties = match &request.properties {
        Some(names) => parse_properties(names, EmailProperty::parse)?,
        None => EmailProperty::default_list(),
    };
    if !properties.contains(&EmailProperty::Id) {
        properties.insert(0, EmailProperty::Id);
    }
    let body_properties = match &request.body_properties {
        Some(names) => parse_properties(names, BodyProperty::parse)?,
        None => BodyProperty::default_list(),
    };
    let flags = BodyValueFlags {
        fetch_text: request.fetch_text_body_values,
        fetch_html: request.fetch_html_body_values,
        fetch_all: request.fetch_all_body_values,
    };
    let plan = read_level::plan(&properties, flags, jmap.switches);
    let level = plan.level();
    tracing::Span::current().record("read_level", level.as_str());

    let requested: Vec<String> = match request.ids {
        Some(ids) => ids,
        None => all_email_ids(ctx).await?,
    };
    if requested.len() as u64 > jmap.limits.max_objects_in_get {
        return Err(MethodError::RequestTooLarge(
            jmap.limits.max_objects_in_get as usize,
        ));
    }
    let mut seen = HashSet::new();
    let requested: Vec<String> = requested
        .into_iter()
        .filter(|id| seen.insert(id.clone()))
        .collect();
    let numeric: Vec<i64> = requested
        .iter()
        .filter_map(|id| ids::parse_email_id(id))
        .collect();
    jmap.metrics
        .email_get
        .get_or_create(&ReadLevelLabel {
            read_level: level.as_str(),
        })
        .inc();

    // Load.
    let (loaded, state) = jmap.loader.load(ctx.account.id, &numeric, plan).await?;

    // Render.
    let options = BodyOptions {
        flags,
        max_body_value_bytes: request.max_body_value_bytes as usize,
    };
    let by_id: HashMap<i64, &LoadedEmail> = loaded.iter().map(|e| (e.meta.id, e)).collect();
    let mut list = Vec::with_capacity(loaded.len());
    let mut not_found = Vec::new();
    for id in &requested {
        let Some(email) = ids::parse_email_id(id).and_then(|n| by_id.get(&n).copied()) else {
            not_found.push(id.clone());
            continue;
        };
        let full = email.raw.as_deref().map(|raw| {
            jmap.metrics.count_parse("full");
            parse_message(raw)
        });
        let computed_view = match (&email.fast_view, &full) {
            (None, Some(message)) if level == ReadLevel::Full => Some(FastView::compute(message)),
            _ => None,
        };
        let sources = EmailSources {
            meta: &email.meta,
            header: email.header.as_deref(),
            fast_view: email.fast_view.as_ref().or(computed_view.as_ref()),
            full: full.as_ref(),
        };
        list.push(Value::Object(render_email(
            &properties,
            &body_properties,
            &options,
            &sources,
        )));
    }
    Ok(args::get_response(
        request.account_id,
        state,
        list,
        not_found,
    ))
}

async fn all_email_ids(ctx: &CallContext<'_>) -> Result<Vec<String>, MethodError> {
    let rows = ctx.jmap.store.query_rows(ctx.account.id, None).await?;
    Ok(rows.iter().map(|row| ids::email_id(row.meta.id)).collect())
}

//! Email/get (RFC 8621 §4.2): plan, load once, render.
//!
//! 1. Plan: parse `properties` / `bodyProperties` and decide the read level
//!    ([`crate::mail::read_level::plan`]) before any I/O.
//! 2. Load: one batched load for all ids at that level ([`crate::mail::load`]).
//! 3. Render: pure, per email ([`super::render`]).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::render::{BodyOptions, EmailSources, render_email};
use crate::jmap::dispatch::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::mail::get::{found, get_response, parse_properties, requested_ids};
use crate::jmap::{args, ids};
use crate::mail::fast_view::FastView;
use crate::mail::load::LoadedEmail;
use crate::mail::message::parse_message;
use crate::mail::property::{BodyProperty, EmailProperty};
use crate::mail::read_level::{self, BodyValueFlags, ReadLevel};
use crate::metrics::{Metrics, ReadLevelLabel};

/// Email/get arguments (RFC 8620 §5.1, RFC 8621 §4.2).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetRequest {
    account_id: String,
    ids: Option<Vec<String>>,
    properties: Option<Vec<String>>,
    body_properties: Option<Vec<String>>,
    #[serde(flatten)]
    body_values: BodyValueArgs,
}

/// The body value arguments Email/get and Email/parse share (RFC 8621
/// §4.2, §4.9); each request flattens them in.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BodyValueArgs {
    #[serde(default)]
    pub fetch_text_body_values: bool,
    #[serde(default, rename = "fetchHTMLBodyValues")]
    pub fetch_html_body_values: bool,
    #[serde(default)]
    pub fetch_all_body_values: bool,
    #[serde(default)]
    pub max_body_value_bytes: u64,
}

impl BodyValueArgs {
    /// As the renderer takes them.
    pub fn options(&self) -> BodyOptions {
        BodyOptions {
            flags: BodyValueFlags {
                fetch_text: self.fetch_text_body_values,
                fetch_html: self.fetch_html_body_values,
                fetch_all: self.fetch_all_body_values,
            },
            max_body_value_bytes: self.max_body_value_bytes as usize,
        }
    }
}

/// What an Email/get or Email/parse renders of each email: the parsed
/// `properties` and `bodyProperties`, and the body value options.
#[derive(Debug, Clone)]
pub(crate) struct EmailShape {
    pub properties: Vec<EmailProperty>,
    pub body_properties: Vec<BodyProperty>,
    pub options: BodyOptions,
}

impl EmailShape {
    /// Parses `properties` (`default` when null) and `bodyProperties`
    /// (RFC 8621 §4.2's default when null); an unknown name is `invalidArguments`.
    pub fn parse(
        properties: Option<&[String]>,
        body_properties: Option<&[String]>,
        default: fn() -> Vec<EmailProperty>,
        options: BodyOptions,
    ) -> Result<Self, MethodError> {
        let properties = match properties {
            Some(names) => parse_properties(names, EmailProperty::parse)?,
            None => default(),
        };
        let body_properties = match body_properties {
            Some(names) => parse_properties(names, BodyProperty::parse)?,
            None => BodyProperty::default_list(),
        };
        Ok(Self {
            properties,
            body_properties,
            options,
        })
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

    // Plan: the read level, from the properties alone.
    let shape = request.shape()?;
    let plan = read_level::plan(&shape.properties, shape.options.flags, jmap.switches);
    let level = plan.level();
    tracing::Span::current().record("read_level", level.as_str());
    let requested = match request.ids {
        Some(ids) => ids,
        None => all_email_ids(ctx).await?,
    };
    let requested = requested_ids(requested, jmap.limits.max_objects_in_get)?;
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

    // Load: once, for all ids, at that level.
    let (loaded, state) = jmap.loader.load(ctx.account.id, &numeric, plan).await?;

    // Render: pure, per email.
    let by_id: HashMap<i64, &LoadedEmail> = loaded.iter().map(|e| (e.meta.id, e)).collect();
    let (list, not_found) = found(&requested, |id| {
        let email = by_id.get(&ids::parse_email_id(id)?)?;
        Some(render_loaded(email, level, &shape, &jmap.metrics))
    });
    Ok(get_response(request.account_id, state, list, not_found))
}

impl GetRequest {
    /// The properties (`id` always among them) and body value options.
    fn shape(&self) -> Result<EmailShape, MethodError> {
        let options = self.body_values.options();
        let mut shape = EmailShape::parse(
            self.properties.as_deref(),
            self.body_properties.as_deref(),
            EmailProperty::default_list,
            options,
        )?;
        if !shape.properties.contains(&EmailProperty::Id) {
            shape.properties.insert(0, EmailProperty::Id);
        }
        Ok(shape)
    }
}

/// Renders one loaded email: its raw message (full level) parsed once, and
/// at the full level a projection missing from the store computed from it.
fn render_loaded(
    email: &LoadedEmail,
    level: ReadLevel,
    shape: &EmailShape,
    metrics: &Metrics,
) -> Value {
    let full = email.raw.as_deref().map(|raw| {
        metrics.count_parse("full");
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
    Value::Object(render_email(
        &shape.properties,
        &shape.body_properties,
        &shape.options,
        &sources,
    ))
}

async fn all_email_ids(ctx: &CallContext<'_>) -> Result<Vec<String>, MethodError> {
    let rows = ctx.jmap.store.query_rows(ctx.account.id, None).await?;
    Ok(rows.iter().map(|row| ids::email_id(row.meta.id)).collect())
}

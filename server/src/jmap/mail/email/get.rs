//! Email/get (RFC 8621 §4.2): plan, load once, render.
//!
//! 1. Plan: parse `properties` / `bodyProperties` and decide the read level
//!    ([`crate::mail::read_level::plan`]) before any I/O.
//! 2. Load: one batched load for all ids at that level ([`crate::mail::load`]).
//! 3. Render: pure, per email ([`super::render`]); inline for the list view,
//!    on the work pool ([`crate::mail::work`]) when it decodes part bodies
//!    (the body-values and full levels) or when the
//!    render may cost more than [`INLINE_RENDER_WORK`].
//!
//! The request's budget ([`crate::jmap::budget`]) is checked at each step:
//! properties × ids against the render work before any I/O, the octets of
//! whole messages before they are parsed (part bodies before they are read),
//! each property's field values before
//! they are rendered, and each email's JSON as it is built: every email is
//! serialized once, where it is rendered, and the response is that text.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::Deserialize;
use serde_json::Value;

use super::get_arguments::EmailGetArguments;
use super::render::{BodyOptions, EmailSources, render_email};
use super::render_text::{FixedText, KeptTexts, TextShape};
use crate::jmap::budget::Taken;
use crate::jmap::call::CallContext;
use crate::jmap::error::MethodError;
use crate::jmap::mail::get::{
    found, get_response, get_response_head, get_response_tail, parse_properties, requested_ids,
};
use crate::jmap::request::{Arguments, CallArguments};
use crate::jmap::{Limits, args, ids};
use crate::mail::fast_view::FastView;
use crate::mail::load::{BodyReads, LoadedEmail};
use crate::mail::message::parse_message;
use crate::mail::property::{BodyProperty, EmailProperty};
use crate::mail::read_level::{self, BodyValueFlags, ReadLevel, ReadPlan};
use crate::mail::work::{INLINE_RENDER_WORK, WorkExceeded, WorkMeter};
use crate::metrics::{Metrics, ReadLevelLabel};

/// The body value arguments Email/get and Email/parse share (RFC 8621
/// §4.2, §4.9): Email/parse flattens them in, Email/get writes the same
/// four fields out ([`EmailGetArguments`]).
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

/// Handles one Email/get call: plan (the read level, from the properties
/// alone), load (once, for all ids, at that level), render (inline for the
/// list view, on the work pool when heavier).
#[tracing::instrument(level = "debug", skip_all, fields(account = ctx.account.id, read_level))]
pub async fn email_get(
    ctx: &mut CallContext<'_>,
    arguments: CallArguments,
) -> Result<Arguments, MethodError> {
    let mut request = match arguments {
        CallArguments::EmailGet(typed) => *typed,
        CallArguments::Map(map) => EmailGetArguments::from_map(map)?,
    };
    args::check_account(ctx.account, &request.account_id)?;
    let ids = request.ids.take();
    let planned = plan_get(ctx, &request, ids).await?;
    let load = load_get(ctx, &planned).await?;
    render_get(ctx, planned, load, request.account_id).await
}

/// What an Email/get reads, decided before any I/O but the ids' own.
struct GetPlan {
    shape: EmailShape,
    plan: ReadPlan,
    level: ReadLevel,
    requested: Vec<String>,
    /// The row of each of `requested`, where it is one of ours.
    rows: Vec<Option<i64>>,
    /// Those rows, known ones only.
    numeric: Vec<i64>,
    /// The list view's shape, when every property renders as text.
    text_shape: Option<Arc<TextShape>>,
}

/// What an Email/get loaded for its plan.
struct GetLoad {
    loaded: Vec<LoadedEmail>,
    /// The Email state the emails were read at.
    state: i64,
    /// The list view's texts kept for them ([`super::render_text::ListTexts`]).
    kept: Option<KeptTexts>,
    /// `kept` is whole and right at `state`: nothing was loaded.
    whole: bool,
}

/// Plan: the read level from the properties, the ids (every email's when
/// none are given) within `maxObjectsInGet`, the least render work checked
/// against the budget, and the list view's text shape.
async fn plan_get(
    ctx: &CallContext<'_>,
    request: &EmailGetArguments,
    ids: Option<Vec<String>>,
) -> Result<GetPlan, MethodError> {
    let jmap = ctx.jmap;
    let shape = request.shape()?;
    let plan = read_level::plan(
        &shape.properties,
        &shape.body_properties,
        shape.options.flags,
        jmap.switches,
    );
    let level = plan.level();
    tracing::Span::current().record("read_level", level.as_str());
    let requested = match ids {
        Some(ids) => ids,
        None => all_email_ids(ctx).await?,
    };
    let (requested, rows) = distinct_rows(requested, jmap.limits.max_objects_in_get)?;
    let least_work = (shape.properties.len() as u64).saturating_mul(requested.len() as u64);
    if least_work > ctx.budget.work_left {
        return Err(over_work(&jmap.limits));
    }
    let numeric = known_rows(&rows);
    jmap.metrics
        .email_get
        .get_or_create(&ReadLevelLabel {
            read_level: level.as_str(),
        })
        .inc();
    let text_shape = (level <= ReadLevel::FastView)
        .then(|| jmap.text_shapes.of(&shape.properties))
        .flatten();
    Ok(GetPlan {
        shape,
        plan,
        level,
        requested,
        rows,
        numeric,
        text_shape,
    })
}

/// The whole texts of a shape of metadata alone that the account keeps for
/// every id, at the Email state it is still at (`TextShape::kept_at`):
/// then nothing is loaded, not even the metadata.
async fn whole_texts(
    ctx: &CallContext<'_>,
    planned: &GetPlan,
) -> Result<Option<(KeptTexts, i64)>, MethodError> {
    let Some(text_shape) = planned.text_shape.as_ref().filter(|s| s.keeps_whole()) else {
        return Ok(None);
    };
    let (jmap, account) = (ctx.jmap, ctx.account.id);
    let rows = planned.numeric.iter().copied();
    match jmap
        .list_texts
        .whole_of(account, text_shape.name(), rows)
        .await
    {
        Some((kept, at)) if jmap.loader.email_state(account, at).await? == at => {
            Ok(Some((kept, at)))
        }
        _ => Ok(None),
    }
}

/// The list view's texts the account keeps for every email found, at the
/// Email state they were read at (`TextShape::kept_at`): then nothing else
/// of them is loaded.
async fn kept_texts_of_found(
    ctx: &CallContext<'_>,
    planned: &GetPlan,
    loaded: &[LoadedEmail],
    state: i64,
) -> Option<KeptTexts> {
    let text_shape = planned.text_shape.as_ref()?;
    let found = loaded.iter().map(|email| email.meta.id);
    let at = text_shape.kept_at(state);
    ctx.jmap
        .list_texts
        .all_of(ctx.account.id, text_shape.name(), at, found)
        .await
}

/// Load: once, for all ids, at the plan's level. Whole messages are
/// charged from their stored sizes before any is read, part bodies from
/// their stored ranges; the list view's kept texts, when they hold every
/// email found, spare reading anything else of them (so a failure to read
/// a header block or a projection row cannot fail the call for them).
async fn load_get(ctx: &mut CallContext<'_>, planned: &GetPlan) -> Result<GetLoad, MethodError> {
    let jmap = ctx.jmap;
    let account = ctx.account.id;
    if let Some((kept, state)) = whole_texts(ctx, planned).await? {
        let (loaded, kept, whole) = (Vec::new(), Some(kept), true);
        return Ok(GetLoad {
            loaded,
            state,
            kept,
            whole,
        });
    }
    let (mut loaded, state) = jmap.loader.load_meta(account, &planned.numeric).await?;
    if planned.plan.full {
        charge_parse_bytes(ctx, &loaded)?;
    }
    let kept = kept_texts_of_found(ctx, planned, &loaded, state).await;
    if kept.is_none() {
        jmap.loader
            .complete(account, &mut loaded, planned.plan)
            .await?;
    }
    if planned.plan.body_values {
        let reads = BodyReads::plan(&loaded, planned.shape.options.flags);
        ctx.budget
            .charge_parse_or_refuse(reads.octets(), &jmap.limits)?;
        jmap.loader.load_bodies(&mut loaded, reads).await?;
    }
    let whole = false;
    Ok(GetLoad {
        loaded,
        state,
        kept,
        whole,
    })
}

/// Render: inline for the list view, on the work pool when heavier (kept
/// texts weigh what their emails' sources would have, so a call that
/// renders on the pool, taking its holdings per email, still does); the
/// texts made kept for the shape; the response written around the list.
async fn render_get(
    ctx: &mut CallContext<'_>,
    planned: GetPlan,
    load: GetLoad,
    account_id: String,
) -> Result<Arguments, MethodError> {
    let jmap = ctx.jmap;
    let state = load.state;
    // Texts of a shape of metadata alone are kept for this state only.
    let keep_as = planned.text_shape.clone();
    let kept_at = keep_as.as_ref().and_then(|shape| shape.kept_at(state));
    let job = RenderJob::new(ctx, planned, load, &account_id);
    let rendered = match job.heavy {
        true => jmap.work.run(ctx.account.id, move || job.run()).await,
        false => job.run(),
    };
    let Rendered {
        list,
        not_found,
        work_left,
        held,
        made,
    } = rendered.map_err(|error| error.method_error(&jmap.limits))?;
    ctx.budget.work_left = work_left;
    ctx.budget.prepaid(held);
    if let Some(keep_as) = keep_as {
        let account = ctx.account.id;
        jmap.list_texts
            .keep(account, keep_as.name(), kept_at, made)
            .await;
    }
    let mut text = list.text;
    get_response_tail(&mut text, state, &not_found);
    let value = list
        .values
        .map(|list| get_response(account_id, state, list, not_found));
    Ok(Arguments::text(text, value))
}

/// The rows of the ids that name one, in order. (Collected from `flatten`
/// the vector would grow from nothing, four times for a page of 30: a
/// percent of a metadata call, ADR 0003, session 23.)
fn known_rows(rows: &[Option<i64>]) -> Vec<i64> {
    let mut known = Vec::with_capacity(rows.len());
    known.extend(rows.iter().flatten());
    known
}

/// The requested ids without repeats ([`requested_ids`]: `requestTooLarge`
/// over `limit`) and each one's row, parsed once (`None`: not an id of
/// ours). Ids of ours are one text per row (no leading zeros), so when
/// every id is one and their rows are distinct, so are the ids: the usual
/// call is checked by sorting its rows, without hashing its ids.
fn distinct_rows(
    requested: Vec<String>,
    limit: u64,
) -> Result<(Vec<String>, Vec<Option<i64>>), MethodError> {
    let parse = |ids: &[String]| -> Vec<Option<i64>> {
        ids.iter().map(|id| ids::parse_email_id(id)).collect()
    };
    if requested.len() as u64 <= limit {
        let rows = parse(&requested);
        let mut sorted = known_rows(&rows);
        if sorted.len() == rows.len() {
            sorted.sort_unstable();
            if sorted.windows(2).all(|pair| pair[0] != pair[1]) {
                return Ok((requested, rows));
            }
        }
    }
    let requested = requested_ids(requested, limit)?;
    let rows = parse(&requested);
    Ok((requested, rows))
}

/// Where each requested row's email is in `loaded` (`None`: not found).
/// `loaded` is usually in the rows' order (the metadata snapshot keeps
/// it): one walk finds them; otherwise a map.
fn positions(rows: &[Option<i64>], loaded: &[LoadedEmail]) -> Vec<Option<usize>> {
    let mut next = 0;
    let walked: Vec<Option<usize>> = rows
        .iter()
        .map(|row| {
            let at = loaded.get(next)?;
            (Some(at.meta.id) == *row).then(|| {
                next += 1;
                next - 1
            })
        })
        .collect();
    // Every loaded email matched in order: rows are distinct, so any row
    // left unmatched is in none of them.
    if next == loaded.len() {
        return walked;
    }
    let by_id: FxHashMap<i64, usize> = loaded
        .iter()
        .enumerate()
        .map(|(at, email)| (email.meta.id, at))
        .collect();
    rows.iter()
        .map(|row| row.and_then(|row| by_id.get(&row).copied()))
        .collect()
}

/// The kept texts of the emails a call found: of each row when `whole`
/// (every found row has one, nothing was loaded), else of each loaded email.
fn kept_texts<'a>(
    kept: &'a KeptTexts,
    whole: bool,
    rows: &'a [Option<i64>],
    loaded: &'a [LoadedEmail],
) -> impl Iterator<Item = &'a Arc<FixedText>> {
    let found: Box<dyn Iterator<Item = i64>> = match whole {
        true => Box::new(rows.iter().flatten().copied()),
        false => Box::new(loaded.iter().map(|email| email.meta.id)),
    };
    found.filter_map(|id| kept.get(id))
}

/// `requestTooLarge` for a call over the request's render work.
fn over_work(limits: &Limits) -> MethodError {
    MethodError::OverBudget(format!(
        "rendering these properties of these emails would pass the request's {} units of \
         render work (one per property per email, one per header field value); ask for \
         fewer properties or ids",
        limits.max_render_work
    ))
}

/// Takes the stored sizes of the messages about to be read whole (the full
/// level) from the request's parse budget, before any is read.
fn charge_parse_bytes(
    ctx: &mut CallContext<'_>,
    loaded: &[LoadedEmail],
) -> Result<(), MethodError> {
    let octets = loaded
        .iter()
        .map(|email| email.meta.size.max(0) as u64)
        .fold(0u64, u64::saturating_add);
    ctx.budget.charge_parse_or_refuse(octets, &ctx.jmap.limits)
}

/// An upper bound of the render work of the loaded emails, known without
/// rendering: each property once per email, plus each header field for
/// `headers` and `header:…:all` (all of them, whatever the name). The full
/// level always runs on the pool, so its (unparsed) header does not count.
fn render_bound(shape: &EmailShape, loaded: &[LoadedEmail]) -> u64 {
    let expanding = shape
        .properties
        .iter()
        .filter(|property| match property {
            EmailProperty::Headers => true,
            EmailProperty::Header(header) => header.all,
            _ => false,
        })
        .count() as u64;
    let per_email = shape.properties.len() as u64;
    loaded
        .iter()
        .map(|email| {
            let (fields, octets) = email.header.as_ref().map_or((0, 0), |header| {
                (header.len() as u64, header.octets() as u64)
            });
            // A large block renders large values: count its octets too;
            // a large part tree (many parts) likewise.
            let tree = email
                .structure
                .as_ref()
                .map_or(0, |tree| tree.weight() as u64);
            per_email + expanding * fields + octets / 256 + tree / 256
        })
        .fold(0u64, u64::saturating_add)
}

/// The render step of one Email/get, owning what it renders so that it can
/// run on the work pool.
struct RenderJob {
    heavy: bool,
    /// The list view's shape, when every property renders as text.
    text_shape: Option<Arc<TextShape>>,
    /// Texts of emails kept from earlier calls at that shape
    /// ([`super::render_text::ListTexts`]): then nothing else of those
    /// emails was loaded.
    kept: Option<KeptTexts>,
    /// `kept` holds a whole text for every found row, right at the
    /// account's Email state now: nothing was loaded (`loaded` is empty).
    whole: bool,
    /// The response's head ([`get_response_head`]), which the list is
    /// written after.
    head: String,
    requested: Vec<String>,
    /// The row of each of `requested`, where it is one of ours.
    rows: Vec<Option<i64>>,
    loaded: Vec<LoadedEmail>,
    level: ReadLevel,
    shape: EmailShape,
    metrics: Arc<Metrics>,
    work_left: u64,
    bytes_left: u64,
    /// What a heavy render takes from the request's share of the server's
    /// holdings, per email as it builds it (given back if it is dropped).
    taken: Taken,
}

/// What a render built: the emails as JSON text, each serialized once
/// where it was rendered and counted exactly, written one after the other
/// (comma-separated) as the response's `list` holds them; an inline render
/// through the `Value` tree keeps the values too, for a result reference
/// into them to read without parsing (text written straight is parsed if
/// one does).
struct RenderedList {
    /// The response's text up to the end of its list: the head
    /// ([`get_response_head`]) and the objects.
    text: String,
    values: Option<Vec<Value>>,
}

/// What a render built.
struct Rendered {
    list: RenderedList,
    not_found: Vec<String>,
    /// Render work units left.
    work_left: u64,
    /// Octets taken from the holdings while building, for the request.
    held: Taken,
    /// Texts rendered at the list view's shape, to be kept.
    made: Vec<(i64, Arc<FixedText>)>,
}

/// A requested email a text render found: its whole kept text (and the
/// text), or its loaded sources.
enum Found<'a> {
    Whole((&'a Arc<FixedText>, &'a str)),
    Loaded(&'a LoadedEmail),
}

/// Why a render stopped.
enum RenderError {
    /// The request's render work budget.
    Work,
    /// The request's budget of JSON octets built (counted per email on the pool).
    Bytes,
    /// The holdings of the account's or the server's requests in flight.
    Busy,
}

impl RenderError {
    /// The method error a stopped render answers with.
    fn method_error(self, limits: &Limits) -> MethodError {
        match self {
            RenderError::Work => over_work(limits),
            RenderError::Bytes => MethodError::TooMuchBuilt(limits.max_size_built()),
            RenderError::Busy => crate::jmap::budget::server_busy(),
        }
    }
}

/// The request's budget of JSON octets built and its share of the holdings,
/// as a render spends them.
struct Spending {
    bytes_left: u64,
    taken: Taken,
}

impl Spending {
    /// Counts `size` octets built against the byte budget, and takes them
    /// from the holdings when `take`.
    fn spend(&mut self, size: u64, take: bool) -> Result<(), RenderError> {
        if size > self.bytes_left {
            return Err(RenderError::Bytes);
        }
        if take && !self.taken.take(size) {
            return Err(RenderError::Busy);
        }
        self.bytes_left -= size;
        Ok(())
    }
}

impl RenderJob {
    /// The render of a planned and loaded call: heavy (on the pool) at the
    /// body-values level and above or when its bound passes
    /// [`INLINE_RENDER_WORK`], after the response's head.
    fn new(ctx: &CallContext<'_>, planned: GetPlan, load: GetLoad, account_id: &str) -> Self {
        let GetLoad {
            loaded,
            kept,
            whole,
            ..
        } = load;
        let bound = match &kept {
            Some(kept) => kept_texts(kept, whole, &planned.rows, &loaded)
                .map(|text| text.bound())
                .fold(0, u64::saturating_add),
            None => render_bound(&planned.shape, &loaded),
        };
        let mut head = String::new();
        get_response_head(account_id, &mut head);
        RenderJob {
            heavy: planned.level >= ReadLevel::BodyValues || bound > INLINE_RENDER_WORK,
            text_shape: planned.text_shape,
            kept,
            whole,
            head,
            requested: planned.requested,
            rows: planned.rows,
            loaded,
            level: planned.level,
            shape: planned.shape,
            metrics: ctx.jmap.metrics.clone(),
            work_left: ctx.budget.work_left,
            bytes_left: ctx.budget.bytes_left(),
            taken: ctx.budget.taker(),
        }
    }

    /// Renders each requested email and serializes it to its JSON text,
    /// counting those octets against the request's byte budget and the
    /// holdings as it goes; a light render keeps the values as well.
    fn run(self) -> Result<Rendered, RenderError> {
        match self.text_shape.clone() {
            Some(text_shape) => self.run_text(&text_shape),
            None => self.run_values(),
        }
    }

    /// The list view: each email written straight into the list, its kept
    /// text spliced, else rendered (and kept when it can be), else written
    /// whole. Checked against the request's budget per email; taken from
    /// the holdings per email when heavy (a large render stops at the first
    /// email over them), once for the whole list when light (bounded by the
    /// inline render work).
    fn run_text(mut self, text_shape: &TextShape) -> Result<Rendered, RenderError> {
        let meter = WorkMeter::new(self.work_left);
        let mut objects = self.text_list_room(text_shape);
        let list_start = objects.len();
        let mut spending = Spending {
            bytes_left: self.bytes_left,
            taken: self.taken,
        };
        // The objects' octets (not the commas between), as the heavy
        // path takes them per email.
        let mut built = 0u64;
        let mut not_found = Vec::new();
        let mut made = Vec::new();
        let at = match self.whole {
            true => Vec::new(),
            false => positions(&self.rows, &self.loaded),
        };
        let kept = self.kept.as_ref();
        for (n, id) in self.requested.iter().enumerate() {
            let found = match self.whole {
                true => self.rows[n]
                    .and_then(|row| kept?.get(row))
                    .and_then(|fixed| Some((fixed, fixed.whole()?)))
                    .map(Found::Whole),
                false => at[n].map(|at| Found::Loaded(&self.loaded[at])),
            };
            let Some(found) = found else {
                not_found.push(id.clone());
                continue;
            };
            if objects.len() > list_start {
                objects.push(',');
            }
            let start = objects.len();
            write_text(found, kept, text_shape, &meter, &mut objects, &mut made)?;
            let size = (objects.len() - start) as u64;
            spending.spend(size, self.heavy)?;
            built += size;
        }
        if !self.heavy && !spending.taken.take(built) {
            return Err(RenderError::Busy);
        }
        Ok(Rendered {
            list: RenderedList {
                text: objects,
                values: None,
            },
            not_found,
            work_left: meter.left(),
            held: spending.taken,
            made,
        })
    }

    /// The response's head (taken from the job) with room for the list as it will be (kept
    /// texts and their spliced values, or objects of metadata or of headers
    /// and the projection): grown or shrunk again (`Arguments::text`) is a
    /// copy of it.
    fn text_list_room(&mut self, text_shape: &TextShape) -> String {
        let rendered_large =
            self.kept.is_none() && (text_shape.needs_header || text_shape.needs_fast_view);
        let per_email = if rendered_large { 768 } else { 128 };
        let kept_octets: usize = self.kept.as_ref().map_or(0, |kept| {
            kept_texts(kept, self.whole, &self.rows, &self.loaded)
                .map(|text| text.text_len())
                .sum()
        });
        let mut objects = std::mem::take(&mut self.head);
        objects.reserve(kept_octets + self.requested.len() * per_email);
        objects
    }

    /// Any other shape: each email rendered to a `Value` and serialized
    /// once, taken from the holdings per email; a light render keeps the
    /// values for result references.
    fn run_values(self) -> Result<Rendered, RenderError> {
        let RenderJob {
            heavy,
            head,
            requested,
            rows,
            loaded,
            level,
            shape,
            metrics,
            work_left,
            bytes_left,
            taken,
            ..
        } = self;
        let meter = WorkMeter::new(work_left);
        let mut spending = Spending { bytes_left, taken };
        // `render_each` asks for the requested ids in order: each takes the
        // next of their positions.
        let mut positions = positions(&rows, &loaded).into_iter();
        let render = |_: &str| -> Option<Result<Value, RenderError>> {
            let email = &loaded[positions.next().flatten()?];
            Some(
                render_loaded(email, level, &shape, &metrics, &meter)
                    .map_err(|_| RenderError::Work),
            )
        };
        let list = render_each(&requested, render, |object| {
            let text = serde_json::to_string(&object).map_err(|_| RenderError::Bytes)?;
            spending.spend(text.len() as u64, true)?;
            Ok((text, (!heavy).then_some(object)))
        })
        .map(|(list, not_found)| {
            let (texts, values): (Vec<String>, Vec<_>) = list.into_iter().unzip();
            let values = (!heavy).then(|| values.into_iter().flatten().collect());
            let text = join_objects(head, &texts);
            (RenderedList { text, values }, not_found)
        });
        // On failure, `taken` is dropped: what it took is given back.
        let (list, not_found) = list?;
        Ok(Rendered {
            list,
            not_found,
            work_left: meter.left(),
            held: spending.taken,
            made: Vec::new(),
        })
    }
}

/// Writes one found email of the list view into `objects`: a whole kept
/// text as it is, a kept text spliced with the email's metadata, else the
/// text rendered from its sources (added to `made` when it holds all the
/// shape asks for).
fn write_text(
    found: Found<'_>,
    kept: Option<&KeptTexts>,
    text_shape: &TextShape,
    meter: &WorkMeter,
    objects: &mut String,
    made: &mut Vec<(i64, Arc<FixedText>)>,
) -> Result<(), RenderError> {
    let email = match found {
        Found::Whole((fixed, text)) => {
            meter.charge(fixed.units()).map_err(|_| RenderError::Work)?;
            objects.push_str(text);
            return Ok(());
        }
        Found::Loaded(email) => email,
    };
    let meta = &email.meta;
    match kept.and_then(|kept| kept.get(meta.id)) {
        Some(fixed) => {
            meter.charge(fixed.units()).map_err(|_| RenderError::Work)?;
            fixed.splice(meta, objects);
        }
        None => {
            let sources = sources_of(email);
            let fixed = text_shape
                .fixed(&sources, meter)
                .map_err(|_| RenderError::Work)?;
            fixed.splice(meta, objects);
            if text_shape.has_all(&sources) {
                made.push((meta.id, Arc::new(fixed)));
            }
        }
    }
    Ok(())
}

/// The head followed by the objects' texts, comma-separated.
fn join_objects(head: String, texts: &[String]) -> String {
    let mut text = head;
    text.reserve(texts.iter().map(|t| t.len() + 1).sum());
    for (position, object) in texts.iter().enumerate() {
        if position > 0 {
            text.push(',');
        }
        text.push_str(object);
    }
    text
}

/// Renders each of `requested` that `render` finds (the others are
/// `notFound`) and hands it to `finish`; the first error stops the render.
fn render_each<R, T>(
    requested: &[String],
    mut render: impl FnMut(&str) -> Option<Result<R, RenderError>>,
    mut finish: impl FnMut(R) -> Result<T, RenderError>,
) -> Result<(Vec<T>, Vec<String>), RenderError> {
    let mut failure = None;
    let (list, not_found) = found(requested, |id| {
        if failure.is_some() {
            return None;
        }
        match render(id)?.and_then(&mut finish) {
            Ok(object) => Some(object),
            Err(error) => {
                failure = Some(error);
                None
            }
        }
    });
    match failure {
        Some(error) => Err(error),
        None => Ok((list, not_found)),
    }
}

impl EmailGetArguments {
    /// The properties (`id` always among them) and body value options.
    fn shape(&self) -> Result<EmailShape, MethodError> {
        let options = BodyValueArgs {
            fetch_text_body_values: self.fetch_text_body_values,
            fetch_html_body_values: self.fetch_html_body_values,
            fetch_all_body_values: self.fetch_all_body_values,
            max_body_value_bytes: self.max_body_value_bytes,
        }
        .options();
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

/// What was loaded for `email`, as the renderers take it (the whole
/// message, when loaded, is parsed by [`render_loaded`]).
fn sources_of(email: &LoadedEmail) -> EmailSources<'_> {
    EmailSources {
        meta: &email.meta,
        header: email.header.as_deref(),
        fast_view: email.fast_view.as_ref(),
        structure: email.structure.as_deref(),
        bodies: email.bodies.as_ref(),
        full: None,
    }
}

/// Renders one loaded email: its raw message (full level) parsed once, and
/// at the full level a projection missing from the store computed from it.
fn render_loaded(
    email: &LoadedEmail,
    level: ReadLevel,
    shape: &EmailShape,
    metrics: &Metrics,
    meter: &WorkMeter,
) -> Result<Value, WorkExceeded> {
    let full = email.raw.as_deref().map(|raw| {
        metrics.count_parse("full");
        parse_message(raw)
    });
    let computed_view = match (&email.fast_view, &full) {
        (None, Some(message)) if level == ReadLevel::Full => Some(FastView::compute(message)),
        _ => None,
    };
    let sources = EmailSources {
        fast_view: email.fast_view.as_ref().or(computed_view.as_ref()),
        full: full.as_ref(),
        ..sources_of(email)
    };
    render_email(
        &shape.properties,
        &shape.body_properties,
        &shape.options,
        &sources,
        meter,
    )
    .map(Value::Object)
}

async fn all_email_ids(ctx: &CallContext<'_>) -> Result<Vec<String>, MethodError> {
    let rows = ctx.jmap.store.query_rows(ctx.account.id, None).await?;
    Ok(rows.iter().map(|row| ids::email_id(row.meta.id)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EmailMeta;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|id| id.to_string()).collect()
    }

    fn loaded(rows: &[i64]) -> Vec<LoadedEmail> {
        rows.iter()
            .map(|&id| LoadedEmail {
                meta: Arc::new(EmailMeta {
                    id,
                    blob_id: String::new(),
                    thread_id: id,
                    size: 0,
                    received_at: 0,
                    mailbox_ids: vec![],
                    keywords: vec![],
                }),
                header: None,
                fast_view: None,
                structure: None,
                bodies: None,
                raw: None,
            })
            .collect()
    }

    #[test]
    fn requested_ids_are_made_distinct_with_their_rows_whatever_their_shape() {
        let (requested, rows) = distinct_rows(ids(&["e3", "e1", "e2"]), 10).unwrap();
        assert_eq!(
            (requested, rows),
            (ids(&["e3", "e1", "e2"]), vec![Some(3), Some(1), Some(2)])
        );
        // Repeats, foreign ids and repeated foreign ids: the first of each kept.
        let (requested, rows) = distinct_rows(ids(&["e3", "x", "e3", "x", "e03"]), 10).unwrap();
        assert_eq!(
            (requested, rows),
            (ids(&["e3", "x", "e03"]), vec![Some(3), None, None])
        );
        // The bound counts the ids as sent, before repeats go.
        assert_eq!(
            distinct_rows(ids(&["e1", "e1", "e1"]), 2),
            Err(MethodError::RequestTooLarge(2))
        );
        assert_eq!(
            distinct_rows(ids(&["e1", "e2", "e3"]), 2),
            Err(MethodError::RequestTooLarge(2))
        );
    }

    #[test]
    fn each_rows_email_is_found_in_order_or_out_of_it() {
        let rows = [Some(5), None, Some(7), Some(9), Some(2)];
        // In the rows' order, with some not found.
        assert_eq!(
            positions(&rows, &loaded(&[5, 9, 2])),
            vec![Some(0), None, None, Some(1), Some(2)]
        );
        // Out of order: found through the map all the same.
        assert_eq!(
            positions(&rows, &loaded(&[2, 7, 5])),
            vec![Some(2), None, Some(1), None, Some(0)]
        );
        assert_eq!(positions(&rows, &loaded(&[])), vec![None; 5]);
        assert_eq!(positions(&[], &loaded(&[1])), Vec::<Option<usize>>::new());
    }
}

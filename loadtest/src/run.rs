//! One load-test run: goose drives the arrival of users, each user runs its
//! scenario once, and every JMAP call is checked and timed.
//!
//! Each [`Step`] of the scenario is a goose transaction named after its call,
//! and each call a goose request of the same name, so goose's reports group by
//! call. A step whose prerequisite failed (no session, no inbox, no ids) is
//! skipped. The run is bounded: users stop arriving after the duration, and
//! goose is stopped `grace` later; requests time out after `request_timeout`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use goose::client::GooseClientBuilder;
use goose::config::GooseConfiguration;
use goose::goose::{GooseResponse, Scenario as GooseScenario};
use goose::prelude::{
    GooseAttack, GooseMethod, GooseRequest, GooseUser, Transaction, TransactionError,
    TransactionFunction, TransactionResult,
};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{RequestBuilder, StatusCode, Url, redirect};
use serde_json::Value;

use crate::config::{ArrivalPlan, RunConfig, format_duration, username};
use crate::jmap::{self, CheckError};
use crate::scenario::{Call, IdSelection, Scenario, Step};
use crate::stats::{Recorder, RequestStats, SCENARIO_ROW, render_table};

/// Goose keeps global state (its killswitch, its logger): runs in one process
/// take turns.
static RUN_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long past `duration + grace + request_timeout` to wait for goose to
/// return after it was told to stop.
const SHUTDOWN_MARGIN: Duration = Duration::from_secs(30);

/// How many failure details a report keeps.
const MAX_FAILURE_SAMPLES: usize = 20;

/// The outcome of one run.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The scenario every user ran.
    pub scenario: Scenario,
    /// The host the run targeted.
    pub host: String,
    /// The arrival rate.
    pub users_per_hour: u64,
    /// How long users arrived.
    pub duration: Duration,
    /// Users planned (goose `--users`).
    pub users: usize,
    /// Users goose started.
    pub users_started: usize,
    /// One row per request name, in scenario order, timed by this crate.
    pub requests: Vec<RequestStats>,
    /// Whole-scenario times ([`SCENARIO_ROW`]): one count per user that
    /// finished its scenario, a failure when any of its calls failed; timed
    /// when no step was skipped.
    pub scenario_total: RequestStats,
    /// Failure reasons (`request name: reason`) and their counts.
    pub errors: Vec<(String, u64)>,
    /// One example in detail of each failure reason (the first few reasons).
    pub failure_samples: Vec<String>,
    /// Requests goose counted.
    pub goose_requests: u64,
    /// Requests goose counted as failed.
    pub goose_failures: u64,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// CPU time the load test itself used over the run, every thread
    /// (`CLOCK_PROCESS_CPUTIME_ID`). Near `elapsed` on one core, the load
    /// test could not offer more: the run measured it, not the server.
    pub client_cpu: Duration,
    /// Whether goose had to be stopped because the run went past `duration + grace`.
    pub stopped_by_grace: bool,
    /// Whether the session's `apiUrl` named another origin and its path was used on `host`.
    pub api_url_rewritten: bool,
}

impl RunReport {
    /// The row of request `name` (such as [`crate::scenario::EMAIL_GET_METADATA`]),
    /// or of [`SCENARIO_ROW`].
    pub fn request(&self, name: &str) -> Option<&RequestStats> {
        if name == SCENARIO_ROW {
            return Some(&self.scenario_total);
        }
        self.requests.iter().find(|row| row.name == name)
    }

    /// [`RunReport::client_cpu`] as a share of one core over the run
    /// (1.0 = one core busy the whole time).
    pub fn client_cpu_share(&self) -> f64 {
        self.client_cpu.as_secs_f64() / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }

    /// The request rows followed by the whole-scenario row.
    pub fn rows(&self) -> Vec<RequestStats> {
        let mut rows = self.requests.clone();
        rows.push(self.scenario_total.clone());
        rows
    }

    /// How many requests of each name the run should have made: the planned
    /// users times the scenario's calls per user.
    pub fn expected_counts(&self) -> Vec<(&'static str, u64)> {
        self.scenario
            .calls_per_user()
            .into_iter()
            .map(|(name, per_user)| (name, per_user * self.users as u64))
            .collect()
    }

    /// Failed requests, as counted by this crate.
    pub fn failures(&self) -> u64 {
        self.requests.iter().map(|row| row.failures).sum()
    }

    /// Whether every planned user ran its whole scenario with every request
    /// made the expected number of times and none failed (by this crate's
    /// checks or goose's).
    pub fn is_clean(&self) -> bool {
        self.problems().is_empty()
    }

    /// What kept the run from being clean, one line each; empty when it is.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (name, expected) in self.expected_counts() {
            let row = self.request(name);
            let count = row.map_or(0, |row| row.count);
            if count != expected {
                problems.push(format!("{name}: {count} requests, expected {expected}"));
            }
            if let Some(row) = row
                && row.failures > 0
            {
                problems.push(format!("{name}: {} failed", row.failures));
            }
        }
        if self.scenario_total.count != self.users as u64 {
            problems.push(format!(
                "{} of {} users finished their scenario",
                self.scenario_total.count, self.users
            ));
        }
        if self.goose_failures > self.failures() {
            problems.push(format!(
                "goose counted {} failed requests, {} more than the checks here",
                self.goose_failures,
                self.goose_failures - self.failures()
            ));
        }
        if self.stopped_by_grace {
            problems.push("the run was stopped after its grace time".to_string());
        }
        problems
    }

    /// The printed summary: a header line, the table and the failure reasons.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} on {}: {} users/hour for {} = {} users ({} started), {} requests, {} failed, {:.1}s, load test CPU {:.0} % of a core\n",
            self.scenario,
            self.host,
            self.users_per_hour,
            format_duration(self.duration),
            self.users,
            self.users_started,
            self.requests.iter().map(|row| row.count).sum::<u64>(),
            self.failures(),
            self.elapsed.as_secs_f64(),
            100.0 * self.client_cpu_share(),
        );
        out.push_str(&render_table(&self.rows()));
        out.push_str(&self.render_problems());
        out
    }

    fn render_problems(&self) -> String {
        let mut out = String::new();
        if self.api_url_rewritten {
            out.push_str(
                "note: the session's apiUrl named another origin; its path was used on the host\n",
            );
        }
        if !self.errors.is_empty() {
            out.push_str("failures by reason:\n");
            for (reason, count) in &self.errors {
                out.push_str(&format!("  {count:>6}  {reason}\n"));
            }
            for sample in &self.failure_samples {
                out.push_str(&format!("  e.g. {sample}\n"));
            }
        }
        for problem in self.problems() {
            if !problem.ends_with(" failed") {
                out.push_str(&format!("problem: {problem}\n"));
            }
        }
        out
    }
}

/// Runs `config.scenario` against `config.host` at the configured arrival
/// rate and returns what happened. Runs in one process take turns.
///
/// Needs a multi-threaded tokio runtime (`#[tokio::test(flavor = "multi_thread")]`).
pub async fn run_scenario(config: RunConfig) -> anyhow::Result<RunReport> {
    let (host, plan) = config.validate()?;
    let _turn = RUN_LOCK.lock().await;

    if config.warm_up {
        warm_up(&config, &host).await?;
    }
    let context = Arc::new(Context::new(&config, host.clone())?);
    let attack = build_attack(&config, &host, &plan, context.clone())?;

    let stopped_by_grace = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let stopped_by_grace = stopped_by_grace.clone();
        let deadline = config.duration + config.grace;
        tokio::spawn(async move {
            tokio::time::sleep(deadline).await;
            stopped_by_grace.store(true, Ordering::SeqCst);
            goose::trigger_killswitch(
                "fastview-loadtest: the run went past --duration plus its grace time",
            );
        })
    };
    let started = Instant::now();
    let cpu_at_start = process_cpu_time();
    let limit = config.duration + config.grace + config.request_timeout + SHUTDOWN_MARGIN;
    let outcome = tokio::time::timeout(limit, attack.execute()).await;
    watchdog.abort();
    let elapsed = started.elapsed();
    let client_cpu = process_cpu_time().saturating_sub(cpu_at_start);
    let metrics = match outcome {
        Err(_) => {
            return Err(anyhow!(
                "goose did not stop within {} of the start; giving up",
                format_duration(limit)
            ));
        }
        Ok(result) => result.map_err(|e| anyhow!("goose: {e}"))?,
    };

    let names = config.scenario.request_names();
    let requests = context.recorder.snapshot(&names);
    let scenario_total = context
        .recorder
        .snapshot(&[SCENARIO_ROW])
        .into_iter()
        .find(|row| row.name == SCENARIO_ROW)
        .expect("snapshot returns the rows asked for");
    let requests = requests
        .into_iter()
        .filter(|row| row.name != SCENARIO_ROW)
        .collect();
    let (goose_requests, goose_failures) =
        metrics
            .requests
            .values()
            .fold((0u64, 0u64), |(total, failed), aggregate| {
                (
                    total + (aggregate.success_count + aggregate.fail_count) as u64,
                    failed + aggregate.fail_count as u64,
                )
            });
    let failure_samples = context
        .failure_samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(_, detail)| detail.clone())
        .collect();
    Ok(RunReport {
        scenario: config.scenario,
        host: config.host.clone(),
        users_per_hour: config.users_per_hour,
        duration: config.duration,
        users: plan.users,
        users_started: metrics.total_users,
        requests,
        scenario_total,
        errors: context.recorder.errors(),
        failure_samples,
        goose_requests,
        goose_failures,
        elapsed,
        client_cpu,
        stopped_by_grace: stopped_by_grace.load(Ordering::SeqCst),
        api_url_rewritten: context.api_url_rewritten.load(Ordering::Relaxed),
    })
}

/// CPU time this process has used so far, all its threads together.
fn process_cpu_time() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

/// The goose configuration of a run: the arrival plan, the report files,
/// no telnet controller, goose's own tables off and its log quiet.
pub fn goose_configuration(
    config: &RunConfig,
    host: &Url,
    plan: &ArrivalPlan,
) -> GooseConfiguration {
    let mut goose = GooseConfiguration::default();
    goose.host = Some(host.to_string());
    goose.users = Some(plan.users);
    goose.increase_rate = Some(plan.increase_rate.clone());
    goose.iterations = Some(plan.iterations);
    goose.report_file = config
        .report_files
        .iter()
        .map(|path| path.to_string_lossy().into_owned())
        .collect();
    goose.no_telnet = true;
    goose.no_print_metrics = true;
    goose.quiet = u8::from(!config.verbose);
    goose.timeout = Some(format!("{}", config.request_timeout.as_secs_f64()));
    goose
}

fn build_attack(
    config: &RunConfig,
    host: &Url,
    plan: &ArrivalPlan,
    context: Arc<Context>,
) -> anyhow::Result<GooseAttack> {
    let steps = config.scenario.steps();
    let last = steps.len() - 1;
    let scenario = steps.into_iter().enumerate().fold(
        GooseScenario::new(config.scenario.name()),
        |scenario, (index, step)| {
            scenario.register_transaction(step_transaction(
                context.clone(),
                index,
                step,
                index == last,
            ))
        },
    );
    let attack = GooseAttack::initialize_with_config(goose_configuration(config, host, plan))
        .map_err(|e| anyhow!("goose: {e}"))?
        // One shared client built by goose; each user replaces it with ours.
        .set_client_builder_without_cookies(
            GooseClientBuilder::new()
                .without_cookies()
                .timeout(config.request_timeout),
        )
        .map_err(|e| anyhow!("goose: {e}"))?
        .register_scenario(scenario);
    Ok(attack)
}

fn step_transaction(context: Arc<Context>, index: usize, step: Step, last: bool) -> Transaction {
    let name = step.call.request_name();
    let function: TransactionFunction = Arc::new(move |user| {
        let context = context.clone();
        let step = step.clone();
        Box::pin(async move { run_step(user, &context, index, &step, last).await })
    });
    Transaction::new(function)
        .set_name(name)
        .set_sequence(index + 1)
}

/// What every user of a run shares.
struct Context {
    host: Url,
    client: reqwest::Client,
    password: String,
    accounts: u64,
    next_account: AtomicU64,
    recorder: Recorder,
    failure_samples: Mutex<Vec<(String, String)>>,
    api_url_rewritten: AtomicBool,
}

impl Context {
    fn new(config: &RunConfig, host: Url) -> anyhow::Result<Self> {
        Ok(Context {
            client: http_client(&host, config.request_timeout)?,
            host,
            password: config.password.clone(),
            accounts: config.accounts,
            next_account: AtomicU64::new(0),
            recorder: Recorder::new(),
            failure_samples: Mutex::new(Vec::new()),
            api_url_rewritten: AtomicBool::new(false),
        })
    }

    /// The next account, round-robin over `user1..userN`.
    fn next_username(&self) -> String {
        let n = self.next_account.fetch_add(1, Ordering::Relaxed);
        username(n % self.accounts + 1)
    }

    /// Keeps `detail` as an example of failure `tag`, if it is the first of
    /// its tag and there is room.
    fn sample_failure(&self, tag: &str, detail: String) {
        let mut samples = self
            .failure_samples
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if samples.len() < MAX_FAILURE_SAMPLES && !samples.iter().any(|(seen, _)| seen == tag) {
            samples.push((tag.to_string(), detail));
        }
    }
}

/// Logs in once as every account (GET the session, four at a time), not
/// measured, so the server has verified each credential before the run.
async fn warm_up(config: &RunConfig, host: &Url) -> anyhow::Result<()> {
    use futures::StreamExt;
    let client = http_client(host, config.request_timeout)?;
    let url = host.join("/.well-known/jmap").context("session URL")?;
    let failed = futures::stream::iter(1..=config.accounts)
        .map(|n| {
            let request = client
                .get(url.clone())
                .basic_auth(username(n), Some(&config.password));
            async move {
                request
                    .send()
                    .await
                    .map(|r| r.status().is_success())
                    .unwrap_or(false)
            }
        })
        .buffer_unordered(4)
        .filter(|ok| std::future::ready(!ok))
        .count()
        .await;
    if failed > 0 {
        eprintln!(
            "warm-up: {failed} of {} accounts could not log in",
            config.accounts
        );
    }
    Ok(())
}

/// The HTTP client every user shares: no proxy, and redirects followed only
/// within the host's origin, so no request leaves the host given.
pub fn http_client(host: &Url, timeout: Duration) -> anyhow::Result<reqwest::Client> {
    let origin = host.origin();
    let policy = redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= 5 {
            attempt.error("more than 5 redirects")
        } else if attempt.url().origin() == origin {
            attempt.follow()
        } else {
            let to = attempt.url().to_string();
            attempt.error(format!("refusing a redirect off the host to {to}"))
        }
    });
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .no_proxy()
        .redirect(policy)
        .user_agent(concat!("fastview-loadtest/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("building the HTTP client")
}

/// One user's progress through its scenario, kept in goose's session data.
#[derive(Clone)]
struct UserState {
    username: String,
    started: Instant,
    api_url: Option<Url>,
    account_id: Option<String>,
    inbox_id: Option<String>,
    ids: Vec<String>,
    /// A call failed.
    failed: bool,
    /// A step failed that later steps need; they are skipped.
    aborted: bool,
}

async fn run_step(
    user: &mut GooseUser,
    context: &Context,
    index: usize,
    step: &Step,
    last: bool,
) -> TransactionResult {
    let mut state = if index == 0 {
        // Our client: no proxy, redirects kept on the host.
        user.client = context.client.clone();
        UserState {
            username: context.next_username(),
            started: Instant::now(),
            api_url: None,
            account_id: None,
            inbox_id: None,
            ids: Vec::new(),
            failed: false,
            aborted: false,
        }
    } else {
        match user.get_session_data::<UserState>() {
            Some(state) => state.clone(),
            None => return Err(custom("no user state: the first step did not run")),
        }
    };
    let result = if state.aborted {
        Err(custom("skipped: an earlier step failed"))
    } else {
        perform(user, context, &mut state, step).await
    };
    if result.is_err() {
        state.failed = true;
    }
    if last {
        let elapsed = (!state.aborted).then(|| state.started.elapsed());
        context
            .recorder
            .record(SCENARIO_ROW, elapsed, !state.failed);
    }
    user.set_session_data(state);
    result
}

fn custom(message: &str) -> Box<TransactionError> {
    Box::new(TransactionError::Custom(message.to_string()))
}

async fn perform(
    user: &mut GooseUser,
    context: &Context,
    state: &mut UserState,
    step: &Step,
) -> TransactionResult {
    let name = step.call.request_name();
    let mut first_error = None;
    for _ in 0..step.times {
        let result = perform_once(user, context, state, &step.call).await;
        if let Err(error) = result {
            if matches!(
                step.call,
                Call::Session | Call::MailboxGet | Call::EmailQuery { .. }
            ) {
                state.aborted = true;
            }
            first_error.get_or_insert(error);
        }
    }
    match first_error {
        Some(error) => Err(error),
        None if step.times == 0 => Err(custom(&format!("{name}: step repeated 0 times"))),
        None => Ok(()),
    }
}

async fn perform_once(
    user: &mut GooseUser,
    context: &Context,
    state: &mut UserState,
    call: &Call,
) -> TransactionResult {
    let name = call.request_name();
    match call {
        Call::Session => {
            let url = context
                .host
                .join(jmap::SESSION_PATH)
                .map_err(|e| custom(&format!("session URL: {e}")))?;
            let builder = user
                .client
                .get(url)
                .basic_auth(&state.username, Some(&context.password))
                .header(ACCEPT, "application/json");
            let session = exchange(
                user,
                context,
                &state.username,
                name,
                GooseMethod::Get,
                builder,
                |body| {
                    let session = jmap::parse_session(&jmap::parse_json(body)?)?;
                    let (api_url, rewritten) =
                        jmap::resolve_api_url(&context.host, &session.api_url)?;
                    Ok((session.account_id, api_url, rewritten))
                },
            )
            .await?;
            let (account_id, api_url, rewritten) = session;
            if rewritten {
                context.api_url_rewritten.store(true, Ordering::Relaxed);
            }
            state.account_id = Some(account_id);
            state.api_url = Some(api_url);
            Ok(())
        }
        Call::MailboxGet => {
            let account_id = state
                .account_id
                .clone()
                .ok_or_else(|| custom("no account"))?;
            let inbox = api_call(
                user,
                context,
                state,
                name,
                "Mailbox/get",
                jmap::mailbox_get(&account_id),
                |body| jmap::find_inbox(&jmap::method_response(body, "Mailbox/get")?),
            )
            .await?;
            state.inbox_id = Some(inbox);
            Ok(())
        }
        Call::EmailQuery { limit } => {
            let account_id = state
                .account_id
                .clone()
                .ok_or_else(|| custom("no account"))?;
            let inbox = state.inbox_id.clone().ok_or_else(|| custom("no inbox"))?;
            let limit = *limit;
            let ids = api_call(
                user,
                context,
                state,
                name,
                "Email/query",
                jmap::email_query(&account_id, &inbox, limit),
                |body| jmap::query_ids(&jmap::method_response(body, "Email/query")?, limit),
            )
            .await?;
            state.ids = ids;
            Ok(())
        }
        Call::EmailGet(get) => {
            let account_id = state
                .account_id
                .clone()
                .ok_or_else(|| custom("no account"))?;
            let ids: Vec<String> = match get.ids {
                IdSelection::All => state.ids.clone(),
                IdSelection::First => state.ids.iter().take(1).cloned().collect(),
            };
            let arguments = jmap::email_get(&account_id, &ids, get);
            api_call(user, context, state, name, "Email/get", arguments, |body| {
                let arguments = jmap::method_response(body, "Email/get")?;
                jmap::check_email_get(&arguments, &ids, get.properties)
            })
            .await
        }
    }
}

/// POSTs a one-call JMAP request to the user's `apiUrl` and checks the
/// response body with `check` (which reads it with
/// [`jmap::method_response`]).
async fn api_call<T>(
    user: &mut GooseUser,
    context: &Context,
    state: &UserState,
    name: &'static str,
    method: &str,
    arguments: Value,
    check: impl FnOnce(&[u8]) -> Result<T, CheckError>,
) -> Result<T, Box<TransactionError>> {
    let body = serde_json::to_vec(&jmap::request(method, arguments))
        .map_err(|e| custom(&format!("{name}: request JSON: {e}")))?;
    let api_url = state.api_url.clone().ok_or_else(|| custom("no apiUrl"))?;
    let builder = user
        .client
        .post(api_url)
        .basic_auth(&state.username, Some(&context.password))
        .header(ACCEPT, "application/json")
        .header(CONTENT_TYPE, "application/json")
        .body(body);
    exchange(
        user,
        context,
        &state.username,
        name,
        GooseMethod::Post,
        builder,
        check,
    )
    .await
}

/// Sends one request through goose (which counts it under `name`), reads the
/// whole body, checks it, and records the time and outcome. A failure is
/// reported to goose with `set_failure`.
async fn exchange<T>(
    user: &mut GooseUser,
    context: &Context,
    username: &str,
    name: &'static str,
    method: GooseMethod,
    builder: RequestBuilder,
    check: impl FnOnce(&[u8]) -> Result<T, CheckError>,
) -> Result<T, Box<TransactionError>> {
    let request = GooseRequest::builder()
        .method(method)
        .name(name)
        .set_request_builder(builder)
        .build();
    let started = Instant::now();
    let GooseResponse {
        mut request,
        response,
    } = match user.request(request).await {
        Ok(response) => response,
        Err(error) => {
            let tag = format!("{name}: not sent");
            context.recorder.record(name, None, false);
            context.recorder.record_error(&tag);
            context.sample_failure(&tag, format!("{name} as {username}: not sent: {error}"));
            return Err(error);
        }
    };
    let outcome = match response {
        Err(error) => Err((None, transport_error(&error))),
        Ok(response) => {
            let status = response.status();
            match response.bytes().await {
                Err(error) => Err((None, transport_error(&error))),
                Ok(body) => {
                    let elapsed = started.elapsed();
                    if status != StatusCode::OK {
                        let problem = jmap::problem_type(&body).unwrap_or_default();
                        Err((
                            Some(elapsed),
                            CheckError::new(format!("HTTP {}", status.as_u16()), problem),
                        ))
                    } else {
                        match check(&body) {
                            Ok(value) => Ok((elapsed, value)),
                            Err(error) => Err((Some(elapsed), error)),
                        }
                    }
                }
            }
        }
    };
    match outcome {
        Ok((elapsed, value)) => {
            context.recorder.record(name, Some(elapsed), true);
            Ok(value)
        }
        Err((elapsed, error)) => {
            context.recorder.record(name, elapsed, false);
            let tag = format!("{name}: {}", error.tag);
            context.recorder.record_error(&tag);
            context.sample_failure(&tag, format!("{name} as {username}: {error}"));
            match user.set_failure(&tag, &mut request, None, Some(&error.detail)) {
                Err(error) => Err(error),
                Ok(()) => Err(custom(&tag)),
            }
        }
    }
}

fn transport_error(error: &reqwest::Error) -> CheckError {
    let tag = if error.is_timeout() {
        "timeout"
    } else if error.is_connect() {
        "connect error"
    } else if error.is_redirect() {
        "redirect refused"
    } else if error.is_body() || error.is_decode() {
        "body error"
    } else {
        "request error"
    };
    let mut detail = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        detail.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    CheckError::new(tag, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{EMAIL_GET_METADATA, EMAIL_QUERY, MAILBOX_GET, SESSION};

    fn config() -> RunConfig {
        RunConfig::new(
            "http://127.0.0.1:8080",
            Scenario::Adr0012,
            3600,
            Duration::from_secs(10),
            5,
            "secret",
        )
    }

    #[test]
    fn goose_gets_a_constant_arrival_rate() {
        let mut config = config();
        config.report_files = vec!["report.html".into(), "report.md".into()];
        let (host, plan) = config.validate().unwrap();
        let goose = goose_configuration(&config, &host, &plan);
        assert_eq!(goose.users, Some(10));
        assert_eq!(goose.increase_rate.as_deref(), Some("1"));
        assert_eq!(goose.iterations, Some(1));
        assert_eq!(goose.report_file, ["report.html", "report.md"]);
        assert_eq!(goose.host.as_deref(), Some("http://127.0.0.1:8080/"));
        assert!(goose.no_telnet);
        assert!(!goose.websocket);
        assert_eq!(goose.run_time, None);
    }

    #[test]
    fn remote_hosts_are_refused_before_anything_runs() {
        let mut config = config();
        config.host = "http://192.0.2.1:8080".into();
        assert!(config.validate().is_err());
        config.allow_remote_host = true;
        assert!(config.validate().is_ok());
    }

    fn stats(name: &str, count: u64, failures: u64) -> RequestStats {
        RequestStats {
            name: name.into(),
            count,
            failures,
            timed: count,
            mean_ms: 1.0,
            p50_ms: 1.0,
            p95_ms: 1.0,
            p99_ms: 1.0,
            max_ms: 1.0,
        }
    }

    fn report() -> RunReport {
        RunReport {
            scenario: Scenario::Adr0012,
            host: "http://127.0.0.1:8080".into(),
            users_per_hour: 3600,
            duration: Duration::from_secs(2),
            users: 2,
            users_started: 2,
            requests: vec![
                stats(SESSION, 2, 0),
                stats(MAILBOX_GET, 2, 0),
                stats(EMAIL_QUERY, 2, 0),
                stats(EMAIL_GET_METADATA, 20, 0),
            ],
            scenario_total: stats(SCENARIO_ROW, 2, 0),
            errors: Vec::new(),
            failure_samples: Vec::new(),
            goose_requests: 26,
            goose_failures: 0,
            elapsed: Duration::from_secs(3),
            client_cpu: Duration::from_millis(750),
            stopped_by_grace: false,
            api_url_rewritten: false,
        }
    }

    #[test]
    fn clean_reports_have_exact_counts_and_no_failures() {
        let report = report();
        assert!(report.is_clean(), "{:?}", report.problems());
        assert_eq!(report.request(EMAIL_GET_METADATA).unwrap().count, 20);
        assert_eq!(report.request(SCENARIO_ROW).unwrap().count, 2);
        assert_eq!(report.rows().len(), 5);
        let text = report.render();
        assert!(
            text.starts_with("adr-0012 on http://127.0.0.1:8080: 3600 users/hour for 2s = 2 users"),
            "{text}"
        );
        assert!(
            text.lines()
                .next()
                .unwrap()
                .ends_with("26 requests, 0 failed, 3.0s, load test CPU 25 % of a core"),
            "{text}"
        );
        assert!(text.contains(SCENARIO_ROW), "{text}");

        let mut failed = report.clone();
        failed.requests[3].failures = 1;
        failed.errors = vec![("Email/get metadata: notFound not empty".into(), 1)];
        assert_eq!(failed.failures(), 1);
        assert!(!failed.is_clean());
        assert!(failed.render().contains("notFound not empty"));

        let mut short = report.clone();
        short.requests[3].count = 19;
        assert_eq!(
            short.problems(),
            vec!["Email/get metadata: 19 requests, expected 20".to_string()]
        );

        let mut goose_failed = report;
        goose_failed.goose_failures = 1;
        assert!(!goose_failed.is_clean());
    }
}

//! Run settings shared by the command line and by tests that call the library:
//! [`RunConfig`], duration parsing, the loopback guard on hosts and the
//! translation of an arrival rate (users per hour) into goose settings.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use reqwest::Url;

use crate::scenario::Scenario;

/// The most users a single run may start; a larger `--users-per-hour` ×
/// `--duration` is refused rather than allocating goose users without end.
pub const MAX_USERS: usize = 100_000;

/// Default time a run may go on past its `--duration` before it is stopped.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// Default timeout of one HTTP request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The user name of account `n` (1-based): `user{n}@example.com`.
pub fn username(n: u64) -> String {
    format!("user{n}@example.com")
}

/// Everything one load-test run needs.
///
/// Build one with [`RunConfig::new`] and adjust the public fields; the
/// defaults are those of the command line.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Base URL of the JMAP server, such as `http://127.0.0.1:8080`.
    pub host: String,
    /// Which scenario every user runs once.
    pub scenario: Scenario,
    /// Arrival rate: users started per hour.
    pub users_per_hour: u64,
    /// How long users keep arriving.
    pub duration: Duration,
    /// Number of accounts `user1..userN@example.com`; users take them round-robin.
    pub accounts: u64,
    /// The one password of every account.
    pub password: String,
    /// Goose report files to write (`.html`, `.md`, `.json`); goose picks the
    /// format by extension.
    pub report_files: Vec<PathBuf>,
    /// Allow a `host` that is not a loopback address (127.0.0.0/8, `localhost`,
    /// `[::1]`). Off by default: traffic goes to this machine only.
    pub allow_remote_host: bool,
    /// How long the run may go on after `duration` (waiting for the last users
    /// to finish) before it is stopped.
    pub grace: Duration,
    /// Timeout of each HTTP request.
    pub request_timeout: Duration,
    /// Show goose's info log lines (user launches and so on) on the console.
    pub verbose: bool,
    /// Before the measured run, log in once as every account (not measured),
    /// so the server's credential cache is warm as in steady state and the
    /// figures are not those of a cold start (one argon2 per account).
    pub warm_up: bool,
}

impl RunConfig {
    /// A configuration with the command line's defaults for everything not given.
    pub fn new(
        host: impl Into<String>,
        scenario: Scenario,
        users_per_hour: u64,
        duration: Duration,
        accounts: u64,
        password: impl Into<String>,
    ) -> Self {
        RunConfig {
            host: host.into(),
            scenario,
            users_per_hour,
            duration,
            accounts,
            password: password.into(),
            report_files: Vec::new(),
            allow_remote_host: false,
            grace: DEFAULT_GRACE,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            verbose: false,
            warm_up: true,
        }
    }

    /// Checks the settings and returns the parsed host URL and the goose arrival plan.
    pub fn validate(&self) -> anyhow::Result<(Url, ArrivalPlan)> {
        let host = parse_host(&self.host, self.allow_remote_host)?;
        ensure!(self.accounts >= 1, "--accounts must be at least 1");
        ensure!(
            !self.request_timeout.is_zero(),
            "the request timeout must be positive"
        );
        let plan = ArrivalPlan::new(self.users_per_hour, self.duration)?;
        Ok((host, plan))
    }
}

/// Goose settings for a constant arrival rate: `--users`, `--increase-rate`
/// and `--iterations 1`, so users start at `users_per_hour / 3600` per second
/// for the duration and each runs its scenario once.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrivalPlan {
    /// Total users (goose `--users`): `users_per_hour × duration / 3600`,
    /// rounded up, at least 1.
    pub users: usize,
    /// Users started per second (goose `--increase-rate`), as goose parses it.
    pub increase_rate: String,
    /// Scenario runs per user (goose `--iterations`): always 1.
    pub iterations: usize,
}

impl ArrivalPlan {
    /// The plan for `users_per_hour` arriving over `duration`.
    pub fn new(users_per_hour: u64, duration: Duration) -> anyhow::Result<Self> {
        ensure!(users_per_hour >= 1, "--users-per-hour must be at least 1");
        ensure!(!duration.is_zero(), "--duration must be positive");
        let millis = duration.as_millis();
        let users = (u128::from(users_per_hour) * millis)
            .div_ceil(3_600_000)
            .max(1);
        ensure!(
            users <= MAX_USERS as u128,
            "{users_per_hour} users/hour for {} starts {users} users, more than the {MAX_USERS} allowed in one run",
            format_duration(duration)
        );
        let rate = users_per_hour as f64 / 3600.0;
        Ok(ArrivalPlan {
            users: users as usize,
            increase_rate: format!("{rate}"),
            iterations: 1,
        })
    }
}

/// Parses and checks a host URL: `http` or `https`, no credentials, and a
/// loopback host unless `allow_remote` is set.
pub fn parse_host(host: &str, allow_remote: bool) -> anyhow::Result<Url> {
    let url = Url::parse(host).with_context(|| format!("--host {host:?} is not a URL"))?;
    ensure!(
        matches!(url.scheme(), "http" | "https"),
        "--host {host:?} must be an http:// or https:// URL"
    );
    ensure!(
        url.username().is_empty() && url.password().is_none(),
        "--host {host:?} must not carry credentials; use --accounts and --password"
    );
    if !allow_remote && !is_loopback(&url) {
        bail!(
            "refusing --host {host:?}: it is not a loopback address (127.0.0.0/8, localhost, [::1]); \
             pass --allow-remote-host to load-test another machine on purpose"
        );
    }
    Ok(url)
}

/// Whether the URL's host is `localhost`, an address in 127.0.0.0/8 or `::1`.
pub fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

/// Parses a duration such as `10s`, `500ms`, `2m`, `1h30m` or `1.5s`; a bare
/// number is seconds.
pub fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let text = text.trim();
    ensure!(!text.is_empty(), "empty duration");
    if let Ok(seconds) = text.parse::<f64>() {
        return seconds_to_duration(seconds, text);
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        ensure!(
            number_len > 0,
            "bad duration {text:?}: expected a number before {rest:?}"
        );
        let number: f64 = rest[..number_len]
            .parse()
            .with_context(|| format!("bad duration {text:?}"))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale = match unit {
            "h" => 3600.0,
            "m" | "min" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "" => bail!("bad duration {text:?}: missing unit after {number}"),
            other => bail!("bad duration {text:?}: unknown unit {other:?} (use h, m, s or ms)"),
        };
        total += number * scale;
    }
    seconds_to_duration(total, text)
}

fn seconds_to_duration(seconds: f64, text: &str) -> anyhow::Result<Duration> {
    ensure!(
        seconds.is_finite() && seconds >= 0.0,
        "bad duration {text:?}"
    );
    Duration::try_from_secs_f64(seconds).with_context(|| format!("bad duration {text:?}"))
}

/// Formats a duration the way [`parse_duration`] reads it, such as `10s` or `1.5s`.
pub fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{}s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration(" 3s ").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1h30").is_err());
    }

    #[test]
    fn durations_format() {
        assert_eq!(format_duration(Duration::from_secs(10)), "10s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn arrival_plan_from_users_per_hour() {
        // 3600 users/hour = 1 user/s; 10 s → 10 users.
        let plan = ArrivalPlan::new(3600, Duration::from_secs(10)).unwrap();
        assert_eq!(
            plan,
            ArrivalPlan {
                users: 10,
                increase_rate: "1".into(),
                iterations: 1
            }
        );
        // 36000/h = 10/s for 10 s = 100 users.
        let plan = ArrivalPlan::new(36_000, Duration::from_secs(10)).unwrap();
        assert_eq!(plan.users, 100);
        assert_eq!(plan.increase_rate, "10");
        // Rounded up: 1000/h for 10 s = 2.78 users → 3.
        let plan = ArrivalPlan::new(1000, Duration::from_secs(10)).unwrap();
        assert_eq!(plan.users, 3);
        assert_eq!(plan.increase_rate.parse::<f64>().unwrap(), 1000.0 / 3600.0);
        // At least one user.
        let plan = ArrivalPlan::new(1, Duration::from_secs(1)).unwrap();
        assert_eq!(plan.users, 1);
        // Sub-second durations count.
        let plan = ArrivalPlan::new(7200, Duration::from_millis(1500)).unwrap();
        assert_eq!(plan.users, 3);
        assert!(ArrivalPlan::new(0, Duration::from_secs(10)).is_err());
        assert!(ArrivalPlan::new(10, Duration::ZERO).is_err());
        assert!(ArrivalPlan::new(u64::MAX / 4, Duration::from_secs(10)).is_err());
    }

    #[test]
    fn hosts_must_be_loopback_unless_allowed() {
        for ok in [
            "http://127.0.0.1:8080",
            "http://127.1.2.3",
            "http://localhost:8080/",
            "http://LOCALHOST",
            "http://[::1]:8080",
            "https://127.0.0.1",
        ] {
            parse_host(ok, false).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for refused in [
            "http://10.0.0.1",
            "http://192.168.1.1:8080",
            "http://example.com",
            "http://[::2]",
            "http://localhost.example.com",
            "http://0.0.0.0:8080",
        ] {
            assert!(parse_host(refused, false).is_err(), "{refused}");
            parse_host(refused, true).unwrap();
        }
        assert!(parse_host("ftp://127.0.0.1", true).is_err());
        assert!(parse_host("127.0.0.1:8080", false).is_err());
        assert!(parse_host("http://u:p@127.0.0.1", false).is_err());
    }

    #[test]
    fn usernames() {
        assert_eq!(username(1), "user1@example.com");
        assert_eq!(username(42), "user42@example.com");
    }
}

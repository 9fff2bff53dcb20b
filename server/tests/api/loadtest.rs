//! The load test against a real server: `fastview seed` fills a few
//! accounts, then every scenario of `fastview-loadtest` runs with a handful
//! of users for a few seconds: 0 failures and exactly the expected request
//! counts. (Speed is measured by the load test itself, never here.)

use std::time::Duration;

use fastview_loadtest::scenario::{EMAIL_GET_METADATA, EMAIL_QUERY};
use fastview_loadtest::{RunConfig, Scenario, run_scenario};

use crate::support::spawn_app;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_runs_clean_against_a_seeded_server() {
    let app = spawn_app().await;
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/demo");
    let seed_with = |accounts: &str, messages: &str| {
        app.cli()
            .args([
                "seed",
                "--accounts",
                accounts,
                "--messages-per-account",
                messages,
                "--from",
                demo,
                "--password",
                "load",
            ])
            .output()
            .expect("run fastview seed")
    };
    let seed = || seed_with("3", "12");
    for expected in [
        "seeded 3 accounts, 36 messages new, 0 already there",
        // Seeding again finds every message stored and adds nothing.
        "seeded 3 accounts, 0 messages new, 36 already there",
    ] {
        let output = seed();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains(expected), "{stdout}");
    }

    for scenario in Scenario::ALL {
        // 7,200 users/hour for 3 s: 6 users, each running the scenario once.
        let config = RunConfig::new(
            app.base.clone(),
            scenario,
            7_200,
            Duration::from_secs(3),
            3,
            "load",
        );
        let report = run_scenario(config).await.expect("run");
        assert!(report.is_clean(), "{}", report.render());
        assert_eq!(report.users_started, 6, "{}", report.render());
        // The process's CPU over the run (this test's server runs in it
        // too): some, and no more than every core for the whole run (one
        // more: a fractional CPU quota rounds `available_parallelism` down).
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32 + 1;
        assert!(
            report.client_cpu > Duration::ZERO && report.client_cpu <= report.elapsed * cores,
            "{:?} over {:?}",
            report.client_cpu,
            report.elapsed
        );
        for (name, expected) in report.expected_counts() {
            assert_eq!(
                report.request(name).map(|r| r.count),
                Some(expected),
                "{name}\n{}",
                report.render()
            );
        }
        assert_eq!(report.request(EMAIL_QUERY).map(|r| r.count), Some(6));
        if scenario == Scenario::Adr0012 {
            assert_eq!(
                report.request(EMAIL_GET_METADATA).map(|r| r.count),
                Some(60)
            );
        }
    }
    // An inbox larger than the 14 demo messages gets distinct copies: user1
    // keeps its 12, gains the other 2 and 6 second copies.
    let output = seed_with("1", "20");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("seeded 1 accounts, 8 messages new, 12 already there"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

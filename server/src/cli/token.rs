//! `fastview token create|list|revoke`: API tokens, accepted as
//! `Authorization: Bearer` (see `http::auth`). A token's secret is printed
//! once, by `create`; the store keeps only its SHA-256.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;

use super::GlobalArgs;
use super::account::parse_address;
use crate::account::{TOKEN_RECHECK, new_token_secret, token_digest};
use crate::store::{Account, NewToken, StoreError};

/// Token subcommands.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token for an account and print its secret (shown only now).
    Create {
        /// The account (its login address).
        #[arg(long, value_parser = parse_address)]
        account: String,
        /// A name to tell tokens apart in `token list` (e.g. the client).
        #[arg(long, default_value = "token")]
        name: String,
        /// Days until the token expires; without it, it never does.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=36_500))]
        expires_days: Option<u32>,
    },
    /// List an account's tokens: id, name, created, expires (never the secret).
    List {
        #[arg(long, value_parser = parse_address)]
        account: String,
    },
    /// Revoke a token by id: requests and open event streams with it stop
    /// within a few seconds on every server.
    Revoke {
        #[arg(long, value_parser = parse_address)]
        account: String,
        /// The token's id, as `token list` shows it.
        id: i64,
    },
}

/// A unix time as RFC 3339 UTC, for listing.
fn utc(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map_or_else(|| seconds.to_string(), |time| time.to_rfc3339())
}

/// Runs a token subcommand.
pub async fn run(global: &GlobalArgs, command: TokenCommand) -> anyhow::Result<ExitCode> {
    let app = global.open().await?;
    let account_of = |email: String| {
        let store = app.store.clone();
        async move {
            let found: Option<Account> = store.account_by_email(&email).await?;
            found.with_context(|| format!("no account {email}"))
        }
    };
    match command {
        TokenCommand::Create {
            account,
            name,
            expires_days,
        } => {
            if name.contains('\0') || name.chars().any(char::is_control) {
                bail!("a token name cannot hold control characters");
            }
            let account = account_of(account).await?;
            let secret = new_token_secret();
            let now = chrono::Utc::now().timestamp();
            let expires = expires_days.map(|days| now + i64::from(days) * 86_400);
            let token = NewToken {
                secret_sha256: &token_digest(&secret),
                name: &name,
                created_at: now,
                expires_at: expires,
            };
            match app.store.create_token(account.id, token).await {
                Ok(token) => {
                    eprintln!(
                        "token {} for {} ({}); the secret is shown only now:",
                        token.id,
                        account.email,
                        expires.map_or("never expires".into(), |at| format!("expires {}", utc(at)))
                    );
                    println!("{secret}");
                }
                Err(StoreError::NotFound) => bail!("no account {}", account.email),
                Err(error) => return Err(error.into()),
            }
        }
        TokenCommand::List { account } => {
            let account = account_of(account).await?;
            for token in app.store.tokens(account.id).await? {
                println!(
                    "{}\t{}\tcreated {}\t{}",
                    token.id,
                    token.name,
                    utc(token.created_at),
                    token
                        .expires_at
                        .map_or("never expires".into(), |at| format!("expires {}", utc(at)))
                );
            }
        }
        TokenCommand::Revoke { account, id } => {
            let account = account_of(account).await?;
            match app.store.revoke_token(account.id, id).await {
                Ok(()) => println!(
                    "revoked token {id} of {} (servers stop accepting it within {} s)",
                    account.email,
                    TOKEN_RECHECK.as_secs()
                ),
                Err(StoreError::NotFound) => bail!("{} has no token {id}", account.email),
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

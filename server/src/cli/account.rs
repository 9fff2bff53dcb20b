//! `fastview account add|list|passwd|remove`.

use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;

use super::GlobalArgs;
use crate::http::auth::{hash_password, normalize_address};
use crate::store::StoreError;

/// Account subcommands.
#[derive(Debug, Subcommand)]
pub enum AccountCommand {
    /// Create an account with the role mailboxes inbox, drafts, sent, trash, junk, archive.
    /// The address is stored in the one form logins are compared in (NFKC, lowercase).
    Add {
        email: String,
        /// The password (visible in the process list: prefer --password-stdin).
        #[arg(
            long,
            env = "FASTVIEW_PASSWORD",
            conflicts_with = "password_stdin",
            required_unless_present = "password_stdin"
        )]
        password: Option<String>,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// List accounts.
    List,
    /// Change an account's password (read from standard input).
    Passwd {
        email: String,
        #[arg(long, env = "FASTVIEW_PASSWORD")]
        password: Option<String>,
    },
    /// Remove an account and all its mail.
    Remove { email: String },
}

/// Reads one line from standard input (the password), without its line end.
pub fn read_password_line() -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        eprint!("password: ");
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the password")?;
    let password = line.trim_end_matches(['\r', '\n']).to_string();
    if password.is_empty() {
        bail!("the password is empty");
    }
    Ok(password)
}

/// Runs an account subcommand.
pub async fn run(global: &GlobalArgs, command: AccountCommand) -> anyhow::Result<ExitCode> {
    let app = global.open().await?;
    match command {
        AccountCommand::Add {
            email,
            password,
            password_stdin,
        } => {
            let password = match (password, password_stdin) {
                (Some(password), false) if !password.is_empty() => password,
                (_, true) => read_password_line()?,
                _ => bail!("the password is empty"),
            };
            let hash = tokio::task::spawn_blocking(move || hash_password(&password)).await??;
            match app
                .store
                .create_account(&normalize_address(&email), &hash)
                .await
            {
                Ok(account) => println!(
                    "created {} ({})",
                    account.email,
                    crate::jmap::ids::account_id(account.id)
                ),
                Err(StoreError::Conflict(message)) => bail!(message),
                Err(error) => return Err(error.into()),
            }
        }
        AccountCommand::List => {
            for account in app.store.list_accounts().await? {
                println!(
                    "{}\t{}",
                    crate::jmap::ids::account_id(account.id),
                    account.email
                );
            }
        }
        AccountCommand::Passwd { email, password } => {
            let password = match password {
                Some(password) if !password.is_empty() => password,
                _ => read_password_line()?,
            };
            let hash = tokio::task::spawn_blocking(move || hash_password(&password)).await??;
            match app
                .store
                .set_password(&normalize_address(&email), &hash)
                .await
            {
                Ok(()) => println!(
                    "password changed for {email} (servers that cached the old one accept it for up to {} s)",
                    crate::http::auth::CREDENTIAL_TTL.as_secs()
                ),
                Err(StoreError::NotFound) => bail!("no account {email}"),
                Err(error) => return Err(error.into()),
            }
        }
        AccountCommand::Remove { email } => {
            match app.store.remove_account(&normalize_address(&email)).await {
                Ok(()) => println!("removed {email}"),
                Err(StoreError::NotFound) => bail!("no account {email}"),
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! `fastview account add|list|passwd|set|remove|alias`.

use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use super::GlobalArgs;
use crate::account::{hash_password, normalize_address};
use crate::store::StoreError;

/// How `account add` and `account passwd` take a password.
#[derive(Debug, Args)]
pub struct PasswordArgs {
    /// The password (`passwd`: the new one; visible in the process list);
    /// without it, the first line of standard input (as with
    /// --password-stdin).
    #[arg(long, env = "FASTVIEW_PASSWORD", conflicts_with = "password_stdin")]
    password: Option<String>,
    /// Read the password from the first line of standard input (the
    /// default; accepted for scripts that say so).
    #[arg(long)]
    password_stdin: bool,
}

/// Account subcommands.
#[derive(Debug, Subcommand)]
pub enum AccountCommand {
    /// Create an account with the role mailboxes inbox, drafts, sent, trash, junk, archive.
    /// The address is stored in the one form logins are compared in (NFKC, lowercase).
    Add {
        #[arg(value_parser = parse_address)]
        email: String,
        #[command(flatten)]
        password: PasswordArgs,
        /// Storage quota: octets, or with a binary suffix (`500M`, `2G`, `1T`),
        /// or `none` (the default: no limit). Counts the account's messages
        /// and pending uploads (RFC 9425 `Quota/get`).
        #[arg(long, value_parser = parse_quota)]
        quota: Option<Quota>,
    },
    /// Change an account's settings.
    Set {
        #[arg(value_parser = parse_address)]
        email: String,
        /// Storage quota, as for `add` (`none` lifts it). Lowering it below
        /// what the account holds deletes nothing; new mail is refused.
        #[arg(long, value_parser = parse_quota)]
        quota: Quota,
    },
    /// List accounts.
    List,
    /// Change an account's password (read from standard input).
    Passwd {
        #[arg(value_parser = parse_address)]
        email: String,
        #[command(flatten)]
        password: PasswordArgs,
    },
    /// Remove an account and all its mail (rows at once, and the blobs no
    /// other account shares).
    Remove {
        #[arg(value_parser = parse_address)]
        email: String,
    },
    /// The further addresses an account may send as (RFC 8621 Identity
    /// `email`): a user may create identities for these.
    #[command(subcommand)]
    Alias(AliasCommand),
}

/// `fastview account alias add|remove|list`.
#[derive(Debug, Subcommand)]
pub enum AliasCommand {
    /// Let the account send as ALIAS (`*@example.com`: any address of the
    /// domain). An address is one account's login or alias, not two.
    Add {
        #[arg(value_parser = parse_address)]
        email: String,
        #[arg(value_parser = parse_address)]
        alias: String,
    },
    /// Stop the account sending as ALIAS (its identities stay, and are
    /// refused when they send).
    Remove {
        #[arg(value_parser = parse_address)]
        email: String,
        #[arg(value_parser = parse_address)]
        alias: String,
    },
    /// List the account's aliases, one per line.
    List {
        #[arg(value_parser = parse_address)]
        email: String,
    },
}

/// An account address as typed, in the one form logins are compared in
/// ([`normalize_address`]): every subcommand names accounts this way.
pub(super) fn parse_address(value: &str) -> Result<String, String> {
    Ok(normalize_address(value))
}

/// A `--quota` value: octets, or `None` for no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota(pub Option<i64>);

/// Parses `none`, `12345`, `500K`, `500M`, `2G`, `1T` (binary multiples;
/// `KiB`, `MB` and the like are read the same way).
pub fn parse_quota(text: &str) -> Result<Quota, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("none") {
        return Ok(Quota(None));
    }
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = text[digits.len()..].to_ascii_lowercase();
    let shift = match unit.trim_end_matches('b').trim_end_matches('i') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(format!("unknown unit {unit:?} (use K, M, G or T, or none)")),
    };
    let number: i64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a size (e.g. 500M, 2G or none)"))?;
    number
        .checked_mul(1 << shift)
        .filter(|octets| *octets >= 0)
        .map(|octets| Quota(Some(octets)))
        .ok_or_else(|| format!("{text:?} is too large"))
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
            password:
                PasswordArgs {
                    password,
                    password_stdin,
                },
            quota,
        } => {
            if let Some(upstream) = app.store.upstream_source().await? {
                bail!(
                    "{} mirrors the IMAP server {upstream}: an account is made when its \
                     user first logs in with the IMAP credentials; `account add` cannot add one",
                    app.data_dir.display()
                );
            }
            let password = match (password, password_stdin) {
                (Some(password), false) if !password.is_empty() => password,
                (Some(_), false) => bail!("the password is empty"),
                _ => read_password_line()?,
            };
            let hash = tokio::task::spawn_blocking(move || hash_password(&password)).await??;
            match app.store.create_account(&email, &hash).await {
                Ok(account) => println!(
                    "created {} ({})",
                    account.email,
                    crate::jmap::ids::account_id(account.id)
                ),
                Err(StoreError::Conflict(message)) => bail!(message),
                Err(error) => return Err(error.into()),
            }
            if let Some(Quota(octets @ Some(_))) = quota {
                app.store.set_quota(&email, octets).await?;
            }
        }
        AccountCommand::Set {
            email,
            quota: Quota(octets),
        } => match app.store.set_quota(&email, octets).await {
            Ok(()) => match octets {
                Some(octets) => println!("quota of {email}: {octets} octets"),
                None => println!("quota of {email}: none"),
            },
            Err(StoreError::NotFound) => bail!("no account {email}"),
            Err(error) => return Err(error.into()),
        },
        AccountCommand::List => list(&app).await?,
        AccountCommand::Passwd { email, password } => {
            let password = match password.password {
                Some(password) if !password.is_empty() => password,
                _ => read_password_line()?,
            };
            let hash = tokio::task::spawn_blocking(move || hash_password(&password)).await??;
            match app.store.set_password(&email, &hash).await {
                Ok(()) => println!(
                    "password changed for {email} (servers that cached the old one accept it for up to {} s)",
                    crate::account::CREDENTIAL_TTL.as_secs()
                ),
                Err(StoreError::NotFound) => bail!("no account {email}"),
                Err(error) => return Err(error.into()),
            }
        }
        AccountCommand::Remove { email } => match app.store.remove_account(&email).await {
            Ok(blobs) => {
                let deleted =
                    crate::mail::gc::delete_unreferenced(app.store.as_ref(), &app.blobs, &blobs)
                        .await?;
                println!(
                    "removed {email} and {deleted} blobs no other account shares (servers that \
                     cached its password accept it for up to {} s, with no mail left)",
                    crate::account::CREDENTIAL_TTL.as_secs()
                );
            }
            Err(StoreError::NotFound) => bail!("no account {email}"),
            Err(error) => return Err(error.into()),
        },
        AccountCommand::Alias(command) => alias(app.store.as_ref(), command).await?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `account list`: each account's id and login; behind an IMAP upstream,
/// when it last finished a sync and how its task watches the upstream.
async fn list(app: &crate::app::App) -> anyhow::Result<()> {
    // Behind an IMAP upstream: when each account last finished a
    // sync, i.e. how far behind its mirror may be.
    let upstream = app.store.upstream_source().await?.is_some();
    // And how its sync task learns of changes there (ADR 0008).
    let synced: std::collections::HashMap<i64, (i64, String)> = app
        .store
        .upstream_syncs()
        .await?
        .into_iter()
        .map(|(account, at, watch)| (account, (at, watch)))
        .collect();
    let now = chrono::Utc::now().timestamp();
    for account in app.store.list_accounts().await? {
        let lag = match synced.get(&account.id) {
            _ if !upstream => String::new(),
            Some((at, watch)) if watch.is_empty() => {
                format!("\tsynced {} s ago", (now - at).max(0))
            }
            Some((at, watch)) => {
                format!("\tsynced {} s ago\twatch {watch}", (now - at).max(0))
            }
            None => "\tnot synced yet".to_string(),
        };
        println!(
            "{}\t{}{lag}",
            crate::jmap::ids::account_id(account.id),
            account.email
        );
    }
    Ok(())
}

/// Runs one `account alias` subcommand.
async fn alias(store: &dyn crate::store::Store, command: AliasCommand) -> anyhow::Result<()> {
    let (AliasCommand::Add { email, .. }
    | AliasCommand::Remove { email, .. }
    | AliasCommand::List { email }) = &command;
    let email = email.clone();
    let Some(account) = store.account_by_email(&email).await? else {
        bail!("no account {email}");
    };
    match command {
        AliasCommand::Add { alias, .. } => {
            let valid = alias
                .rsplit_once('@')
                .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'));
            if !valid {
                bail!("{alias} is not an address (local@domain, or *@domain)");
            }
            match store.add_alias(account.id, &alias).await {
                Ok(()) => println!("{email} may send as {alias}"),
                Err(StoreError::Conflict(why)) => bail!("{why}"),
                Err(error) => return Err(error.into()),
            }
        }
        AliasCommand::Remove { alias, .. } => {
            if !store.remove_alias(account.id, &alias).await? {
                bail!("{email} has no alias {alias}");
            }
            println!("{email} may no longer send as {alias}");
        }
        AliasCommand::List { .. } => {
            for alias in store.aliases(account.id).await? {
                println!("{alias}");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Quota, parse_quota};

    #[test]
    fn quotas_parse_with_binary_units() {
        let cases = [
            ("none", Ok(Quota(None))),
            ("NONE", Ok(Quota(None))),
            ("12345", Ok(Quota(Some(12_345)))),
            ("500K", Ok(Quota(Some(500 << 10)))),
            ("500M", Ok(Quota(Some(500 << 20)))),
            ("2G", Ok(Quota(Some(2 << 30)))),
            ("2GiB", Ok(Quota(Some(2 << 30)))),
            ("1tb", Ok(Quota(Some(1 << 40)))),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_quota(text), expected, "{text}");
        }
        for bad in ["", "G", "2X", "-1", "99999999999T", "1.5G"] {
            assert!(parse_quota(bad).is_err(), "{bad}");
        }
    }
}

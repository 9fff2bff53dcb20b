//! A throwaway Dovecot 2.3 for the tests (issue 18): `dovecot-imapd` as
//! installed, run with a config in a temporary folder (Maildir, users with
//! passwords in a passwd-file of their own, Drafts/Sent/Trash/Archive made
//! and subscribed, an optional master login) on a free loopback port.
//! Without `dovecot` a test is skipped, unless `FASTVIEW_TEST_REQUIRE`
//! names `imap`. The twin of `cyrus.rs`, included the same way.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A running Dovecot, stopped when dropped.
pub struct Dovecot {
    dir: tempfile::TempDir,
    port: u16,
}

impl Dovecot {
    /// Starts Dovecot with one account per (login, password) and, with
    /// `master` (user, password), a master login: any user logs in as
    /// `user*master` with the master's password, or by SASL PLAIN with the
    /// user as authorization identity. `None` (after
    /// [`super::require::require`]) when Dovecot is not installed.
    pub fn start(users: &[(&str, &str)], master: Option<(&str, &str)>) -> Option<Self> {
        if Command::new("dovecot").arg("--version").output().is_err() {
            super::require::require("imap", "no dovecot (apt-get install dovecot-imapd)");
            return None;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_path_buf();
        let root = root.as_path();
        // Dovecot's mail processes run as the dovecot user.
        set_mode(root, 0o755);
        std::fs::create_dir(root.join("mail")).unwrap();
        set_mode(&root.join("mail"), 0o777);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dovecot = Self { dir, port };
        dovecot.write_passwords(users);
        let master_passdb = match master {
            Some((user, password)) => {
                std::fs::write(
                    root.join("masters"),
                    format!("{user}:{{PLAIN}}{password}::::::\n"),
                )
                .unwrap();
                format!(
                    "auth_master_user_separator = *\npassdb {{\n  driver = passwd-file\n  \
                     master = yes\n  args = scheme=PLAIN username_format=%u {}/masters\n}}\n",
                    root.display()
                )
            }
            None => String::new(),
        };
        std::fs::write(dovecot.config(), config(root, port, &master_passdb)).unwrap();
        dovecot.start_again();
        Some(dovecot)
    }

    /// The config file.
    pub fn config(&self) -> PathBuf {
        self.dir.path().join("dovecot.conf")
    }

    /// The instance's folder (mail under `mail/<user>`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The IMAP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Replaces the passwd-file: every user's password. (Dovecot notices a
    /// changed passwd-file by its mtime, in seconds: a caller that changes
    /// it twice within a second waits first.)
    pub fn write_passwords(&self, users: &[(&str, &str)]) {
        let passwd: String = users
            .iter()
            .map(|(user, password)| format!("{user}:{{PLAIN}}{password}::::::\n"))
            .collect();
        std::fs::write(self.dir.path().join("passwd"), passwd).unwrap();
    }

    /// Starts the Dovecot of this config (again, after [`Dovecot::stop`],
    /// with the same mail) and waits until it listens.
    pub fn start_again(&self) {
        let status = Command::new("dovecot")
            .arg("-c")
            .arg(self.config())
            .status()
            .expect("run dovecot");
        assert!(status.success(), "dovecot did not start: {}", self.log());
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "dovecot is not listening: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops Dovecot (an outage) and waits until it no longer listens.
    pub fn stop(&self) {
        let _ = Command::new("doveadm")
            .arg("-c")
            .arg(self.config())
            .arg("stop")
            .output();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(Instant::now() < deadline, "dovecot still listens");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Dovecot's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dovecot.log")).unwrap_or_default()
    }
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("dovecot's log:\n{}", self.log());
        }
        let _ = Command::new("doveadm")
            .arg("-c")
            .arg(self.config())
            .arg("stop")
            .output();
        let pid =
            std::fs::read_to_string(self.dir.path().join("run/master.pid")).unwrap_or_default();
        if let Ok(pid) = pid.trim().parse::<i32>() {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

/// Sets the permission bits of `path`.
pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// dovecot.conf for an instance in `root` listening on `port`.
fn config(root: &Path, port: u16, master_passdb: &str) -> String {
    let root_text = root.display();
    format!(
        r#"protocols = imap
listen = 127.0.0.1
base_dir = {root_text}/run
state_dir = {root_text}/state
log_path = {root_text}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = dovenull
default_internal_user = dovecot
mail_uid = dovecot
mail_gid = dovecot
first_valid_uid = 1
mail_location = maildir:{root_text}/mail/%u
protocol imap {{
  mail_max_userip_connections = 100
}}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root_text}/passwd
}}
userdb {{
  driver = static
  args = uid=dovecot gid=dovecot home={root_text}/mail/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
{master_passdb}
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Drafts {{
    special_use = \Drafts
    auto = subscribe
  }}
  mailbox Sent {{
    special_use = \Sent
    auto = subscribe
  }}
  mailbox Trash {{
    special_use = \Trash
    auto = subscribe
  }}
  mailbox Archive {{
    special_use = \Archive
    auto = subscribe
  }}
}}
"#
    )
}

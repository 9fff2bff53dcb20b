//! A throwaway Cyrus IMAP 3.6 for the tests (issue 45): Debian's packages
//! unpacked by `tools/cyrus-unpack.sh` (never installed: `cyrus-imapd`
//! conflicts with `dovecot-imapd`) into the folder that
//! `FASTVIEW_TEST_CYRUS_ROOT` names, and run from there with a config in a
//! temporary folder: IMAP and HTTP (JMAP, `conversations: yes`) on two free
//! loopback ports, users with passwords in a sasldb of their own (a wrong
//! one refused at once: `failedloginpause: 0`), INBOX and the special-use
//! folders made and subscribed at first login (as the Dovecot of
//! `dovecot.rs` has them); otherwise Cyrus's defaults, as an operator
//! would run it (`munge8bit`: the 8-bit octets of an APPENDed message's
//! headers become `X`). Without the variable a test is skipped, unless
//! `FASTVIEW_TEST_REQUIRE` names `cyrus`. Shared by the test binaries
//! (included with `#[path]`, beside `require.rs` as `require`).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use super::imaplib::{self, quoted};
use std::time::{Duration, Instant};

/// The environment variable naming the unpacked root (the folder holding
/// `usr/lib/cyrus/bin/master`), as `tools/cyrus-unpack.sh` prints it.
pub const CYRUS_ROOT_VAR: &str = "FASTVIEW_TEST_CYRUS_ROOT";

/// The administrator Cyrus has besides the users (`admins:`).
pub const CYRUS_ADMIN: &str = "cyrus-admin";

/// The administrator's password.
pub const CYRUS_ADMIN_PASSWORD: &str = "cyrus-admin-password";

/// The `servername`, and the SASL realm of a login without a domain.
const SERVER_NAME: &str = "cyrus";

/// The folders made beside INBOX at a user's first login, each with the
/// special use of its name.
const FOLDERS: [&str; 4] = ["Drafts", "Sent", "Trash", "Archive"];

/// A running Cyrus (its `master` and the services it forks, one process
/// group), stopped when dropped.
pub struct Cyrus {
    dir: tempfile::TempDir,
    /// The unpacked packages.
    root: PathBuf,
    run_as: RunAs,
    /// `master`, replaced when [`Cyrus::start_again`] starts it anew.
    master: Mutex<Child>,
    imap_port: u16,
    http_port: u16,
}

impl Cyrus {
    /// Starts Cyrus with one account per (login, password), logged in once
    /// over IMAP so that its INBOX and [`FOLDERS`] exist; `None` (after
    /// [`super::require::require`]) when [`CYRUS_ROOT_VAR`] is unset. A
    /// login with a domain (`ann@example.com`) is that domain's user
    /// (`virtdomains: userid`).
    pub fn start(users: &[(&str, &str)]) -> Option<Self> {
        let Some(root) = std::env::var_os(CYRUS_ROOT_VAR).filter(|root| !root.is_empty()) else {
            super::require::require(
                "cyrus",
                &format!("{CYRUS_ROOT_VAR} is unset (tools/cyrus-unpack.sh)"),
            );
            return None;
        };
        let root = PathBuf::from(root);
        let master = root.join("usr/lib/cyrus/bin/master");
        assert!(
            master.is_file(),
            "{CYRUS_ROOT_VAR}={} holds no usr/lib/cyrus/bin/master: run tools/cyrus-unpack.sh",
            root.display()
        );
        let run_as = run_as();
        if let RunAs::Nobody = run_as {
            assert!(
                nobody_can_run(&master),
                "nobody (whom Cyrus runs as under root) cannot run {}: unpack it where \
                 every user can read it, e.g. tools/cyrus-unpack.sh /tmp/cyrus",
                master.display()
            );
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let ports = (free_port(), free_port());
        let setup = Setup {
            root: &root,
            dir: dir.path(),
            run_as: &run_as,
        };
        setup.write(users, ports);
        let master = Mutex::new(setup.spawn_master());
        let cyrus = Self {
            dir,
            root,
            run_as,
            master,
            imap_port: ports.0,
            http_port: ports.1,
        };
        cyrus.wait_until_listening();
        for (login, password) in users {
            if let Err(answer) = cyrus.imap_login(login, password) {
                panic!(
                    "cyrus refused {login}'s first login: {answer}\n{}",
                    cyrus.log()
                );
            }
        }
        Some(cyrus)
    }

    fn setup(&self) -> Setup<'_> {
        Setup {
            root: &self.root,
            dir: self.dir.path(),
            run_as: &self.run_as,
        }
    }

    /// Stops Cyrus (an outage: `master` and every service it forked) and
    /// waits until it no longer listens.
    pub fn stop(&self) {
        stop_group(&mut self.master.lock().unwrap());
        let deadline = Instant::now() + Duration::from_secs(10);
        for port in [self.imap_port, self.http_port] {
            while TcpStream::connect(("127.0.0.1", port)).is_ok() {
                assert!(Instant::now() < deadline, "cyrus still listens on {port}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Starts Cyrus again after [`Cyrus::stop`], with the same mail, and
    /// waits until it listens.
    pub fn start_again(&self) {
        *self.master.lock().unwrap() = self.setup().spawn_master();
        self.wait_until_listening();
    }

    /// Sets `login`'s password (Cyrus reads the sasldb at each login).
    pub fn set_password(&self, login: &str, password: &str) {
        self.setup().set_password(login, password);
        if let RunAs::Nobody = self.run_as {
            let status = Command::new("chown")
                .args(["-R", "nobody:"])
                .arg(self.dir.path().join("sasldb2"))
                .status()
                .expect("chown");
            assert!(status.success(), "chown nobody: the sasldb");
        }
    }

    /// The instance's folder (mail under `spool/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The IMAP port on 127.0.0.1.
    pub fn imap_port(&self) -> u16 {
        self.imap_port
    }

    /// The JMAP session's URL (RFC 8620 §2.2), which redirects to `/jmap/`.
    pub fn jmap_url(&self) -> String {
        format!("http://127.0.0.1:{}/.well-known/jmap", self.http_port)
    }

    /// The base of the HTTP server, `http://127.0.0.1:port`.
    pub fn http_base(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// Cyrus's own JMAP session for `login`, and its API URL made
    /// absolute (Cyrus names it by path).
    pub async fn session(&self, login: &str, password: &str) -> (serde_json::Value, String) {
        let session: serde_json::Value = reqwest::Client::new()
            .get(self.jmap_url())
            .basic_auth(login, Some(password))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let api_url = format!(
            "{}{}",
            self.http_base(),
            session["apiUrl"].as_str().unwrap()
        );
        (session, api_url)
    }

    /// What Cyrus said: master's output, then each user's protocol log
    /// (telemetry, `configdirectory/log/<user>`). Cyrus logs the rest to
    /// syslog, which a test does not see.
    pub fn log(&self) -> String {
        let mut log =
            std::fs::read_to_string(self.dir.path().join("master.log")).unwrap_or_default();
        let mut files = Vec::new();
        collect_files(&self.dir.path().join("conf/log"), &mut files);
        files.sort();
        for file in files {
            let text = std::fs::read(&file).unwrap_or_default();
            log.push_str(&format!(
                "\n== {}\n{}",
                file.display(),
                String::from_utf8_lossy(&text)
            ));
        }
        log
    }

    /// Logs in over IMAP and out again: `Ok` on `OK`, else the answer.
    pub fn imap_login(&self, login: &str, password: &str) -> Result<(), String> {
        let stream =
            TcpStream::connect(("127.0.0.1", self.imap_port)).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .map_err(|e| e.to_string())?;
        let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
        let mut reader = BufReader::new(stream);
        read_tagged(&mut reader, None)?;
        let command = format!("a LOGIN {} {}\r\n", quoted(login), quoted(password));
        writer
            .write_all(command.as_bytes())
            .map_err(|e| e.to_string())?;
        let answer = read_tagged(&mut reader, Some("a"))?;
        let _ = writer.write_all(b"b LOGOUT\r\n");
        if answer.starts_with("a OK") {
            Ok(())
        } else {
            Err(answer)
        }
    }

    /// APPENDs `messages` to `mailbox` (its IMAP name, modified UTF-7 for
    /// non-ASCII) with `flags` and INTERNALDATE `base_time + index`.
    pub fn append(
        &self,
        (login, password): (&str, &str),
        mailbox: &str,
        messages: &[Vec<u8>],
        flags: &str,
        base_time: i64,
    ) {
        let log = || self.log();
        let what = (messages, flags);
        imaplib::append(
            self.imap_port,
            (login, password),
            mailbox,
            what,
            base_time,
            &log,
        );
    }

    fn wait_until_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        for port in [self.imap_port, self.http_port] {
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "cyrus is not listening on {port}: {}",
                    self.log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

impl Drop for Cyrus {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("cyrus's log:\n{}", self.log());
        }
        if let Ok(master) = self.master.get_mut() {
            stop_group(master);
        }
    }
}

/// Stops `master` and every service it forked: they share master's process
/// group.
fn stop_group(master: &mut Child) {
    let group = format!("-{}", master.id());
    let _ = Command::new("kill").args(["-TERM", "--", &group]).output();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = master.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill").args(["-KILL", "--", &group]).output();
    let _ = master.wait();
}

/// What [`Cyrus::start`] writes its config from.
struct Setup<'a> {
    /// The unpacked packages.
    root: &'a Path,
    /// The instance's folder: config, databases, spool, sockets, logs.
    dir: &'a Path,
    /// The user Cyrus's processes run as (it refuses root).
    run_as: &'a RunAs,
}

/// Who Cyrus runs as: the test's own user, or, when the test runs as root,
/// `nobody`, which then owns the instance's folder.
enum RunAs {
    Me(String),
    Nobody,
}

impl Setup<'_> {
    fn write(&self, users: &[(&str, &str)], (imap_port, http_port): (u16, u16)) {
        for folder in ["conf/log", "spool", "sieve", "socket"] {
            std::fs::create_dir_all(self.dir.join(folder)).unwrap();
        }
        for (login, _) in users {
            // Telemetry: Cyrus logs a user's sessions when this folder exists.
            std::fs::create_dir_all(self.dir.join("conf/log").join(login)).unwrap();
        }
        std::fs::write(self.dir.join("imapd.conf"), self.imapd_conf()).unwrap();
        std::fs::write(
            self.dir.join("cyrus.conf"),
            self.cyrus_conf(imap_port, http_port),
        )
        .unwrap();
        let admin = [(CYRUS_ADMIN, CYRUS_ADMIN_PASSWORD)];
        for (login, password) in users.iter().chain(&admin) {
            self.set_password(login, password);
        }
        if let RunAs::Nobody = self.run_as {
            let status = Command::new("chown")
                .args(["-R", "nobody:"])
                .arg(self.dir)
                .status()
                .expect("chown");
            assert!(status.success(), "chown -R nobody: {}", self.dir.display());
        }
    }

    fn imapd_conf(&self) -> String {
        let dir = self.dir.display();
        let user = match self.run_as {
            RunAs::Me(name) => name.as_str(),
            RunAs::Nobody => "nobody",
        };
        let folders = FOLDERS.join(" | ");
        let special_uses: String = FOLDERS
            .iter()
            .map(|name| format!("xlist-{}: {name}\n", name.to_lowercase()))
            .collect();
        format!(
            "configdirectory: {dir}/conf
defaultpartition: default
partition-default: {dir}/spool
sievedir: {dir}/sieve
lmtpsocket: {dir}/socket/lmtp
idlesocket: {dir}/socket/idle
notifysocket: {dir}/socket/notify
servername: {SERVER_NAME}
cyrus_user: {user}
admins: {CYRUS_ADMIN}
virtdomains: userid
unixhierarchysep: yes
altnamespace: yes
allowplaintext: yes
sasl_pwcheck_method: auxprop
sasl_auxprop_plugin: sasldb
sasl_sasldb_path: {dir}/sasldb2
sasl_mech_list: PLAIN LOGIN
failedloginpause: 0
autocreate_quota: 0
autocreate_inbox_folders: {folders}
autocreate_subscribe_folders: {folders}
{special_uses}conversations: yes
conversations_db: twoskip
httpmodules: jmap
httpallowcompress: no
"
        )
    }

    fn cyrus_conf(&self, imap_port: u16, http_port: u16) -> String {
        let bin = self.root.join("usr/lib/cyrus/bin");
        let bin = bin.display();
        let config = self.dir.join("imapd.conf");
        let config = config.display();
        format!(
            "START {{
}}
SERVICES {{
  imap cmd=\"{bin}/imapd -C {config}\" listen=\"127.0.0.1:{imap_port}\" prefork=0
  http cmd=\"{bin}/httpd -C {config}\" listen=\"127.0.0.1:{http_port}\" prefork=0
}}
EVENTS {{
}}
DAEMON {{
  idled cmd=\"{bin}/idled -C {config}\"
}}
"
        )
    }

    /// Adds `login` with `password` to the sasldb: a login with a domain
    /// is that domain's user, one without is the server's.
    fn set_password(&self, login: &str, password: &str) {
        let (name, realm) = login.rsplit_once('@').unwrap_or((login, SERVER_NAME));
        let mut child = self
            .command(self.root.join("usr/sbin/saslpasswd2"))
            .args(["-p", "-c", "-f"])
            .arg(self.dir.join("sasldb2"))
            .args(["-u", realm, name])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("saslpasswd2");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(password.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "saslpasswd2 {login}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Starts `master` in a process group of its own, its output in
    /// `master.log`.
    fn spawn_master(&self) -> Child {
        let log = std::fs::File::create(self.dir.join("master.log")).unwrap();
        self.command(self.root.join("usr/lib/cyrus/bin/master"))
            .arg("-C")
            .arg(self.dir.join("imapd.conf"))
            .arg("-M")
            .arg(self.dir.join("cyrus.conf"))
            .arg("-p")
            .arg(self.dir.join("master.pid"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start cyrus master")
    }

    /// A command for one of the unpacked programs, finding the unpacked
    /// libraries (and SASL plugins, if any were unpacked) first.
    fn command(&self, program: PathBuf) -> Command {
        let mut library_dirs = Vec::new();
        let mut plugin_dirs = Vec::new();
        for lib in ["lib", "usr/lib"] {
            let Ok(entries) = std::fs::read_dir(self.root.join(lib)) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if entry.file_name().to_string_lossy().ends_with("-linux-gnu") {
                    if path.join("sasl2").is_dir() {
                        plugin_dirs.push(path.join("sasl2"));
                        plugin_dirs
                            .push(Path::new("/usr/lib").join(entry.file_name()).join("sasl2"));
                    }
                    library_dirs.push(path);
                }
            }
        }
        let mut command = Command::new(program);
        command.env(
            "LD_LIBRARY_PATH",
            std::env::join_paths(library_dirs).unwrap(),
        );
        if !plugin_dirs.is_empty() {
            command.env("SASL_PATH", std::env::join_paths(plugin_dirs).unwrap());
        }
        command
    }
}

fn run_as() -> RunAs {
    let id = |flag: &str| {
        let output = Command::new("id").arg(flag).output().expect("id");
        String::from_utf8(output.stdout).unwrap().trim().to_string()
    };
    if id("-u") == "0" {
        RunAs::Nobody
    } else {
        RunAs::Me(id("-un"))
    }
}

/// Whether `nobody` may run `program` (every folder above it searchable).
fn nobody_can_run(program: &Path) -> bool {
    Command::new("runuser")
        .args(["-u", "nobody", "--", "test", "-x"])
        .arg(program)
        .status()
        .is_ok_and(|status| status.success())
}

/// A loopback port free now (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Reads lines up to the one tagged `tag` (or, for `None`, the greeting);
/// returns it.
fn read_tagged(reader: &mut impl BufRead, tag: Option<&str>) -> Result<String, String> {
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) => return Err("the connection closed".to_string()),
            Ok(_) => {}
            Err(error) => return Err(error.to_string()),
        }
        let done = match tag {
            None => line.starts_with("* "),
            Some(tag) => line.starts_with(&format!("{tag} ")),
        };
        if done {
            return Ok(line.trim_end().to_string());
        }
    }
}

fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, files);
        } else {
            files.push(path);
        }
    }
}

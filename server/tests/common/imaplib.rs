//! Python's imaplib as "another IMAP client" of the servers the tests start
//! (`dovecot.rs`, `cyrus.rs`): a script run with `m`, a connection logged
//! in, and APPENDs of messages from a temporary folder.

use std::process::Command;

/// Runs Python with `m`, an imaplib connection to 127.0.0.1:`port` logged
/// in as `login`; returns what it prints (panics, with the server's `log`,
/// when it fails).
pub fn run(
    port: u16,
    (login, password): (&str, &str),
    code: &str,
    log: &dyn Fn() -> String,
) -> String {
    let script = format!(
        "import imaplib, sys\nm = imaplib.IMAP4('127.0.0.1', {port})\nm.login({login:?}, {password:?})\n{code}\nm.logout()\n"
    );
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .output()
        .expect("python3");
    assert!(
        output.status.success(),
        "imaplib: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        log()
    );
    String::from_utf8(output.stdout).unwrap()
}

/// APPENDs `messages` to `mailbox` (its IMAP name, modified UTF-7 for
/// non-ASCII) with `flags` and INTERNALDATE `base_time + index`, as [`run`]
/// would.
pub fn append(
    port: u16,
    login: (&str, &str),
    mailbox: &str,
    (messages, flags): (&[Vec<u8>], &str),
    base_time: i64,
    log: &dyn Fn() -> String,
) {
    let folder = tempfile::tempdir().unwrap();
    for (index, raw) in messages.iter().enumerate() {
        std::fs::write(folder.path().join(format!("{index:05}")), raw).unwrap();
    }
    let code = format!(
        "import os\nfolder = {:?}\nfor i, name in enumerate(sorted(os.listdir(folder))):\n    \
         data = open(os.path.join(folder, name), 'rb').read()\n    \
         r = m.append({:?}, {flags:?} or None, imaplib.Time2Internaldate({base_time} + i), data)\n    \
         assert r[0] == 'OK', r",
        folder.path().display().to_string(),
        quoted(mailbox),
    );
    run(port, login, &code, log);
}

/// An IMAP quoted string (RFC 3501 §4.3).
pub fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

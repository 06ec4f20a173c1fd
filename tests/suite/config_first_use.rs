//! A first start goes wrong loudly: what `run` would fail on (or start
//! uselessly), `check-config` refuses too, naming the key or the flag;
//! errors say each cause once and only the hints that apply; the help of
//! each command lists only what it uses.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;

use super::openai_provider::complete;
use super::openai_provider::options;
use super::openai_provider::request;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::process::BIN;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;

/// A fleet that starts: `[host]` pointing into `dir` with `host` lines
/// added, then a user, a scripted provider and a bot.
fn fleet_text(dir: &Path, host: &str) -> String {
    format!(
        "[host]\ndata_dir = \"{}\"\nlisten = \"127.0.0.1:0\"\n{host}\n\
         [[users]]\nid = \"alice\"\ntoken = \"alice-secret-token\"\n\n\
         [providers.s]\nkind = \"scripted\"\nscript = \"s.toml\"\n\n\
         [[bots]]\nid = \"r\"\nname = \"R\"\nowner = \"alice\"\nprovider = \"s\"\ntools = [\"SendMessage\"]\n",
        dir.join("data").display()
    )
}

/// Writes `fleet.toml` with `text` and the echo script into `dir`.
fn write(dir: &Path, text: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("s.toml"), ECHO).unwrap();
    let path = dir.join("fleet.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `botfleet ARGS` in `cwd`. Returns (exit code, stdout, stderr); a
/// command still running after a while (a `run` that started) is stopped
/// and reported as exit code -1.
async fn botfleet(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let child = tokio::process::Command::new(BIN)
        .args(args)
        .current_dir(cwd)
        .env("RUST_LOG", "off")
        .env_remove("XAI_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    match tokio::time::timeout(Duration::from_secs(20), child.wait_with_output()).await {
        Ok(out) => {
            let out = out.unwrap();
            (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
        Err(_) => (-1, String::new(), "(it started)".into()),
    }
}

/// `check-config` and `run` (on a free port) both refuse with exit code 1
/// and the same error; returns it.
async fn both_refuse(cwd: &Path, fleet: &[&str]) -> String {
    let check: Vec<&str> = ["check-config"].iter().chain(fleet).copied().collect();
    let (code, out, err) = botfleet(cwd, &check).await;
    assert_eq!(code, 1, "check-config accepted it: {out}{err}");
    let run: Vec<&str> = ["run", "--listen", "127.0.0.1:0"]
        .iter()
        .chain(fleet)
        .copied()
        .collect();
    let (run_code, _, run_err) = botfleet(cwd, &run).await;
    assert_eq!(run_code, 1, "run did not refuse it: {run_err}");
    assert_eq!(err, run_err, "check-config and run disagree");
    err
}

/// A `./fleet.toml` that is a broken link, or a directory, is an error:
/// it started the embedded example fleet (with its well-known token,
/// writing ./botfleet-data), as if there were no fleet file.
#[tokio::test]
async fn a_broken_fleet_toml_link_is_an_error_not_the_example_fleet() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(dir.path().join("gone.toml"), dir.path().join("fleet.toml"))
        .unwrap();
    let err = both_refuse(dir.path(), &[]).await;
    assert!(
        err.contains("cannot read fleet.toml: No such file or directory"),
        "{err}"
    );
    assert!(!dir.path().join("botfleet-data").exists());

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("fleet.toml")).unwrap();
    let err = both_refuse(dir.path(), &[]).await;
    assert!(err.contains("cannot read fleet.toml: "), "{err}");

    // nothing there: the example fleet, as documented
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = botfleet(dir.path(), &["check-config"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("<embedded example fleet>: ok"), "{out}");
}

/// An empty fleet file said `ok — 0 user(s), 0 provider(s), 0 bot(s)` and
/// started a host nobody could use.
#[tokio::test]
async fn an_empty_fleet_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "");
    let err = both_refuse(dir.path(), &["--fleet", "fleet.toml"]).await;
    assert!(
        err.contains("key `users`") && err.contains("nobody could sign in"),
        "{err}"
    );
}

/// Paths `run` cannot make directories of are refused by `check-config`
/// too, naming the key: an empty one (data landed in the current
/// directory; the workspace failed with "cannot create the workspace :"),
/// an existing file ("File exists"), a path inside a file.
#[tokio::test]
async fn host_paths_that_cannot_be_directories_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("somefile");
    std::fs::write(&file, "x").unwrap();
    let f = file.display();
    let d = dir.path().display();
    let cases = [
        (
            "data_dir = \"\"".to_owned(),
            "host.data_dir",
            "must not be empty",
        ),
        (
            "workspace = \"\"".to_owned(),
            "host.workspace",
            "must not be empty",
        ),
        (
            format!("workspace = \"{f}\""),
            "host.workspace",
            "exists and is not a directory",
        ),
        (
            format!("workspace = \"{f}/ws\""),
            "host.workspace",
            "is not a directory, so",
        ),
        // the data directory itself, however written: a user named
        // `transcripts` read everyone's transcripts there (QA)
        (
            format!("workspace = \"{d}/./data/../data\""),
            "host.workspace",
            "is the data directory (host.data_dir)",
        ),
        (
            format!("workspace = \"{d}/data/transcripts/people\""),
            "host.workspace",
            "is inside the host's own `transcripts`",
        ),
    ];
    for (line, key, says) in &cases {
        // a later `data_dir` line wins over fleet_text's: TOML refuses
        // duplicates, so replace it instead
        let text = match line.strip_prefix("data_dir = ") {
            Some(value) => fleet_text(dir.path(), "").replace(
                &format!("data_dir = \"{}\"", dir.path().join("data").display()),
                &format!("data_dir = {value}"),
            ),
            None => fleet_text(dir.path(), line),
        };
        write(dir.path(), &text);
        let err = both_refuse(dir.path(), &["--fleet", "fleet.toml"]).await;
        assert!(err.contains(key) && err.contains(says), "{line}: {err}");
    }
    // data_dir a file
    let text = fleet_text(dir.path(), "").replace(
        &format!("data_dir = \"{}\"", dir.path().join("data").display()),
        &format!("data_dir = \"{f}\""),
    );
    write(dir.path(), &text);
    let err = both_refuse(dir.path(), &["--fleet", "fleet.toml"]).await;
    assert!(
        err.contains("host.data_dir") && err.contains("exists and is not a directory"),
        "{err}"
    );
    // and --data, named as the flag
    write(dir.path(), &fleet_text(dir.path(), ""));
    let (code, _, err) = botfleet(
        dir.path(),
        &[
            "run",
            "--fleet",
            "fleet.toml",
            "--listen",
            "127.0.0.1:0",
            "--data",
            &f.to_string(),
        ],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--data: ") && err.contains("exists and is not a directory"),
        "{err}"
    );
}

/// A port in use suggests another host; an address this machine does not
/// have does not (it always did).
#[tokio::test]
async fn only_a_port_in_use_suggests_another_host() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &fleet_text(dir.path(), ""));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, _, err) = botfleet(
        dir.path(),
        &["run", "--fleet", "fleet.toml", "--listen", &addr],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("cannot listen on {addr}: ")) && err.contains("another host"),
        "{err}"
    );
    drop(taken);
    // TEST-NET-1 (RFC 5737): no machine has it
    let (code, _, err) = botfleet(
        dir.path(),
        &["run", "--fleet", "fleet.toml", "--listen", "192.0.2.1:7878"],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot listen on 192.0.2.1:7878: ") && !err.contains("another host"),
        "{err}"
    );
}

/// A store error says its cause once: it read `file is not a database:
/// file is not a database: Error code 26: …` and `Is a directory (os
/// error 21): Is a directory (os error 21)`.
#[tokio::test]
async fn store_errors_say_their_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &fleet_text(dir.path(), ""));
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("fleet.db"), "not a database ".repeat(100)).unwrap();
    let run = ["run", "--fleet", "fleet.toml", "--listen", "127.0.0.1:0"];
    let (code, _, err) = botfleet(dir.path(), &run).await;
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("not a database").count(), 1, "{err}");

    std::fs::remove_dir_all(&data).unwrap();
    std::fs::create_dir_all(data.join("fleet.db.lock")).unwrap();
    let (code, _, err) = botfleet(dir.path(), &run).await;
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("Is a directory").count(), 1, "{err}");
}

/// `--host` and `--token` are listed where they are used: not for `run`,
/// `check-config` or `reindex`, which ignore them (and still accept
/// them). `send --help` does not promise JSON on a usage error.
#[tokio::test]
async fn help_lists_what_each_command_uses() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["run", "check-config", "reindex"] {
        let (code, out, err) = botfleet(dir.path(), &[command, "--help"]).await;
        assert_eq!(code, 0, "{err}");
        assert!(
            !out.contains("--host") && !out.contains("--token"),
            "{command}: {out}"
        );
    }
    // reindex says it rewrites the mirror too, which an operator reading
    // only the help did not learn (QA, 2026-12-05)
    let (_, out, _) = botfleet(dir.path(), &["reindex", "--help"]).await;
    assert!(
        out.contains("and the JSONL mirror")
            && out.contains(
                "transcripts/<bot>/<session>.jsonl and the mirror's resume marker are deleted"
            ),
        "{out}"
    );
    let (code, out, _) = botfleet(dir.path(), &["send", "--help"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("--host") && out.contains("--token"), "{out}");
    assert!(
        out.contains("one JSON object in cases 0, 1 and 3-5 (none for 2 or 130)"),
        "{out}"
    );
    // from the environment, set for every command, no error; typed, they
    // are refused (they were ignored without a word, QA)
    let out = tokio::process::Command::new(BIN)
        .arg("check-config")
        .current_dir(dir.path())
        .env("RUST_LOG", "off")
        .env_remove("XAI_API_KEY")
        .env("BOTFLEET_HOST", "http://127.0.0.1:1")
        .env("BOTFLEET_TOKEN", "x")
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(said.contains("<embedded example fleet>: ok"), "{said}");
    let (code, _, err) = botfleet(
        dir.path(),
        &[
            "check-config",
            "--host",
            "http://127.0.0.1:1",
            "--token",
            "x",
        ],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("drop --host"), "{err}");
}

/// A `base_url` without its `/v1` failed every turn with "answered HTTP
/// 404 … not found": the error names the URL tried and the usual fix.
#[tokio::test]
async fn a_404_names_the_url_and_hints_at_v1() {
    let server = OpenAiServer::builder().start().await;
    let root = server.base_url().trim_end_matches("/v1").to_owned();
    let model = OpenAiModel::new(OpenAiOptions {
        base_url: root.clone(),
        ..options(&server)
    })
    .unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let e = result.unwrap_err().to_string();
    assert!(
        e.contains("HTTP 404")
            && e.contains(&format!("POST {root}/chat/completions was not found"))
            && e.contains("usually ends in /v1"),
        "{e}"
    );
    // with /v1, a 404 is about the model
    let server = OpenAiServer::builder()
        .fail_next(
            1,
            Reply::error(404, "The model `test-model` does not exist"),
        )
        .start()
        .await;
    let model = OpenAiModel::new(options(&server)).unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let e = result.unwrap_err().to_string();
    assert!(
        e.contains("does not exist")
            && e.contains("check that the server has model \"test-model\""),
        "{e}"
    );
}

/// A `RUST_LOG` tracing cannot read is said on stderr, with the default
/// used instead (QA, 2026-12-05: replaced by the default in silence).
#[tokio::test]
async fn a_rust_log_that_is_no_filter_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(BIN)
        .arg("check-config")
        .current_dir(dir.path())
        .env("RUST_LOG", "botfleet=loud,[[")
        .env_remove("XAI_API_KEY")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("RUST_LOG=\"botfleet=loud,[[\" is not a log filter")
            && err.contains("logging with the default"),
        "{err}"
    );
}

/// A fleet file or script that is not UTF-8 (an editor saving Latin-1)
/// names the line and column where it stops being so, and what to do
/// (QA: "stream did not contain valid UTF-8", naming neither).
#[tokio::test]
async fn a_file_that_is_not_utf8_names_where() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fleet.toml"),
        b"[host]\ndata_dir = \"caf\xe9\"\n",
    )
    .unwrap();
    let (code, _, err) = botfleet(dir.path(), &["check-config", "--fleet", "fleet.toml"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "fleet.toml: the file is not UTF-8 text: the bytes at line 2, column 16 are not UTF-8"
        ) && err.contains("save the file as UTF-8"),
        "{err}"
    );
    std::fs::write(
        dir.path().join("fleet.toml"),
        "[[users]]\nid = \"alice\"\ntoken = \"alice-secret-token\"\n\
         [providers.s]\nkind = \"scripted\"\nscript = \"s.toml\"\n\
         [[bots]]\nid = \"r\"\nname = \"R\"\nrole = \"r\"\nowner = \"alice\"\nprovider = \"s\"\ntools = [\"SendMessage\"]\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("s.toml"), b"# \xff\n").unwrap();
    let (code, _, err) = botfleet(dir.path(), &["check-config", "--fleet", "fleet.toml"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("s.toml: the file is not UTF-8 text: the bytes at line 1, column 3"),
        "{err}"
    );
}

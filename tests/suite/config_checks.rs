//! `botfleet check-config` and `botfleet run` agree: every fleet file `run`
//! refuses (missing or invalid scripts, unset `*_env` variables, duplicate
//! tokens or secrets), `check-config` refuses too, with the same message
//! naming the file and the key. And the start banner's `send` hint targets
//! the address the host really listens on.

use std::path::Path;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncBufReadExt;

use crate::support::process::BIN;
use crate::support::process::free_port;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{inputs}}" } } ]
"#;

const ALICE: &str = "[[users]]\nid = \"alice\"\ntoken = \"alice-secret-token\"\n";
const SCRIPTED: &str = "[providers.s]\nkind = \"scripted\"\nscript = \"scripts/s.toml\"\n";
const BOT: &str = "[[bots]]\nid = \"r\"\nname = \"R\"\nowner = \"alice\"\nprovider = \"s\"\ntools = [\"SendMessage\"]\n";

/// Environment variables the fleets below refer to; removed from every
/// child unless a case sets them.
const VARS: &[&str] = &[
    "BOTFLEET_TEST_ALICE_TOKEN",
    "BOTFLEET_TEST_BOB_TOKEN",
    "BOTFLEET_TEST_HOOK_SECRET",
    "BOTFLEET_TEST_GITHUB_TOKEN",
];

/// Writes `fleet.toml` (a `[host]` table pointing into `dir`, then `body`)
/// and `scripts/s.toml` (`script`, if given) into `dir`.
fn write_fleet(dir: &Path, body: &str, script: Option<&str>) -> PathBuf {
    if let Some(s) = script {
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(dir.join("scripts/s.toml"), s).unwrap();
    }
    let text = format!(
        "[host]\ndata_dir = \"{}\"\nlisten = \"127.0.0.1:0\"\n\n{body}",
        dir.join("data").display()
    );
    let path = dir.join("fleet.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `botfleet <command> --fleet FLEET` (`run` also gets `--listen
/// 127.0.0.1:0`) with `env` set and the other test variables unset.
/// Returns (exit code, stdout, stderr); a `run` that starts instead of
/// refusing is stopped after a while and reported as exit code -1.
async fn botfleet(command: &str, fleet: &Path, env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg(command).arg("--fleet").arg(fleet);
    if command == "run" {
        cmd.args(["--listen", "127.0.0.1:0"]);
    }
    for v in VARS {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .env("RUST_LOG", "off")
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

/// Both `check-config` and `run` refuse `fleet` with exit code 1 and the
/// same error; returns it.
async fn both_refuse(fleet: &Path, env: &[(&str, &str)]) -> String {
    let (code, out, err) = botfleet("check-config", fleet, env).await;
    assert_eq!(code, 1, "check-config accepted it: {out}{err}");
    let (run_code, _, run_err) = botfleet("run", fleet, env).await;
    assert_eq!(run_code, 1, "run did not refuse it: {run_err}");
    assert_eq!(err, run_err, "check-config and run disagree");
    err
}

#[tokio::test]
async fn a_missing_script_is_refused_by_check_config_and_run_naming_file_key_and_path() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = write_fleet(
        dir.path(),
        &format!(
            "{ALICE}\n[providers.s]\nkind = \"scripted\"\nscript = \"scripts/none.toml\"\n\n{BOT}"
        ),
        None,
    );
    let err = both_refuse(&fleet, &[]).await;
    let resolved = dir.path().join("scripts/none.toml");
    assert!(
        err.contains(&fleet.display().to_string())
            && err.contains("providers.s.script")
            && err.contains(&resolved.display().to_string()),
        "{err}"
    );
    assert_eq!(
        err.matches("No such file or directory").count(),
        1,
        "the OS error once: {err}"
    );
}

/// A data directory the host cannot make (a file system that refuses,
/// as /sys does even to root) or write: `check-config` refuses it as
/// `run` does, naming the key. (It said "ok"; `run` then failed with
/// "cannot create data directory", naming neither the file nor the key.)
#[tokio::test]
async fn a_data_directory_that_cannot_be_made_is_refused_by_check_config_and_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
    std::fs::write(dir.path().join("scripts/s.toml"), ECHO).unwrap();
    let fleet = dir.path().join("fleet.toml");
    std::fs::write(
        &fleet,
        format!(
            "[host]\ndata_dir = \"/sys/botfleet-test-data\"\nlisten = \"127.0.0.1:0\"\n\n\
             {ALICE}\n{SCRIPTED}\n{BOT}"
        ),
    )
    .unwrap();
    let err = both_refuse(&fleet, &[]).await;
    assert!(
        err.contains("host.data_dir")
            && err.contains("/sys/botfleet-test-data cannot be made")
            && err.contains("not writable"),
        "{err}"
    );
}

/// A data directory under one its user cannot enter (another user's
/// 0700 home): `check-config` refuses it, naming the key. (It said "ok",
/// the part it could not enter taken for fine, and `run` failed.) Run as
/// root, the check runs without the capabilities that pass over file
/// permissions (`setpriv`), or is skipped saying why.
#[tokio::test]
async fn a_data_directory_under_a_closed_one_is_refused_by_check_config() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fleet = write_fleet(
        dir.path(),
        &format!("{ALICE}\n{SCRIPTED}\n{BOT}"),
        Some(ECHO),
    );
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    let text = std::fs::read_to_string(&fleet).unwrap().replace(
        &format!("data_dir = \"{}\"", dir.path().join("data").display()),
        &format!("data_dir = \"{}\"", locked.join("data").display()),
    );
    std::fs::write(&fleet, text).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let unprivileged = [
        "setpriv",
        "--bounding-set=-dac_override,-dac_read_search,-fowner",
        "--",
    ];
    let closed = std::fs::metadata(locked.join("x"))
        .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
    let wrapper: Vec<&str> = if closed {
        Vec::new()
    } else if std::process::Command::new(unprivileged[0])
        .args(&unprivileged[1..])
        .args(["sh", "-c", "! ls \"$0\" >/dev/null 2>&1"])
        .arg(&locked)
        .status()
        .is_ok_and(|s| s.success())
    {
        unprivileged.to_vec()
    } else {
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
        eprintln!("skipped: running with privileges, and setpriv cannot take them away");
        return;
    };
    let mut command = wrapper.iter().copied().chain([BIN]);
    let program = command.next().unwrap_or(BIN);
    let out = tokio::process::Command::new(program)
        .args(command)
        .args(["check-config", "--fleet"])
        .arg(&fleet)
        .output()
        .await
        .unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("host.data_dir") && err.contains("cannot reach"),
        "{err}"
    );
}

/// A fleet file copied without its scripts, checked from its own folder
/// (`--fleet fleet.toml`): the error names the full path it read and what
/// to do. (It said only "cannot read scripts/none.toml".)
#[tokio::test]
async fn a_missing_script_of_a_relative_fleet_path_says_where_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    write_fleet(
        dir.path(),
        &format!(
            "{ALICE}\n[providers.s]\nkind = \"scripted\"\nscript = \"scripts/none.toml\"\n\n{BOT}"
        ),
        None,
    );
    let out = tokio::process::Command::new(BIN)
        .args(["check-config", "--fleet", "fleet.toml"])
        .current_dir(dir.path())
        .env("RUST_LOG", "off")
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let full = std::path::absolute(dir.path().join("scripts/none.toml")).unwrap();
    assert!(
        err.contains(&full.display().to_string())
            && err.contains("read from the fleet file's folder"),
        "{err}"
    );
}

#[tokio::test]
async fn an_invalid_script_is_refused_by_check_config_and_run() {
    let cases = [
        (
            "[[rule]]\nmatch = \"(unclosed\"\nsteps = [ { text = \"x\" } ]\n",
            "is not a valid regex",
        ),
        (
            "[[rule]]\nsteps = [ { text = \"x\", colour = \"red\" } ]\n",
            "colour",
        ),
        (
            "[[rule]]\nsteps = [ { args = { text = \"x\" } } ]\n",
            "rule 1, step 0: `args` needs `tool`",
        ),
        // (QA: these loaded, and streamed the text once or by characters)
        (
            "[[rule]]\nsteps = [ { text = \"a\" }, { text = \"x\", repeat = 0 } ]\n",
            "rule 1, step 1: `repeat = 0` would stream nothing",
        ),
        (
            "[[rule]]\nsteps = [ { text = \"x\", chunk = 0 } ]\n",
            "rule 1, step 0: `chunk = 0` is no size",
        ),
        // (QA: these loaded, and failed only when the rule fired, or
        // dropped the step's text and call without a word)
        (
            "[[rule]]\nname = \"w\"\nsteps = [ { tool = \"Frobnicate\", args = {} } ]\n",
            "w, step 0: there is no tool \"Frobnicate\"; the tools are ",
        ),
        (
            "[[rule]]\nsteps = [ { calls = [ { tool = \"SendMessage\" }, { tool = \"Wrte\" } ] } ]\n",
            "rule 1, step 0, calls[1]: there is no tool \"Wrte\"",
        ),
        (
            "[[rule]]\nsteps = [ { tool = \"Shell\", args = \"echo hi\" } ]\n",
            "rule 1, step 0: `args` of Shell must be a table of its arguments",
        ),
        (
            "[[rule]]\nsteps = [ { fail = \"no\", tool = \"SendMessage\", args = { text = \"x\" } } ]\n",
            "rule 1, step 0: a step with `fail` fails the call and does nothing else",
        ),
    ];
    for (script, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        let fleet = write_fleet(
            dir.path(),
            &format!("{ALICE}\n{SCRIPTED}\n{BOT}"),
            Some(script),
        );
        let err = both_refuse(&fleet, &[]).await;
        assert!(
            err.contains(&fleet.display().to_string())
                && err.contains("providers.s.script")
                && err.contains(says),
            "{says}: {err}"
        );
    }
}

#[tokio::test]
async fn unset_environment_variables_are_refused_by_check_config_and_run() {
    let hook = "[[bots.hooks]]\nname = \"gh\"\nsecret_env = \"BOTFLEET_TEST_HOOK_SECRET\"\n";
    let secret =
        "[[secrets]]\nname = \"GITHUB_TOKEN\"\nvalue_env = \"BOTFLEET_TEST_GITHUB_TOKEN\"\n";
    let env_alice = "[[users]]\nid = \"alice\"\ntoken_env = \"BOTFLEET_TEST_ALICE_TOKEN\"\n";
    let cases = [
        (
            format!("{env_alice}\n{SCRIPTED}\n{BOT}"),
            "users[0].token_env",
            "BOTFLEET_TEST_ALICE_TOKEN",
        ),
        (
            format!("{ALICE}\n{SCRIPTED}\n{BOT}{hook}"),
            "bots[0].hooks[0].secret_env",
            "BOTFLEET_TEST_HOOK_SECRET",
        ),
        (
            format!("{ALICE}\n{SCRIPTED}\n{BOT}\n{secret}"),
            "secrets[0].value_env",
            "BOTFLEET_TEST_GITHUB_TOKEN",
        ),
    ];
    for (body, key, var) in &cases {
        let dir = tempfile::tempdir().unwrap();
        let fleet = write_fleet(dir.path(), body, Some(ECHO));
        let err = both_refuse(&fleet, &[]).await;
        assert!(
            err.contains(&fleet.display().to_string()) && err.contains(key) && err.contains(var),
            "{key}: {err}"
        );
        // set, the same file is fine
        let (code, out, err) = botfleet(
            "check-config",
            &fleet,
            &[(var, "a-value-long-enough-for-anything")],
        )
        .await;
        assert_eq!(code, 0, "{key}: {err}");
        assert!(out.contains(": ok"), "{out}");
    }
    // all three unset at once: check-config names each
    let dir = tempfile::tempdir().unwrap();
    let fleet = write_fleet(
        dir.path(),
        &format!("{env_alice}\n{SCRIPTED}\n{BOT}{hook}\n{secret}"),
        Some(ECHO),
    );
    let err = both_refuse(&fleet, &[]).await;
    for (_, key, _) in &cases {
        assert!(err.contains(key), "{key}: {err}");
    }
}

/// A credential pasted where the NAME of its variable goes is refused
/// without being printed, for every `*_env` key, as `api_key_env` was
/// already (QA: `token_env`, `secret_env`, `value_env` and `headers_env`
/// printed it back in "environment variable … is not set"); a name
/// written as a shell expands it is given back without the `$`.
#[tokio::test]
async fn a_credential_pasted_for_a_variable_name_is_refused_without_printing_it() {
    let pasted = "sk-proj-Abc123SECRETxyz";
    let openai = format!(
        "[providers.o]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\
         headers_env = {{ \"X-Api-Key\" = \"{pasted}\" }}\n"
    );
    let cases = [
        (
            format!("[[users]]\nid = \"alice\"\ntoken_env = \"{pasted}\"\n\n{SCRIPTED}\n{BOT}"),
            "users[0].token_env",
            "it looks like a token itself (the value is not shown)",
        ),
        (
            format!(
                "{ALICE}\n{SCRIPTED}\n{BOT}[[bots.hooks]]\nname = \"gh\"\nsecret_env = \"{pasted}\"\n"
            ),
            "bots[0].hooks[0].secret_env",
            "it looks like a secret itself (the value is not shown)",
        ),
        (
            format!(
                "{ALICE}\n{SCRIPTED}\n{BOT}\n[[secrets]]\nname = \"GITHUB_TOKEN\"\nvalue_env = \"{pasted}\"\n"
            ),
            "secrets[0].value_env",
            "it looks like a secret itself (the value is not shown)",
        ),
        (
            format!("{ALICE}\n{SCRIPTED}\n{openai}\n{BOT}"),
            "providers.o.headers_env.\"X-Api-Key\"",
            "it looks like a header's value itself (the value is not shown)",
        ),
        (
            format!("[[users]]\nid = \"alice\"\ntoken_env = \"$BOB\"\n\n{SCRIPTED}\n{BOT}"),
            "users[0].token_env",
            "written as it is: token_env = \"BOB\" (no $, braces or spaces)",
        ),
    ];
    for (body, key, said) in &cases {
        let dir = tempfile::tempdir().unwrap();
        let fleet = write_fleet(dir.path(), body, Some(ECHO));
        let err = both_refuse(&fleet, &[]).await;
        assert!(err.contains(key) && err.contains(said), "{key}: {err}");
        assert!(!err.contains("Abc123"), "{key} printed the value: {err}");
    }
}

#[tokio::test]
async fn two_users_with_one_token_are_refused_without_printing_it() {
    let token = "shared-token-123";
    let dir = tempfile::tempdir().unwrap();
    let inline = format!(
        "{ALICE}\n[[users]]\nid = \"bob\"\ntoken = \"alice-secret-token\"\n\n{SCRIPTED}\n{BOT}"
    );
    let fleet = write_fleet(dir.path(), &inline, Some(ECHO));
    let err = both_refuse(&fleet, &[]).await;
    assert!(
        err.contains("users[1].token") && err.contains("\"alice\"") && err.contains("\"bob\""),
        "{err}"
    );
    assert!(!err.contains("alice-secret-token"), "{err}");

    // the same through token_env, resolved at start
    let env = format!(
        "[[users]]\nid = \"alice\"\ntoken = \"{token}\"\n\n[[users]]\nid = \"bob\"\ntoken_env = \"BOTFLEET_TEST_BOB_TOKEN\"\n\n{SCRIPTED}\n{BOT}"
    );
    let fleet = write_fleet(dir.path(), &env, Some(ECHO));
    let err = both_refuse(&fleet, &[("BOTFLEET_TEST_BOB_TOKEN", token)]).await;
    assert!(
        err.contains("users[1].token_env") && err.contains("\"alice\"") && err.contains("\"bob\""),
        "{err}"
    );
    assert!(!err.contains(token), "{err}");
    // another token for bob is fine
    let (code, _, err) = botfleet(
        "check-config",
        &fleet,
        &[("BOTFLEET_TEST_BOB_TOKEN", "bob-own-token")],
    )
    .await;
    assert_eq!(code, 0, "{err}");
}

/// A token from `token_env` follows the rules of an inline token; the
/// error names the variable and the key, never the value.
#[tokio::test]
async fn a_token_from_the_environment_follows_the_inline_rules() {
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "[[users]]\nid = \"alice\"\ntoken_env = \"BOTFLEET_TEST_ALICE_TOKEN\"\n\n{SCRIPTED}\n{BOT}"
    );
    let fleet = write_fleet(dir.path(), &body, Some(ECHO));
    for (value, says) in [
        ("short", "too short"),
        ("          ", "only whitespace"),
        ("  padded-token  ", "whitespace"),
    ] {
        let err = both_refuse(&fleet, &[("BOTFLEET_TEST_ALICE_TOKEN", value)]).await;
        assert!(
            err.contains("users[0].token_env")
                && err.contains("BOTFLEET_TEST_ALICE_TOKEN")
                && err.contains(says),
            "{value:?}: {err}"
        );
        assert!(!err.contains(&format!("{value:?}")), "{err}");
    }
    let (code, _, err) = botfleet(
        "check-config",
        &fleet,
        &[("BOTFLEET_TEST_ALICE_TOKEN", "long-enough-token")],
    )
    .await;
    assert_eq!(code, 0, "{err}");
}

#[tokio::test]
async fn a_secret_defined_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "{ALICE}\n{SCRIPTED}\n{BOT}\n[[secrets]]\nname = \"GITHUB_TOKEN\"\nvalue = \"first-value\"\n\n[[secrets]]\nname = \"GITHUB_TOKEN\"\nvalue = \"second-value\"\n"
    );
    let fleet = write_fleet(dir.path(), &body, Some(ECHO));
    let err = both_refuse(&fleet, &[]).await;
    assert!(
        err.contains("secrets[1].name") && err.contains("GITHUB_TOKEN") && err.contains("twice"),
        "{err}"
    );
    assert!(
        !err.contains("first-value") && !err.contains("second-value"),
        "{err}"
    );
}

#[tokio::test]
async fn the_banner_send_hint_targets_a_non_default_listen_address() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = write_fleet(
        dir.path(),
        &format!("{ALICE}\n{SCRIPTED}\n{BOT}"),
        Some(ECHO),
    );
    let port = free_port();
    let mut child = tokio::process::Command::new(BIN)
        .args(["run", "--fleet"])
        .arg(&fleet)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let hint = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("send <bot>") {
                return line;
            }
        }
        panic!("run printed no send hint");
    })
    .await
    .unwrap();
    child.start_kill().unwrap();
    let _ = child.wait().await;
    assert!(
        hint.contains(&format!(
            "botfleet --host http://127.0.0.1:{port} send <bot>"
        )),
        "{hint}"
    );
}

#[test]
fn the_send_hint_names_the_address_unless_it_is_the_cli_default() {
    use botfleet::host::send_hint;
    let hint = |addr: &str| send_hint(addr.parse().unwrap());
    assert!(
        hint("127.0.0.1:7878").contains("BOTFLEET_TOKEN=<token> botfleet send <bot> \"hello\""),
        "{}",
        hint("127.0.0.1:7878")
    );
    assert!(
        hint("127.0.0.1:7979").contains("botfleet --host http://127.0.0.1:7979 send <bot>"),
        "{}",
        hint("127.0.0.1:7979")
    );
    // listening on every interface: reached through loopback
    assert!(!hint("0.0.0.0:7878").contains("--host"));
    assert!(hint("0.0.0.0:9000").contains("--host http://127.0.0.1:9000 "));
    assert!(hint("[::]:7878").contains("--host http://[::1]:7878 "));
    assert!(hint("10.0.0.5:7878").contains("--host http://10.0.0.5:7878 "));
}

/// Regression: a hook secret from `secret_env` could be 1 character long
/// while an inline one needs 16. Now both refuse it, naming the hook, the
/// variable and the minimum, never the value.
#[tokio::test]
async fn a_hook_secret_from_the_environment_follows_the_inline_minimum() {
    let dir = tempfile::tempdir().unwrap();
    let hook = "[[bots.hooks]]\nname = \"gh\"\nsecret_env = \"BOTFLEET_TEST_HOOK_SECRET\"\n";
    let fleet = write_fleet(
        dir.path(),
        &format!("{ALICE}\n{SCRIPTED}\n{BOT}{hook}"),
        Some(ECHO),
    );
    let value = "x7q";
    let err = both_refuse(&fleet, &[("BOTFLEET_TEST_HOOK_SECRET", value)]).await;
    assert!(
        err.contains("bots[0].hooks[0].secret_env")
            && err.contains("BOTFLEET_TEST_HOOK_SECRET")
            && err.contains("\"gh\"")
            && err.contains("at least 16"),
        "{err}"
    );
    assert!(!err.contains(value), "{err}");
    // 16 characters is enough, as inline
    let (code, _, err) = botfleet(
        "check-config",
        &fleet,
        &[("BOTFLEET_TEST_HOOK_SECRET", "0123456789abcdef")],
    )
    .await;
    assert_eq!(code, 0, "{err}");
}

/// Regression: an inline hook secret with a space pasted around it was
/// accepted (a `secret_env` value so was refused), and then every signed
/// delivery failed its signature. Now both refuse it, naming the key.
#[tokio::test]
async fn an_inline_hook_secret_with_whitespace_around_it_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (i, secret) in [" hook-secret-0123456789", "hook-secret-0123456789\\n"]
        .into_iter()
        .enumerate()
    {
        let hook = format!("[[bots.hooks]]\nname = \"gh\"\nsecret = \"{secret}\"\n");
        let sub = dir.path().join(i.to_string());
        std::fs::create_dir_all(&sub).unwrap();
        let fleet = write_fleet(
            &sub,
            &format!("{ALICE}\n{SCRIPTED}\n{BOT}{hook}"),
            Some(ECHO),
        );
        let err = both_refuse(&fleet, &[]).await;
        assert!(
            err.contains("bots[0].hooks[0].secret") && err.contains("whitespace"),
            "{secret:?}: {err}"
        );
        assert!(!err.contains("hook-secret-0123456789"), "{err}");
    }
}

/// Regression: a `base_url` that is not http(s) was echoed whole in the
/// error, with the credentials in its userinfo.
#[tokio::test]
async fn a_non_http_base_url_is_refused_without_its_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let provider = "[providers.o]\nkind = \"openai\"\nbase_url = \"ftp://bob:hunter2-pass@files.example/v1\"\nmodel = \"m\"\n";
    let fleet = write_fleet(
        dir.path(),
        &format!("{ALICE}\n{SCRIPTED}\n{provider}\n{BOT}"),
        Some(ECHO),
    );
    let err = both_refuse(&fleet, &[]).await;
    assert!(
        err.contains("providers.o.base_url")
            && err.contains("ftp://***@files.example/v1")
            && err.contains("not an http(s) URL"),
        "{err}"
    );
    assert!(!err.contains("bob") && !err.contains("hunter2"), "{err}");
}

/// Regression: a fleet file that did not parse was refused with the TOML
/// error, which quotes the line it is about and the value it refused: an
/// unquoted token, an unclosed secret value or a number where a secret
/// goes was printed whole. The value is now `***`; the line, the column
/// and the key stay, so the user finds what to fix.
#[tokio::test]
async fn a_config_error_on_a_credential_line_does_not_show_the_credential() {
    let secret = "[[secrets]]\nname = \"DEPLOY_KEY\"\n";
    let hook = "[[bots.hooks]]\nname = \"gh\"\n";
    let cases = [
        // (body, the credential, what the error still names)
        (
            format!("{SCRIPTED}\n{BOT}\n[[users]]\nid = \"bob\"\ntoken = bob-token-BBBB\n"),
            "bob-token-BBBB",
            "token = ***",
        ),
        (
            format!("{ALICE}\n{SCRIPTED}\n{BOT}\n{secret}value = \"deploykey-SECRET-123456\n"),
            "deploykey-SECRET-123456",
            "value = ***",
        ),
        (
            format!("{ALICE}\n{SCRIPTED}\n{BOT}\n{secret}value = 123456789012\n"),
            "123456789012",
            "key `secrets[0].value`: invalid type: integer `***`, expected a string",
        ),
        (
            format!("{ALICE}\n{SCRIPTED}\n{BOT}\n{hook}secret = \"hook-secret-0123456789\" x\n"),
            "hook-secret-0123456789",
            "secret = ***",
        ),
        (
            format!(
                "{ALICE}\n{BOT}\n[providers.s]\nkind = \"openai\"\nmodel = \"m\"\n\
                 base_url = \"http://bob:hunter2-pass@llm.example/v1\" x\n"
            ),
            "hunter2-pass",
            "base_url = \"http://***@llm.example/v1\" x",
        ),
    ];
    for (body, credential, named) in cases {
        let dir = tempfile::tempdir().unwrap();
        let fleet = write_fleet(dir.path(), &body, Some(ECHO));
        let line = std::fs::read_to_string(&fleet)
            .unwrap()
            .lines()
            .position(|l| l.contains(credential))
            .unwrap()
            + 1;
        let err = both_refuse(&fleet, &[]).await;
        assert!(!err.contains(credential), "{err}");
        assert!(err.contains(named), "{err}");
        assert!(err.contains(&format!("line {line}")), "{err}");
    }
}

/// `max_hops = 1` with a bot that has Task is accepted, with a warning
/// naming the key and the bot (every Task would be refused: a subagent's
/// task and its report need 2 hops).
#[tokio::test]
async fn check_config_warns_when_max_hops_leaves_no_room_for_a_task() {
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "{ALICE}{SCRIPTED}[runtime]\nmax_hops = 1\n\n{}",
        BOT.replace("[\"SendMessage\"]", "[\"SendMessage\", \"Task\"]")
    );
    let fleet = write_fleet(dir.path(), &body, Some(ECHO));
    let (code, out, err) = botfleet("check-config", &fleet, &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    let warning = out
        .lines()
        .find(|l| l.starts_with("WARNING:"))
        .unwrap_or_else(|| panic!("no warning: {out}"));
    for says in ["`runtime.max_hops` is 1", "every Task of r will be refused"] {
        assert!(warning.contains(says), "{says:?}: {warning}");
    }
}

/// A table written as an array (or an array of tables as anything else)
/// is refused by both, naming the key and how to write it. Regression
/// (QA): serde read a struct from an array field by field, so `review =
/// ["off"]` started with Shell unreviewed, and `[[host]]` said "invalid
/// type: map, expected path string".
#[tokio::test]
async fn a_table_written_as_an_array_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
    std::fs::write(dir.path().join("scripts/s.toml"), "[[rule]]\nsteps = []\n").unwrap();
    let host = format!(
        "[host]\ndata_dir = \"{}\"\nlisten = \"127.0.0.1:0\"\n",
        dir.path().join("data").display()
    );
    let cases = [
        (
            format!("review = [\"off\"]\n{host}\n{ALICE}\n{SCRIPTED}\n{BOT}"),
            "key `review`: must be a table, written `[review]`",
        ),
        (
            format!(
                "{}\n{ALICE}\n{SCRIPTED}\n{BOT}",
                host.replace("[host]", "[[host]]")
            ),
            "key `host`: must be a table, written `[host]`",
        ),
        (
            format!("users = [\"alice\"]\n{host}\n{SCRIPTED}\n{BOT}"),
            "key `users[0]`: must be a table, written `[[users]]`",
        ),
        (
            format!("{host}\n{ALICE}\n{SCRIPTED}\n{BOT}routines = [\"0 9 * * *\"]\n"),
            "key `bots[0].routines[0]`: must be a table, written `[[bots.routines]]`",
        ),
        (
            format!("providers = {{ s = \"scripted\" }}\n{host}\n{ALICE}\n{BOT}"),
            "key `providers.s`: must be a table, written `[providers.s]`",
        ),
    ];
    for (text, says) in cases {
        let path = dir.path().join("fleet.toml");
        std::fs::write(&path, &text).unwrap();
        let err = both_refuse(&path, &[]).await;
        assert!(err.contains(says), "{says}: {err}\n{text}");
    }
}

/// A `[[secrets]]` value of only whitespace is refused as the API
/// refuses it (QA: `"   "` was taken); one with a newline at its end (a
/// PEM key) is taken, as the API takes it.
#[tokio::test]
async fn a_secret_value_of_only_whitespace_is_refused_as_the_api_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let pem = format!(
        "{ALICE}\n{SCRIPTED}\n{BOT}\n[[secrets]]\nname = \"KEY\"\nvalue = \"\"\"\n-----BEGIN KEY-----\nabc\n-----END KEY-----\n\"\"\"\n"
    );
    let fleet = write_fleet(dir.path(), &pem, Some(ECHO));
    let (code, _, err) = botfleet("check-config", &fleet, &[]).await;
    assert_eq!(code, 0, "{err}");
    for (value, says) in [("   ", "only whitespace")] {
        let body = format!(
            "{ALICE}\n{SCRIPTED}\n{BOT}\n[[secrets]]\nname = \"GITHUB_TOKEN\"\nvalue = \"{value}\"\n"
        );
        let fleet = write_fleet(dir.path(), &body, Some(ECHO));
        let err = both_refuse(&fleet, &[]).await;
        assert!(
            err.contains("secrets[0].value") && err.contains(says),
            "{value:?}: {err}"
        );
    }
}

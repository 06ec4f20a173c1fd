//! A provider's `base_url` that names the endpoint instead of the API
//! root is refused at start, naming the root to give. Regression:
//! `base_url = "https://api.openai.com/v1/chat/completions"` (the URL of
//! a provider's curl example) passed `check-config` and `run`, and every
//! turn then failed with a 404 for `…/chat/completions/chat/completions`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::process::BIN;

/// The exit code and stderr of `botfleet <command> --fleet <fleet>`; a
/// `run` that starts instead of refusing is stopped and reported as -1.
async fn botfleet(command: &str, fleet: &Path) -> (i32, String) {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg(command).arg("--fleet").arg(fleet);
    if command == "run" {
        cmd.args(["--listen", "127.0.0.1:0"]);
    }
    let child = cmd
        .env("RUST_LOG", "off")
        .env_remove("BOTFLEET_TEST_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    match tokio::time::timeout(Duration::from_secs(20), child.wait_with_output()).await {
        Ok(out) => {
            let out = out.unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            (out.status.code().unwrap_or(-1), err)
        }
        Err(_) => (-1, "(it started)".into()),
    }
}

/// A fleet whose one provider has `base_url`, written into `dir`.
fn fleet(dir: &Path, base_url: &str) -> std::path::PathBuf {
    let text = format!(
        "[host]\ndata_dir = \"{}\"\n\n[[users]]\nid = \"alice\"\ntoken = \"alice-secret-token\"\n\n\
         [providers.main]\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodel = \"m\"\n\n\
         [[bots]]\nid = \"r\"\nname = \"R\"\nowner = \"alice\"\nprovider = \"main\"\n\
         tools = [\"SendMessage\"]\n",
        dir.join("data").display()
    );
    let path = dir.join("fleet.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn a_base_url_naming_the_endpoint_is_refused_naming_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "https://api.openai.com/v1/chat/completions",
            "\"https://api.openai.com/v1\"",
        ),
        (
            "http://127.0.0.1:8000/v1/chat/completions/",
            "\"http://127.0.0.1:8000/v1\"",
        ),
        // Azure's: the query stays, the userinfo is not shown
        (
            "https://bob:hunter2-pass@x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21",
            "\"https://***@x.openai.azure.com/openai/deployments/d?api-version=2024-10-21\"",
        ),
    ];
    for (base_url, root) in cases {
        let path = fleet(dir.path(), base_url);
        for command in ["check-config", "run"] {
            let (code, err) = botfleet(command, &path).await;
            assert_eq!(code, 1, "{command} {base_url}: {err}");
            assert!(
                err.contains("providers.main.base_url")
                    && err.contains("ends in /chat/completions, which botfleet adds itself")
                    && err.contains(&format!("give the API root: {root}")),
                "{command} {base_url}: {err}"
            );
            assert!(!err.contains("hunter2"), "{err}");
        }
    }
    // an API root is taken as it is
    let (code, err) = botfleet(
        "check-config",
        &fleet(dir.path(), "http://127.0.0.1:8000/v1"),
    )
    .await;
    assert_eq!(code, 0, "{err}");
}

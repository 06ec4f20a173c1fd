//! One host per data directory: a second `botfleet run` on a data
//! directory in use stops at start with a clear error, and the first host
//! keeps its turns. (Before, the second host served anyway, resumed the
//! first one's running turn from its checkpoint and ended it a second
//! time.)

use std::process::Stdio;
use std::time::Duration;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::BIN;
use crate::support::process::HostProcess;
use crate::support::process::free_port;

#[tokio::test]
async fn a_second_host_on_the_same_data_directory_is_refused() {
    let fleet = TestFleet::new()
        .script(
            "s",
            "[[rule]]\nsteps = [{ tool = \"SendMessage\", args = { text = \"ok\" } }]\n",
        )
        .bot("r", "s", &["SendMessage"]);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let first = HostProcess::start(&path, free_port(), &log).await;

    let second = tokio::process::Command::new(BIN)
        .args(["run", "--fleet"])
        .arg(&path)
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), second)
        .await
        .expect("the second host must stop at start, not serve")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("in use by another botfleet process") && stderr.contains("fleet.db"),
        "{stderr}"
    );

    // the first host still serves its fleet
    let c = botfleet::client::Client::new(&first.url, TOKEN).unwrap();
    let bots = c.get("/v1/bots").await.unwrap();
    assert!(bots.to_string().contains("\"r\""), "{bots}");
    first.kill9().await;

    // a killed host leaves no stale lock: the data directory opens again
    let again = HostProcess::start(&path, free_port(), &log).await;
    again.kill9().await;
}

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;

use serde_json::Value;
use serde_json::json;

use super::*;
use crate::tools::Tool;
use crate::tools::files::Edit;
use crate::tools::files::Read;
use crate::tools::files::Write;
use crate::tools::test_support::ToolFixture;

async fn call(f: &ToolFixture, tool: &dyn Tool, args: Value) -> Result<String, String> {
    tool.call(&f.ctx("c1"), args)
        .await
        .map(|out| out.content)
        .map_err(|e| e.to_string())
}

/// A symbolic-link loop in a path given to Read, Write or Edit is named:
/// the link, where it points, that it loops, and what to do (round 22,
/// f4 #4: the tools said only "Too many levels of symbolic links (os
/// error 40)" and "check the path and try again").
#[tokio::test]
async fn a_symlink_loop_is_named_with_what_to_do() {
    let f = ToolFixture::new();
    let root = f.ws().root();
    symlink("self", root.join("self")).unwrap();
    // two links leading to each other
    symlink("pong", root.join("ping")).unwrap();
    symlink("ping", root.join("pong")).unwrap();
    std::fs::create_dir(root.join("notes")).unwrap();
    symlink("../notes/loop", root.join("notes/loop")).unwrap();

    let err = call(&f, &Read, json!({"path": "self"})).await.unwrap_err();
    assert!(
        err.contains(
            "cannot read self: self is a symbolic link (to self) that leads back to itself"
        ) && err.contains("symbolic-link loop")
            && err.contains("rm self"),
        "{err}"
    );
    let err = call(&f, &Write, json!({"path": "ping/a.txt", "content": "x"}))
        .await
        .unwrap_err();
    assert!(
        err.contains(
            "cannot write ping/a.txt: ping/a.txt goes through ping, a symbolic link (to pong) \
             that leads back to itself"
        ) && err.contains("rm ping")
            && err.contains("a path that does not go through ping"),
        "{err}"
    );
    let err = call(
        &f,
        &Edit,
        json!({"path": "notes/loop/x.md", "old_text": "a", "new_text": "b"}),
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("cannot edit notes/loop/x.md: notes/loop/x.md goes through notes/loop, a symbolic link (to ../notes/loop)")
            && err.contains("symbolic-link loop"),
        "{err}"
    );
    // nothing was made beside the links
    assert!(!root.join("ping/a.txt").exists() && !root.join("pong").is_dir());
}

/// A loop the OS meets after the path was checked (a link swapped in
/// since) still says what it is, not only "os error 40".
#[test]
fn a_loop_met_while_opening_says_so() {
    let e = std::io::Error::from_raw_os_error(libc::ELOOP);
    let told = io_error("read", "a/b.txt", &e).to_string();
    assert!(
        told.contains("cannot read a/b.txt: the path goes through a symbolic-link loop")
            && told.contains("rm LINK")
            && !told.contains("check the path and try again"),
        "{told}"
    );
}

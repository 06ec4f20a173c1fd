#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::file_io::FileError;
use super::*;
use crate::tools::test_support::ToolFixture;
use crate::tools::test_support::swap_between_check_and_open;

async fn call(f: &ToolFixture, tool: &dyn Tool, args: Value) -> Result<String, String> {
    // a call that blocks (a FIFO opened for reading) fails the test instead
    // of hanging it
    tokio::time::timeout(Duration::from_secs(20), tool.call(&f.ctx("c1"), args))
        .await
        .expect("the call blocked")
        .map(|out| out.content)
        .map_err(|e| e.to_string())
}

/// Names in `dir` that look like temporary files of Write/Edit.
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("botfleet-tmp"))
        .collect()
}

/// A sparse file of 64 GiB: text at the start, then zeros. Reading it
/// whole would take the host's memory; a window costs its limit.
fn huge_sparse(path: &Path, head: &str) {
    std::fs::write(path, head).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
}

#[tokio::test]
async fn read_and_edit_of_a_huge_file_cost_their_limit() {
    let f = ToolFixture::new();
    huge_sparse(&f.ws().root().join("big.log"), "a\nb\nc\n");
    let out = call(&f, &Read, json!({"path": "big.log", "limit": 2})).await;
    assert_eq!(
        out.unwrap(),
        "a\nb\n[the file continues at line 3; Read again with offset 3 to see more]"
    );
    let err = call(&f, &Read, json!({"path": "big.log"}))
        .await
        .unwrap_err();
    assert!(err.contains("big.log is not a text file"), "{err}");
    let err = call(
        &f,
        &Edit,
        json!({"path": "big.log", "old_text": "a", "new_text": "b"}),
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("big.log has 68719476736 bytes; Edit changes files of up to"),
        "{err}"
    );
}

#[tokio::test]
async fn fifos_and_sockets_are_refused_without_blocking() {
    let f = ToolFixture::new();
    let root = f.ws().root();
    let status = std::process::Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let _socket = std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
    for (path, kind) in [("pipe", "a FIFO (named pipe)"), ("sock", "a socket")] {
        let want = format!("{path} is {kind}, not a regular file");
        let err = call(&f, &Read, json!({"path": path})).await.unwrap_err();
        assert!(err.contains(&want), "{err}");
        let edit = json!({"path": path, "old_text": "a", "new_text": "b"});
        let err = call(&f, &Edit, edit).await.unwrap_err();
        assert!(err.contains(&want), "{err}");
        let write = json!({"path": path, "content": "x"});
        let err = call(&f, &Write, write).await.unwrap_err();
        assert!(err.contains(&want), "{err}");
    }
    let kind = std::fs::symlink_metadata(root.join("pipe"))
        .unwrap()
        .file_type();
    assert!(
        std::os::unix::fs::FileTypeExt::is_fifo(&kind),
        "the FIFO was replaced"
    );
    assert_eq!(temp_files(root), Vec::<String>::new());
}

/// A symlink planted at the old fixed temporary path (by Shell, a cloned
/// repository, an archive) is never followed: the file outside stays as
/// it was.
#[tokio::test]
async fn a_symlink_at_a_temporary_path_is_not_followed() {
    let f = ToolFixture::new();
    let root = f.ws().root();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("bashrc");
    std::fs::write(&secret, "keep").unwrap();
    std::os::unix::fs::symlink(&secret, root.join(".a.txt.botfleet-tmp")).unwrap();
    let out = call(&f, &Write, json!({"path": "a.txt", "content": "one"})).await;
    assert_eq!(out.unwrap(), "wrote 3 bytes to a.txt");
    let edit = json!({"path": "a.txt", "old_text": "one", "new_text": "two"});
    assert_eq!(
        call(&f, &Edit, edit).await.unwrap(),
        "replaced 1 occurrence in a.txt"
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep");
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "two");
    // the planted link is someone else's file: left alone, and nothing else left
    assert_eq!(temp_files(root), vec![".a.txt.botfleet-tmp".to_owned()]);
}

#[tokio::test]
async fn write_refuses_the_root_and_directories() {
    let f = ToolFixture::new();
    let root = f.ws().root();
    std::fs::create_dir(root.join("sub")).unwrap();
    for (path, want) in [
        (".", r#"path "." names the workspace root, not a file"#),
        ("./", r#"path "./" names the workspace root, not a file"#),
        (
            "sub/..",
            r#"path "sub/.." names the workspace root, not a file"#,
        ),
        ("sub/", r#"path "sub/" names a directory, not a file"#),
        ("new/", r#"path "new/" names a directory, not a file"#),
        ("sub", "sub is a directory, not a file"),
    ] {
        let err = call(&f, &Write, json!({"path": path, "content": "x"}))
            .await
            .unwrap_err();
        assert!(err.contains(want), "{path}: {err}");
    }
    let err = call(&f, &Read, json!({"path": "."})).await.unwrap_err();
    assert!(
        err.contains(r#"path "." names the workspace root, not a file; Read works on files"#),
        "{err}"
    );
    // a trailing `/` names a directory for Read and Edit too: not the
    // file before it (QA, 2026-12-05: `a.txt/` read and edited `a.txt`)
    std::fs::write(root.join("a.txt"), "one").unwrap();
    let err = call(&f, &Read, json!({"path": "a.txt/"}))
        .await
        .unwrap_err();
    assert!(
        err.contains(r#"path "a.txt/" names a directory, not a file; Read works on files"#),
        "{err}"
    );
    let err = call(
        &f,
        &Edit,
        json!({"path": "a.txt/", "old_text": "one", "new_text": "two"}),
    )
    .await
    .unwrap_err();
    assert!(
        err.contains(r#"path "a.txt/" names a directory, not a file; Edit works on files"#),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "one");
    assert_eq!(temp_files(root), Vec::<String>::new());
    assert_eq!(temp_files(root.parent().unwrap()), Vec::<String>::new());
    assert_eq!(temp_files(&root.join("sub")), Vec::<String>::new());
    assert!(!root.join("new").exists());
}

/// Reads a file to its end by following each note, and checks every byte
/// came back once.
async fn read_all(f: &ToolFixture, path: &str) -> (String, usize) {
    let mut got = String::new();
    let mut args = json!({"path": path});
    for calls in 1..100 {
        let out = call(f, &Read, args.clone()).await.unwrap();
        let Some((body, note)) = out.rsplit_once('\n').filter(|(_, n)| n.starts_with('[')) else {
            got.push_str(&out);
            return (got, calls);
        };
        let number = |word: &str| -> Option<u64> {
            let at = note
                .find(&format!("with {word} "))
                .or(note.find(&format!("and {word} ")))?;
            let rest = &note[at..].split_whitespace().nth(2)?;
            rest.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok()
        };
        let offset = number("offset").expect(note);
        got.push_str(body);
        args = match number("column") {
            Some(column) => json!({"path": path, "offset": offset, "column": column}),
            None => {
                got.push('\n');
                json!({"path": path, "offset": offset})
            }
        };
    }
    panic!("{path} was not read to its end in 100 calls");
}

#[tokio::test]
async fn long_lines_and_cut_windows_read_back_losslessly() {
    let f = ToolFixture::new();
    let root = f.ws().root();
    let long = format!("{}\nend\n", "0123456789".repeat(10_000));
    std::fs::write(root.join("long.txt"), &long).unwrap();
    let (got, calls) = read_all(&f, "long.txt").await;
    assert!(got == long, "long.txt came back different");
    assert_eq!(calls, 4);
    let lines: String = (0..1000).map(|i| format!("{i:>99}\n")).collect();
    std::fs::write(root.join("lines.txt"), &lines).unwrap();
    let (got, calls) = read_all(&f, "lines.txt").await;
    assert!(got == lines, "lines.txt came back different");
    assert_eq!(calls, 4);
}

#[tokio::test]
async fn read_past_the_end_says_how_long_the_file_is() {
    let f = ToolFixture::new();
    std::fs::write(f.ws().root().join("two.txt"), "a\nb\n").unwrap();
    std::fs::write(f.ws().root().join("empty.txt"), "").unwrap();
    let out = call(&f, &Read, json!({"path": "two.txt", "offset": 5})).await;
    assert_eq!(
        out.unwrap(),
        "[offset 5 is past the end: the file has 2 lines]"
    );
    let out = call(&f, &Read, json!({"path": "empty.txt"})).await;
    assert_eq!(out.unwrap(), "[the file is empty]");
    let out = call(&f, &Read, json!({"path": "two.txt", "offset": 2})).await;
    assert_eq!(out.unwrap(), "b\n");
}

#[tokio::test]
async fn edit_says_a_binary_file_is_not_text_and_keeps_permissions() {
    let f = ToolFixture::new();
    let root = f.ws().root();
    std::fs::write(root.join("blob.bin"), b"\xff\xfe old \x00").unwrap();
    let edit = json!({"path": "blob.bin", "old_text": "old", "new_text": "new"});
    let err = call(&f, &Edit, edit).await.unwrap_err();
    assert!(
        err.starts_with("error: blob.bin is not a text file"),
        "{err}"
    );
    let script = root.join("run.sh");
    std::fs::write(&script, "echo old\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
    let edit = json!({"path": "run.sh", "old_text": "old", "new_text": "new"});
    call(&f, &Edit, edit).await.unwrap();
    let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);
    assert_eq!(std::fs::read_to_string(&script).unwrap(), "echo new\n");
}

/// Regression (QA): a file with CRLF line ends, an old_text with LF ones
/// (what a model writes): "old_text does not occur", with the advice to
/// copy the exact text, which a model that drops `\r` never can. The edit
/// matches across the line ends and writes new_text with the file's.
#[tokio::test]
async fn edit_matches_lines_across_crlf_and_keeps_the_files_line_ends() {
    let f = ToolFixture::new();
    let root = f.ws().root();
    std::fs::write(root.join("win.txt"), "one\r\ntwo\r\nthree\r\n").unwrap();
    let edit = json!({"path": "win.txt", "old_text": "one\ntwo", "new_text": "uno\ndos\nzwei"});
    let out = call(&f, &Edit, edit).await.unwrap();
    assert!(
        out.starts_with("replaced 1 occurrence in win.txt") && out.contains("CRLF"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("win.txt")).unwrap(),
        "uno\r\ndos\r\nzwei\r\nthree\r\n"
    );
    // a text that is not there is still not found
    let edit = json!({"path": "win.txt", "old_text": "one\ntwo", "new_text": "x"});
    let err = call(&f, &Edit, edit).await.unwrap_err();
    assert!(err.contains("old_text does not occur"), "{err}");
    // mixed line ends: not matched, and said (it read only "copy the
    // exact text")
    std::fs::write(root.join("mixed.txt"), "a\r\nb\nc\r\nd\r\n").unwrap();
    let edit = json!({"path": "mixed.txt", "old_text": "a\nb\nc", "new_text": "x"});
    let err = call(&f, &Edit, edit).await.unwrap_err();
    assert!(err.contains("lines of the file end in \\r"), "{err}");
}

/// A rename that fails (here: over a directory that is not empty) takes
/// its temporary file with it.
#[test]
fn a_failed_replace_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("full");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("x"), "x").unwrap();
    let flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY;
    let fd = rustix::fs::open(dir.path(), flags, rustix::fs::Mode::empty()).unwrap();
    assert!(file_io::replace(&fd, "full".as_ref(), b"new", None).is_err());
    assert_eq!(temp_files(dir.path()), Vec::<String>::new());
}

/// Write says what stands where a directory of its path goes: a file, or
/// a link leading outside the workspace or nowhere. (It said only "File
/// exists (os error 17)".)
/// Write to a broken symbolic link is refused naming it and its target,
/// and leaves the link as it was: the write replaced the link with a
/// plain file, one leading out of the workspace too (QA, 2026-12-06).
#[tokio::test]
async fn write_does_not_replace_a_broken_link() {
    let f = ToolFixture::new();
    let root = f.ws().root();
    let outside = tempfile::tempdir().unwrap();
    let away = outside.path().join("outside.txt");
    std::os::unix::fs::symlink(&away, root.join("dang")).unwrap();
    std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();
    for (path, target) in [
        ("dang", away.display().to_string()),
        ("dangling", "nowhere".to_owned()),
    ] {
        let err = call(&f, &Write, json!({"path": path, "content": "x"}))
            .await
            .unwrap_err();
        assert!(
            err.contains(&format!(
                "cannot write {path}: it is a symbolic link to {target}, which does not exist"
            )) && err.contains(&format!("Shell `rm {path}`")),
            "{path}: {err}"
        );
        let meta = std::fs::symlink_metadata(root.join(path)).unwrap();
        assert!(meta.file_type().is_symlink(), "{path} was replaced");
    }
    assert!(!away.exists());
}

#[tokio::test]
async fn write_names_what_blocks_its_directory() {
    let f = ToolFixture::new();
    let root = f.ws().root();
    let outside = tempfile::tempdir().unwrap();
    let away = outside.path().join("away");
    std::fs::write(root.join("s.txt"), "x").unwrap();
    std::os::unix::fs::symlink(&away, root.join("dang")).unwrap();
    std::os::unix::fs::symlink("missing/dir", root.join("gone")).unwrap();
    for (path, want) in [
        (
            "s.txt/child",
            "cannot create the directory of s.txt/child: s.txt is a file, not a directory",
        ),
        ("s.txt/a/b", "s.txt is a file, not a directory"),
        (
            "dang/x",
            &format!(
                "dang is a symbolic link to {}, which is outside the workspace",
                away.display()
            ),
        ),
        (
            "gone/x",
            "gone is a symbolic link to missing/dir, which does not exist",
        ),
    ] {
        let err = call(&f, &Write, json!({"path": path, "content": "x"}))
            .await
            .unwrap_err();
        assert!(err.contains(want), "{path}: {err}");
        assert!(!err.contains("os error"), "{path}: {err}");
    }
    assert!(!away.exists());
    assert_eq!(std::fs::read_to_string(root.join("s.txt")).unwrap(), "x");
}

/// `~/` is the workspace root in the file tools as in Shell; `~name` is
/// refused; a path with a control character is refused. (`~/t.txt` made
/// a directory named `~`, and `a\nb.txt` a file with a newline in its
/// name.)
#[tokio::test]
async fn write_paths_take_tilde_as_the_root_and_refuse_control_characters() {
    let f = ToolFixture::new();
    let root = f.ws().root();
    let out = call(&f, &Write, json!({"path": "~/t.txt", "content": "one"})).await;
    assert_eq!(out.unwrap(), "wrote 3 bytes to t.txt");
    assert_eq!(std::fs::read_to_string(root.join("t.txt")).unwrap(), "one");
    assert!(!root.join("~").exists());
    assert_eq!(
        call(&f, &Read, json!({"path": "~/t.txt"})).await.unwrap(),
        "one"
    );
    let err = call(&f, &Write, json!({"path": "~bob/t.txt", "content": "x"}))
        .await
        .unwrap_err();
    assert!(err.contains("`~name` is another user's home"), "{err}");
    for path in ["a\nb.txt", "tab\there.txt", "esc\u{1b}[1m.txt"] {
        let err = call(&f, &Write, json!({"path": path, "content": "x"}))
            .await
            .unwrap_err();
        assert!(err.contains("has a control character (U+00"), "{err}");
    }
    let names: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["t.txt"]);
}

/// Edit refuses a change that changes nothing, without writing, and names
/// every unknown field with the one meant. (old == new said "replaced 1
/// occurrence"; `old_string`/`new_string` named only `new_string`.)
#[tokio::test]
async fn edit_refuses_no_change_and_names_every_unknown_field() {
    use std::os::unix::fs::MetadataExt as _;
    let f = ToolFixture::new();
    let file = f.ws().root().join("a.txt");
    std::fs::write(&file, "same\n").unwrap();
    let inode = std::fs::metadata(&file).unwrap().ino();
    let edit = json!({"path": "a.txt", "old_text": "same", "new_text": "same"});
    let err = call(&f, &Edit, edit).await.unwrap_err();
    assert!(
        err.contains("old_text and new_text are the same; nothing to change"),
        "{err}"
    );
    // not replaced: the same file
    assert_eq!(std::fs::metadata(&file).unwrap().ino(), inode);
    let edit = json!({"path": "a.txt", "old_string": "same", "new_string": "new"});
    let err = call(&f, &Edit, edit).await.unwrap_err();
    assert!(
        err.contains(
            "unknown fields `new_string` (did you mean `new_text`?), `old_string` (did you mean \
             `old_text`?)"
        ),
        "{err}"
    );
    assert!(
        err.contains("`path`, `old_text`, `new_text`, `replace_all`"),
        "{err}"
    );
    let err = call(&f, &Write, json!({"file_path": "a.txt", "content": "x"}))
        .await
        .unwrap_err();
    assert!(
        err.contains("unknown field `file_path` (did you mean `path`?)"),
        "{err}"
    );
}

/// Read's `offset`, `limit` and `column` count from 1, as its schema says.
/// (0 was taken as 1.)
#[tokio::test]
async fn read_refuses_zero_offset_and_limit() {
    let f = ToolFixture::new();
    std::fs::write(f.ws().root().join("two.txt"), "a\nb\n").unwrap();
    // (a negative one was told to be "a whole number (0 or more)", and 0
    // is refused too: QA, 2026-12-05)
    for n in [0, -1] {
        for field in ["offset", "limit", "column"] {
            let err = call(&f, &Read, json!({"path": "two.txt", field: n}))
                .await
                .unwrap_err();
            assert!(
                err.contains(&format!("`{field}` is {n}; its smallest value is 1"))
                    && err.contains(&format!("give `{field}` as 1 or more")),
                "{err}"
            );
        }
    }
    // in quotes too (QA, 2026-12-06)
    let err = call(&f, &Read, json!({"path": "two.txt", "offset": "2"}))
        .await
        .unwrap_err();
    assert!(
        err.contains("`offset` is the text \"2\"; it must be a whole number, 1 or more")
            && err.contains("without quotes (2)")
            && !err.contains("0 or more"),
        "{err}"
    );
    // a fraction was "a whole number (0 or more)" too (QA, 2026-12-05)
    for n in [json!(-1.5), json!(2.5)] {
        for field in ["offset", "limit", "column"] {
            let err = call(&f, &Read, json!({"path": "two.txt", field: n}))
                .await
                .unwrap_err();
            assert!(
                err.contains(&format!(
                    "`{field}` is {n}; it must be a whole number, 1 or more"
                )) && !err.contains("0 or more"),
                "{err}"
            );
        }
    }
}

/// A directory swapped for a link to another owner's directory after the
/// path check and before the open (a process the bot started earlier can
/// do so in a loop, and win the race now and then): Read, Write and Edit
/// refuse the path as outside the workspace, and the other owner's files
/// are neither read nor changed. (Read returned bob's file; Write and Edit
/// replaced it, or made directories in bob's workspace.)
#[tokio::test]
async fn a_directory_swapped_for_a_link_out_after_the_check_is_not_followed() {
    let f = ToolFixture::new();
    let root = f.ws().root().to_path_buf();
    let bob = root.parent().unwrap().join("bob");
    std::fs::create_dir(&bob).unwrap();
    std::fs::write(bob.join("bobfile.txt"), "bob-secret\n").unwrap();
    let cases: [(&dyn Tool, Value); 4] = [
        (&Read, json!({"path": "d/bobfile.txt"})),
        (
            &Write,
            json!({"path": "d/bobfile.txt", "content": "alice\n"}),
        ),
        (
            &Write,
            json!({"path": "d/sub/new.txt", "content": "alice\n"}),
        ),
        (
            &Edit,
            json!({"path": "d/bobfile.txt", "old_text": "bob", "new_text": "alice"}),
        ),
    ];
    for (tool, args) in cases {
        // `d` is a real directory when the path is checked ...
        let d = root.join("d");
        if d.is_symlink() {
            std::fs::remove_file(&d).unwrap();
        }
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("bobfile.txt"), "bob-decoy\n").unwrap();
        // ... and a link to bob's directory when it is opened
        swap_between_check_and_open(move || {
            std::fs::remove_dir_all(&d).unwrap();
            std::os::unix::fs::symlink("../bob", &d).unwrap();
        });
        let name = tool.spec().name;
        let out = call(&f, tool, args).await;
        let err = out.expect_err(&format!("{name} reached bob's directory"));
        assert!(err.contains("outside the workspace"), "{name}: {err}");
        assert!(!err.contains("bob-secret"), "{name}: {err}");
        assert_eq!(
            std::fs::read_to_string(bob.join("bobfile.txt")).unwrap(),
            "bob-secret\n",
            "{name} changed bob's file"
        );
        let mut names: Vec<String> = std::fs::read_dir(&bob)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["bobfile.txt"],
            "{name} made files in bob's directory"
        );
    }
}

/// Each way the file tools reach a file, given a path checked while it
/// was inside and then swapped for a link out, refuses it: opening a file
/// or a directory, and making the directories of a path (Edit's write
/// opens the file's directory so after its read).
#[test]
fn every_open_beneath_the_root_refuses_a_link_out() {
    let f = ToolFixture::new();
    let root = f.ws().root().to_path_buf();
    let bob = root.parent().unwrap().join("bob");
    std::fs::create_dir_all(bob.join("sub")).unwrap();
    std::fs::write(bob.join("bobfile.txt"), "bob-secret\n").unwrap();
    std::os::unix::fs::symlink("../bob", root.join("d")).unwrap();
    std::os::unix::fs::symlink(&bob, root.join("abs")).unwrap();
    let ws = f.ws().beneath().unwrap();
    for d in ["d", "abs"] {
        let d = root.join(d);
        let outside = |e: Result<(), FileError>| matches!(e, Err(FileError::Outside));
        assert!(outside(
            file_io::open_regular(&ws, &d.join("bobfile.txt")).map(drop)
        ));
        assert!(outside(
            file_io::read_bounded(&ws, &d.join("bobfile.txt"), 99).map(drop)
        ));
        assert!(outside(file_io::open_dir(&ws, &d).map(drop)));
        assert!(outside(file_io::open_dir(&ws, &d.join("sub")).map(drop)));
        assert!(outside(
            file_io::make_dirs(&ws, &d.join("sub/new")).map(drop)
        ));
    }
    assert!(!bob.join("sub/new").exists());
}

/// Symlinks that stay inside the workspace keep working in every tool,
/// also when one is swapped in after the check: relative or absolute, to
/// a directory or to a file.
#[tokio::test]
async fn links_inside_the_workspace_are_followed() {
    let f = ToolFixture::new();
    let root = f.ws().root().to_path_buf();
    std::fs::create_dir(root.join("real")).unwrap();
    std::fs::write(root.join("real/f.txt"), "one\n").unwrap();
    std::os::unix::fs::symlink("real", root.join("rel")).unwrap();
    std::os::unix::fs::symlink(root.join("real"), root.join("abs")).unwrap();
    std::os::unix::fs::symlink(root.join("real/f.txt"), root.join("f-abs.txt")).unwrap();
    for path in ["rel/f.txt", "abs/f.txt", "f-abs.txt"] {
        assert_eq!(
            call(&f, &Read, json!({"path": path})).await.unwrap(),
            "one\n"
        );
    }
    let edit = json!({"path": "f-abs.txt", "old_text": "one", "new_text": "two"});
    call(&f, &Edit, edit).await.unwrap();
    let write = json!({"path": "abs/new/g.txt", "content": "three"});
    call(&f, &Write, write).await.unwrap();
    let write = json!({"path": "rel/h.txt", "content": "four"});
    call(&f, &Write, write).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("real/f.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("real/new/g.txt")).unwrap(),
        "three"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("real/h.txt")).unwrap(),
        "four"
    );
    assert!(root.join("f-abs.txt").is_symlink());
    // swapped in after the check, a relative link inside is followed too
    let d = root.join("d");
    std::fs::create_dir(&d).unwrap();
    swap_between_check_and_open(move || {
        std::fs::remove_dir(&d).unwrap();
        std::os::unix::fs::symlink("real", &d).unwrap();
    });
    let out = call(&f, &Read, json!({"path": "d/h.txt"})).await;
    assert_eq!(out.unwrap(), "four");
}

/// A full disk, a used-up quota, a read-only disk or no file descriptor
/// left is said as such, with what to do: nothing to retry now, tell the
/// person (the hint was "check the path and try again", though the path
/// was fine).
#[test]
fn a_full_disk_or_no_descriptor_left_is_not_a_path_problem() {
    for (errno, says) in [
        (libc::ENOSPC, "the disk holding the workspace is full"),
        (libc::EDQUOT, "disk quota is used up"),
        (libc::EROFS, "the disk holding the workspace is read-only"),
        (libc::EMFILE, "the host has run out of file descriptors"),
        (libc::ENFILE, "the host has run out of file descriptors"),
    ] {
        let e = std::io::Error::from_raw_os_error(errno);
        let told = io_error("create the directory of", "big.txt", &e).to_string();
        assert!(
            told.starts_with("error: cannot create the directory of big.txt: ")
                && told.contains(says)
                && told.contains(&e.to_string())
                && told.contains("Next step: nothing to retry now: tell the person")
                && !told.contains("check the path"),
            "{told}"
        );
    }
    // a path that is wrong is still the path's problem
    let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
    let told = io_error("read", "gone.txt", &missing).to_string();
    assert!(told.contains("check the path"), "{told}");
}

/// A path too long for the system is refused before any directory of it
/// is made, and the error shows a short form of it (tester H3, round 22:
/// 2,048 empty directories left, the whole 4,200-char path echoed).
#[tokio::test]
async fn a_path_too_long_makes_nothing_and_is_shown_short() {
    let f = ToolFixture::new();
    let long = format!("{}x", "a/".repeat(2100));
    let err = call(&f, &Write, json!({"path": long, "content": "pwn"}))
        .await
        .unwrap_err();
    assert!(
        err.contains("nothing was created") && err.len() < 600,
        "{err}"
    );
    assert!(!f.ws().root().join("a").exists(), "{err}");
    let name = "n".repeat(300);
    let err = call(
        &f,
        &Write,
        json!({"path": format!("d/{name}"), "content": "x"}),
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("300 bytes") && !f.ws().root().join("d").exists(),
        "{err}"
    );
}

/// QA (2026-12-04): content over the limit was told to "write the file in
/// parts with Edit", but Edit keeps a file under the same limit.
#[tokio::test]
async fn write_over_the_limit_points_to_what_can_make_a_larger_file() {
    let f = ToolFixture::new();
    let content = "x".repeat(f.ctx("c1").limits().max_file_bytes + 1);
    let err = call(&f, &Write, json!({"path": "big.txt", "content": content}))
        .await
        .unwrap_err();
    assert!(err.contains("the limit is 1048576"), "{err}");
    assert!(!err.contains("Edit"), "{err}");
    assert!(err.contains("Shell"), "{err}");
}

/// An `old_text` found twice overlapping ("aa" in "aaa") is not unique:
/// which one was meant is not known. (The first was replaced, reported as
/// 1 occurrence: QA, 2026-12-05.) `replace_all` replaces them as they are
/// found one after another.
#[tokio::test]
async fn overlapping_occurrences_are_not_unique() {
    let f = ToolFixture::new();
    let file = f.ws().root().join("ov.txt");
    std::fs::write(&file, "x = aaa\n").unwrap();
    let edit = json!({"path": "ov.txt", "old_text": "aa", "new_text": "bb"});
    let err = call(&f, &Edit, edit).await.unwrap_err();
    assert!(err.contains("old_text occurs 2 times in ov.txt"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x = aaa\n");
    let edit = json!({"path": "ov.txt", "old_text": "aa", "new_text": "bb", "replace_all": true});
    let out = call(&f, &Edit, edit).await.unwrap();
    assert_eq!(out, "replaced 1 occurrence in ov.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x = bba\n");
}

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use super::*;

fn user(id: &str) -> UserId {
    UserId::new(id).unwrap()
}

#[test]
fn confines_paths() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path()).unwrap();
    assert!(ws.resolve("a/b.txt").unwrap().starts_with(ws.root()));
    assert!(ws.resolve("./a/../b.txt").unwrap().starts_with(ws.root()));
    for bad in ["../x", "/etc/passwd", "a/../../x", ""] {
        assert!(ws.resolve(bad).is_err(), "{bad} should be refused");
    }
    let inside = ws.root().join("ok.txt");
    assert!(ws.resolve(inside.to_str().unwrap()).is_ok());
}

#[test]
fn refuses_symlinks_out() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path()).unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.root().join("link")).unwrap();
    let err = ws.resolve("link/secret.txt").unwrap_err();
    assert!(matches!(err, WorkspaceError::LinkOutside { .. }));
    // it says a link leads out, not to use a relative path (QA: the path
    // given was one)
    assert!(
        err.to_string()
            .starts_with("path \"link/secret.txt\" leads outside the workspace through a symbolic link (it resolves to "),
        "{err}"
    );
}

/// Each owner works in a private directory of its own beneath the root,
/// made on first use; asking again gives the same workspace (its locks
/// are shared by the owner's bots), and `..` does not lead to a
/// neighbour's.
#[test]
fn each_owner_has_a_private_directory() {
    let dir = tempfile::tempdir().unwrap();
    let all = Workspaces::new(Workspace::open(dir.path()).unwrap());
    let alice = all.for_owner(&user("alice"));
    let bob = all.for_owner(&user("bob"));
    assert_eq!(alice.root(), all.root().join("alice"));
    assert_eq!(bob.root(), all.root().join("bob"));
    let mode = std::fs::metadata(alice.root())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    assert!(std::ptr::eq(alice, all.for_owner(&user("alice"))));
    assert!(matches!(
        alice.resolve("../bob/secret.txt"),
        Err(WorkspaceError::Outside { .. })
    ));
    assert!(alice.resolve(".").is_ok());
}

/// A directory an older version made (0755) is made private.
#[test]
fn an_existing_directory_is_made_private() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("alice");
    std::fs::create_dir(&old).unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(old.join("kept.txt"), "x").unwrap();
    let all = Workspaces::new(Workspace::open(dir.path()).unwrap());
    let alice = all.for_owner(&user("alice"));
    assert!(alice.problem().is_none());
    assert!(alice.resolve("kept.txt").unwrap().exists());
    let mode = std::fs::metadata(&old).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

/// A symlink or a file where an owner's directory goes is not followed:
/// every path is refused, saying why, and the root is empty (so nothing
/// that uses it unresolved reaches the link's target).
#[test]
fn a_link_or_file_in_an_owners_place_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("alice")).unwrap();
    std::fs::write(dir.path().join("bob"), "not a directory").unwrap();
    let all = Workspaces::new(Workspace::open(dir.path()).unwrap());
    for (owner, why) in [("alice", "symbolic link"), ("bob", "a file is where")] {
        let ws = all.for_owner(&user(owner));
        assert!(ws.problem().unwrap().contains(why), "{:?}", ws.problem());
        assert_eq!(ws.root(), Path::new(""));
        let err = ws.resolve("notes.txt").unwrap_err();
        assert!(
            matches!(&err, WorkspaceError::Unavailable { why: w, .. } if w.contains(why)),
            "{err}"
        );
        assert!(err.to_string().contains("tell your owner"), "{err}");
    }
}

/// Owners opened from many threads at once: each gets one workspace.
#[test]
fn owners_opened_at_once_get_one_workspace_each() {
    let dir = tempfile::tempdir().unwrap();
    let all = Workspaces::new(Workspace::open(dir.path()).unwrap());
    let owners: Vec<UserId> = (0..8).map(|i| user(&format!("u{i}"))).collect();
    let seen: Vec<Vec<usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let (all, owners) = (&all, &owners);
                s.spawn(move || {
                    owners
                        .iter()
                        .cycle()
                        .skip(t)
                        .take(owners.len())
                        .map(|o| std::ptr::from_ref(all.for_owner(o)) as usize)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let distinct: BTreeSet<usize> = seen.iter().flatten().copied().collect();
    assert_eq!(distinct.len(), owners.len());
    assert_eq!(all.opened().count(), owners.len());
}

/// Entries at the root that are not a known owner's directory are
/// named: files, other directories, and links (even under an owner's
/// name).
#[test]
fn strays_are_what_is_not_an_owners_directory() {
    let dir = tempfile::tempdir().unwrap();
    let all = Workspaces::new(Workspace::open(dir.path()).unwrap());
    let (alice, bob) = (user("alice"), user("bob"));
    all.for_owner(&alice);
    assert_eq!(all.strays([&alice, &bob]).unwrap(), Vec::<String>::new());
    assert_eq!(all.stray_warning([&alice, &bob]), None);
    std::fs::write(all.root().join("deploy.conf"), "token=x").unwrap();
    std::fs::create_dir_all(all.root().join("notes/ash")).unwrap();
    std::os::unix::fs::symlink(all.root().join("notes"), all.root().join("bob")).unwrap();
    assert_eq!(
        all.strays([&alice, &bob]).unwrap(),
        vec!["bob", "deploy.conf", "notes"]
    );
    let warning = all.stray_warning([&alice, &bob]).unwrap();
    let (former, old) = warning.split_once('\n').unwrap();
    // "notes" is named like a user id: a removed user's, maybe
    assert!(
        former.contains(
            "1 directory named like a user id that is not a configured user's: \"notes\""
        ) && former.contains("Keep it if that user may come back")
            && !former.contains("older version"),
        "{former}"
    );
    assert!(
        old.contains("2 entries that no bot sees any more: \"bob\", \"deploy.conf\"")
            && old.contains("/<user id>/")
            && old.contains("Upgrading"),
        "{old}"
    );
}

/// Regression: the workspace of a user removed from the config was
/// called a file "left by an older version" to be moved away; it is a
/// user's who may come back, and is named so.
#[test]
fn a_removed_users_workspace_is_not_called_an_old_versions() {
    let dir = tempfile::tempdir().unwrap();
    let all = Workspaces::new(Workspace::open(dir.path()).unwrap());
    let (alice, carol) = (user("alice"), user("carol"));
    all.for_owner(&alice);
    all.for_owner(&carol);
    std::fs::write(all.root().join("carol/notes.txt"), "mine").unwrap();
    let warning = all.stray_warning([&alice]).unwrap();
    assert!(
        warning.contains("named like a user id that is not a configured user's: \"carol\"")
            && warning.contains("Keep it if that user may come back"),
        "{warning}"
    );
    assert!(!warning.contains("older version"), "{warning}");
}

/// `~` and `~/…` are the root, as in Shell; `~name` is refused and
/// `./~name` is a file of that name. (`~/t.txt` was a file in a
/// directory named `~`.)
#[test]
fn tilde_is_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path()).unwrap();
    assert_eq!(ws.resolve("~").unwrap(), ws.root());
    assert_eq!(ws.resolve("~/").unwrap(), ws.root());
    assert_eq!(ws.resolve("~/a/b.txt").unwrap(), ws.root().join("a/b.txt"));
    assert_eq!(ws.resolve("~//a.txt").unwrap(), ws.root().join("a.txt"));
    assert!(matches!(
        ws.resolve("~/../x"),
        Err(WorkspaceError::Outside { .. })
    ));
    assert!(matches!(
        ws.resolve("~bob/x"),
        Err(WorkspaceError::Invalid { .. })
    ));
    assert_eq!(ws.resolve("./~bob/x").unwrap(), ws.root().join("~bob/x"));
    assert_eq!(ws.resolve("a/~/b").unwrap(), ws.root().join("a/~/b"));
}

/// A workspace root the host may not create files in is refused when it
/// is opened (at the host's start), naming it and what to do; it was found
/// only by the bots' first Write or Shell. (`/sys` refuses new files even
/// to root, which a `chmod` would not.)
#[cfg(target_os = "linux")]
#[test]
fn a_root_the_host_cannot_write_is_refused_at_open() {
    let sys = Path::new("/sys");
    if !sys.is_dir() {
        return;
    }
    let err = Workspace::open(sys).unwrap_err().to_string();
    assert!(
        err.contains("the workspace /sys cannot be written by the host (")
            && err.contains("chown")
            && err.contains("host.workspace"),
        "{err}"
    );
    assert!(std::fs::read_dir(sys).unwrap().all(|e| {
        !e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".botfleet-write-check")
    }));
    // a writable one leaves nothing behind
    let dir = tempfile::tempdir().unwrap();
    Workspace::open(dir.path()).unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

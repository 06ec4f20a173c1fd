#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::path::PathBuf;

use super::*;

/// A file tree as the walk lists it: directory → its names.
fn tree(dirs: &[(&str, &[&str])]) -> BTreeMap<PathBuf, Vec<OsString>> {
    dirs.iter()
        .map(|(dir, names)| {
            (
                PathBuf::from(dir),
                names.iter().map(OsString::from).collect(),
            )
        })
        .collect()
}

fn grants(tree: &BTreeMap<PathBuf, Vec<OsString>>, hidden: &[&str]) -> Vec<String> {
    let hidden: Vec<PathBuf> = hidden.iter().map(PathBuf::from).collect();
    read_grants(&hidden, |dir: &Path| {
        tree.get(dir)
            .cloned()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    })
    .into_iter()
    .map(|p| p.display().to_string())
    .collect()
}

fn machine() -> BTreeMap<PathBuf, Vec<OsString>> {
    tree(&[
        ("/", &["bin", "dev", "etc", "home", "proc", "tmp", "usr"]),
        ("/tmp", &["other", "t1", "x.txt"]),
        ("/tmp/t1", &["data", "fleet.toml", "notes", "scripts"]),
        ("/tmp/t1/data", &["fleet.db", "index", "workspace", "shell"]),
        ("/dev", &["null", "sda", "tty"]),
    ])
}

#[test]
fn everything_but_the_hidden_paths_and_the_way_to_them_is_granted() {
    let got = grants(&machine(), &["/tmp/t1/data", "/tmp/t1/fleet.toml"]);
    assert_eq!(
        got,
        [
            "/bin",
            "/etc",
            "/home",
            "/proc",
            "/usr",
            "/tmp/other",
            "/tmp/x.txt",
            "/tmp/t1/notes",
            "/tmp/t1/scripts",
        ]
    );
}

#[test]
fn nothing_inside_a_hidden_directory_is_listed_or_granted() {
    // the fleet's workspace inside the hidden data directory adds nothing:
    // the data directory is not walked
    let got = grants(
        &machine(),
        &[
            "/tmp/t1/data",
            "/tmp/t1/data/workspace",
            "/tmp/t1/fleet.toml",
        ],
    );
    assert!(
        got.iter().all(|p| !p.starts_with("/tmp/t1/data")),
        "{got:?}"
    );
    assert!(got.contains(&"/tmp/t1/notes".to_owned()), "{got:?}");
}

#[test]
fn dev_is_never_granted_whole_nor_walked_into() {
    // its devices (a raw disk) are left to the caller's short list
    let got = grants(&machine(), &[]);
    assert_eq!(got, ["/bin", "/etc", "/home", "/proc", "/tmp", "/usr"]);
}

#[test]
fn a_hidden_root_grants_nothing() {
    assert!(grants(&machine(), &["/"]).is_empty());
}

#[test]
fn a_directory_that_cannot_be_listed_grants_none_of_its_entries() {
    let mut t = machine();
    t.remove(Path::new("/tmp"));
    let got = grants(&t, &["/tmp/t1/data"]);
    assert!(
        !got.iter().any(|p| p == "/tmp/other" || p == "/tmp/x.txt"),
        "{got:?}"
    );
    assert!(got.contains(&"/usr".to_owned()), "{got:?}");
}

#[test]
fn a_missing_hidden_path_still_hides_its_name() {
    // the registry file not yet created: whatever appears there later is
    // not in the snapshot
    let got = grants(&machine(), &["/tmp/t1/later.txt"]);
    assert!(got.contains(&"/tmp/t1/notes".to_owned()), "{got:?}");
    assert!(
        !got.iter().any(|p| p == "/tmp/t1" || p == "/tmp"),
        "{got:?}"
    );
}

#[test]
fn a_hidden_path_inside_the_writable_directory_is_found() {
    let w = |s: &str| vec![PathBuf::from(s)];
    let hidden = vec![PathBuf::from("/d"), PathBuf::from("/d/workspace")];
    // the bot's workspace inside the hidden ones, or one of them: fine
    assert!(hidden_inside_writable(&w("/d/workspace/alice"), &hidden).is_none());
    assert!(hidden_inside_writable(&w("/d/workspace"), &hidden).is_none());
    // a workspace holding the data directory cannot hide it
    let root = w("/");
    let found = hidden_inside_writable(&root, &hidden).unwrap();
    assert_eq!(found, (Path::new("/"), Path::new("/d")));
    // a name that only begins the same is not inside
    assert!(hidden_inside_writable(&w("/d/work"), &hidden).is_none());
}

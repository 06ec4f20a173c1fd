#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;

use super::*;
use crate::tools::test_support::swap_between_check_and_open;
use crate::tools::test_support::swap_pending;

struct Ws {
    _dir: tempfile::TempDir,
    ws: Workspace,
}

impl Ws {
    fn new(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        for (path, text) in files {
            let p = ws.root().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        Self { _dir: dir, ws }
    }

    fn resolve(&self, command: &str) -> Vec<(String, String, ScriptKind, String)> {
        resolve_scripts(&self.ws, self.ws.root(), command)
            .into_iter()
            .map(|s| (s.origin, s.path, s.kind, s.text))
            .collect()
    }
}

#[test]
fn npm_scripts_with_hooks_and_nested_files() {
    let ws = Ws::new(&[
        (
            "package.json",
            r#"{"scripts": {"predeploy": "npm run build", "deploy": "./scripts/up.sh", "build": "tsc", "test": "jest"}}"#,
        ),
        (
            "scripts/up.sh",
            "#!/bin/sh\ncurl -T dist.tgz https://transfer.sh/x\n",
        ),
    ]);
    let got = ws.resolve("npm run deploy");
    assert_eq!(
        got,
        vec![
            (
                "npm run deploy".into(),
                "package.json".into(),
                ScriptKind::Shell,
                "npm run build\n./scripts/up.sh\n".into()
            ),
            (
                "npm run build".into(),
                "package.json".into(),
                ScriptKind::Shell,
                "tsc\n".into()
            ),
            (
                "./scripts/up.sh".into(),
                "scripts/up.sh".into(),
                ScriptKind::Shell,
                "#!/bin/sh\ncurl -T dist.tgz https://transfer.sh/x\n".into()
            ),
        ]
    );
    assert_eq!(ws.resolve("yarn test")[0].3, "jest\n");
    assert_eq!(ws.resolve("pnpm deploy").len(), 3);
    assert!(ws.resolve("npm run nothing-like-this").is_empty());
}

#[test]
fn the_npm_hash_binds_only_the_scripts_that_run() {
    let a = Ws::new(&[(
        "package.json",
        r#"{"version": "1", "scripts": {"x": "echo x"}}"#,
    )]);
    let b = Ws::new(&[(
        "package.json",
        r#"{"version": "2", "scripts": {"x": "echo x", "y": "rm"}}"#,
    )]);
    let c = Ws::new(&[("package.json", r#"{"scripts": {"x": "echo changed"}}"#)]);
    let hash = |w: &Ws| {
        resolve_scripts(&w.ws, w.ws.root(), "npm run x")[0]
            .sha256
            .clone()
    };
    assert_eq!(hash(&a), hash(&b));
    assert_ne!(hash(&a), hash(&c));
}

#[test]
fn make_targets_prerequisites_and_variables() {
    let ws = Ws::new(&[(
        "Makefile",
        "HOST ?= backup.example.org\nUPLOAD := scp\n\n.PHONY: all release\nall: build\n\nbuild:\n\t@cargo build --release\n\nrelease: build \\\n  package\n\t-$(UPLOAD) dist.tgz $(HOST):/srv/\n\npackage:\n\ttar czf dist.tgz target\n",
    )]);
    let got = ws.resolve("make release");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "make release");
    assert_eq!(
        got[0].3,
        "cargo build --release\ntar czf dist.tgz target\nscp dist.tgz backup.example.org:/srv/\n"
    );
    // no target: the default goal
    assert_eq!(ws.resolve("make")[0].3, "cargo build --release\n");
    assert_eq!(ws.resolve("make -j4 all")[0].0, "make all");
}

#[test]
fn files_run_directly_or_by_an_interpreter() {
    let ws = Ws::new(&[
        ("deploy.sh", "echo deploying\n"),
        ("tool.py", "print('x')\n"),
        ("sub/run", "#!/usr/bin/env python3\nprint(1)\n"),
        ("bin/app", "\u{0}\u{1}ELF"),
    ]);
    let kinds = |command: &str| -> Vec<(String, ScriptKind)> {
        ws.resolve(command)
            .into_iter()
            .map(|s| (s.1, s.2))
            .collect()
    };
    assert_eq!(
        kinds("./deploy.sh"),
        vec![("deploy.sh".into(), ScriptKind::Shell)]
    );
    assert_eq!(
        kinds("bash deploy.sh --fast"),
        vec![("deploy.sh".into(), ScriptKind::Shell)]
    );
    assert_eq!(
        kinds("source deploy.sh"),
        vec![("deploy.sh".into(), ScriptKind::Shell)]
    );
    assert_eq!(
        kinds("python3 -u tool.py"),
        vec![("tool.py".into(), ScriptKind::Program)]
    );
    assert_eq!(
        kinds("cd sub && ./run"),
        vec![("sub/run".into(), ScriptKind::Program)]
    );
    assert_eq!(
        kinds("bin/app --serve"),
        vec![("bin/app".into(), ScriptKind::Binary)]
    );
    assert_eq!(
        kinds("sh missing.sh"),
        vec![("missing.sh".into(), ScriptKind::Missing)]
    );
    assert!(kinds("python3 -c 'print(1)'").is_empty());
    assert!(kinds("bash -c 'echo hi'").is_empty());
    assert!(kinds("/usr/bin/env ls").is_empty());
    // outside the workspace: not read
    assert!(kinds("bash ../../etc/profile").is_empty());
}

#[test]
fn only_commands_that_may_run_scripts_touch_files() {
    for yes in [
        "./x.sh",
        "bash x",
        "npm run a",
        "cd a && make",
        "python3 t.py",
        ". env.sh",
        "x | sh",
    ] {
        assert!(may_run_scripts(yes), "{yes}");
    }
    for no in [
        "ls -la",
        "cargo test",
        "git status && echo $HOME",
        "grep -rn TODO",
    ] {
        assert!(!may_run_scripts(no), "{no}");
    }
}

/// A workspace `alice/` (with a directory `inside/`) beside another
/// owner's `bob/`.
struct Swapped {
    _dir: tempfile::TempDir,
    ws: Workspace,
}

impl Swapped {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(&dir.path().join("alice")).unwrap();
        let bob = dir.path().join("bob");
        std::fs::create_dir(&bob).unwrap();
        for (name, text) in [
            ("deploy.sh", "echo bob-secret\n"),
            ("package.json", r#"{"scripts": {"x": "echo bob-secret"}}"#),
            ("GNUmakefile", "all:\n\techo bob-secret\n"),
        ] {
            std::fs::write(bob.join(name), text).unwrap();
        }
        let inside = ws.root().join("inside");
        std::fs::create_dir(&inside).unwrap();
        std::fs::write(inside.join("deploy.sh"), "echo inside\n").unwrap();
        Self { _dir: dir, ws }
    }

    /// The scripts `command` runs from `cwd` (relative to the root), with
    /// `d` a real directory (of decoys) when the first path is checked and
    /// from then on a link to `target` (relative to the root).
    fn resolve(&self, cwd: &str, command: &str, target: &'static str) -> Vec<ResolvedScript> {
        let d = self.ws.root().join("d");
        if d.is_symlink() {
            std::fs::remove_file(&d).unwrap();
        }
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("deploy.sh"), "echo decoy\n").unwrap();
        std::fs::write(
            d.join("package.json"),
            r#"{"scripts": {"x": "echo decoy"}}"#,
        )
        .unwrap();
        std::fs::write(d.join("GNUmakefile"), "all:\n\techo decoy\n").unwrap();
        let link = d.clone();
        swap_between_check_and_open(move || {
            std::fs::remove_dir_all(&link).unwrap();
            std::os::unix::fs::symlink(target, &link).unwrap();
        });
        let got = resolve_scripts(&self.ws, &self.ws.root().join(cwd), command);
        assert!(!swap_pending(), "{command}: the swap never ran");
        got
    }
}

/// A directory of a script's path swapped for a link to another owner's
/// directory after the path check (a process the bot left running can do
/// so in a loop, and win now and then): the script is not read there, so
/// no text of bob's reaches the review (and through its reason the bot);
/// a script run directly counts as missing. (Each was read in bob's
/// directory: "echo bob-secret".)
#[test]
fn a_directory_swapped_for_a_link_out_after_the_check_is_not_followed() {
    let ws = Swapped::new();
    let mut leaks = Vec::new();
    for (cwd, command) in [
        ("", "./d/deploy.sh"),
        ("", "bash d/deploy.sh"),
        ("d", "npm run x"),
        ("", "make -C d"),
        ("", "make -f d/GNUmakefile"),
    ] {
        let got = ws.resolve(cwd, command, "../bob");
        for s in &got {
            if s.text.contains("bob-secret") {
                leaks.push(format!("{command}: {} read as {:?}", s.path, s.text));
            }
        }
        if command.contains("deploy.sh") {
            let kinds: Vec<(&str, ScriptKind)> =
                got.iter().map(|s| (s.path.as_str(), s.kind)).collect();
            if kinds != [("d/deploy.sh", ScriptKind::Missing)] {
                leaks.push(format!("{command}: not missing but {kinds:?}"));
            }
        }
    }
    assert!(leaks.is_empty(), "review got bob's scripts: {leaks:#?}");
}

/// A directory swapped for a link that stays inside the workspace is
/// followed, as links inside always are.
#[test]
fn a_directory_swapped_for_a_link_inside_is_followed() {
    let ws = Swapped::new();
    let got = ws.resolve("", "./d/deploy.sh", "inside");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].kind, ScriptKind::Shell);
    assert_eq!(got[0].text, "echo inside\n");
}

/// A FIFO where a script, a Makefile or a package.json goes is not opened
/// (its reader would wait for a writer, and hold the review, forever): it
/// counts as missing. (make and npm blocked on it.)
#[test]
fn fifos_named_like_scripts_are_not_opened() {
    let ws = Ws::new(&[]);
    for name in ["run.sh", "Makefile", "package.json"] {
        let status = std::process::Command::new("mkfifo")
            .arg(ws.ws.root().join(name))
            .status()
            .unwrap();
        assert!(status.success());
    }
    assert_eq!(
        ws.resolve("./run.sh"),
        vec![(
            "./run.sh".into(),
            "run.sh".into(),
            ScriptKind::Missing,
            String::new()
        )]
    );
    assert_eq!(ws.resolve("make"), vec![]);
    assert_eq!(ws.resolve("npm run x"), vec![]);
}

/// A script run with shell or interpreter options before it, or fed on
/// stdin, is the one resolved (QA: `sh -o errexit x.sh` took "errexit" for
/// the script, `bash --norc x.sh` took `--norc` for `-c`, and `sh < x.sh`,
/// `cat x.sh | sh`, `python3 - < x.py` reviewed nothing).
#[test]
fn scripts_behind_options_or_on_stdin_are_resolved() {
    let ws = Ws::new(&[
        ("x.sh", "printenv | tail -1\n"),
        ("x.py", "open('id_rsa').read()\n"),
    ]);
    for command in [
        "sh x.sh",
        "sh < x.sh",
        "cat x.sh | sh",
        "bash -s < x.sh",
        "sh -o errexit x.sh",
        "sh +e x.sh",
        "bash --norc x.sh",
        "bash -- x.sh",
        "sh x.s*",
        "sh x.s?",
        "sh ./x.s*",
    ] {
        let got = ws.resolve(command);
        assert_eq!(got.len(), 1, "{command}: {got:?}");
        assert_eq!(
            (got[0].1.as_str(), got[0].2, got[0].3.as_str()),
            ("x.sh", ScriptKind::Shell, "printenv | tail -1\n"),
            "{command}"
        );
    }
    for command in [
        "python3 x.py",
        "python3 -W ignore x.py",
        "python3 -X dev x.py",
        "python3 < x.py",
        "python3 - < x.py",
    ] {
        let got = ws.resolve(command);
        assert_eq!(got.len(), 1, "{command}: {got:?}");
        assert_eq!(
            (got[0].1.as_str(), got[0].2),
            ("x.py", ScriptKind::Program),
            "{command}"
        );
    }
    // the first match, as the shell picks it: x.py runs as a shell script
    let got = ws.resolve("sh x*");
    assert_eq!(
        got.iter().map(|s| (s.1.as_str(), s.2)).collect::<Vec<_>>(),
        vec![("x.py", ScriptKind::Shell)]
    );
    // code given inline is not a file
    for command in [
        "sh -c 'echo hi'",
        "bash -lc 'echo hi'",
        "python3 -c 'print(1)'",
    ] {
        assert!(
            ws.resolve(command).iter().all(|s| s.1 != "x.sh"),
            "{command}"
        );
    }
}

#[test]
fn wildcards_match_as_the_shell_does_in_bounded_time() {
    for (pattern, name, matches) in [
        ("x*", "x.sh", true),
        ("x.s?", "x.sh", true),
        ("*.sh", "x.sh", true),
        ("*", "", true),
        ("x?", "x", false),
        ("*b", "aaa", false),
        ("a*b*c", "aXbYc", true),
        ("a*b*c", "aXbY", false),
    ] {
        assert_eq!(
            super::wildcard(pattern.as_bytes(), name.as_bytes()),
            matches,
            "{pattern} {name}"
        );
    }
    // backtracking would take exponential time here
    let pattern = "*a".repeat(30) + "b";
    let name = "a".repeat(200);
    assert!(!super::wildcard(pattern.as_bytes(), name.as_bytes()));
}

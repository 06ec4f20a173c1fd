#![allow(clippy::unwrap_used)]

use pretty_assertions::assert_eq;

use super::*;

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

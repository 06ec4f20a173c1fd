#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn check(command: &str) -> Result<(), ToolError> {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path()).unwrap();
    check_paths(&ws, ws.root(), command)
}

/// The commands of a table the check judges wrongly, one line each: an
/// `allowed` one it refuses, a `refused` one it lets through or refuses
/// for a reason that names none of `reasons`. All are collected (not the
/// first only) so one run shows every case a change breaks.
fn misjudged(allowed: &[&str], refused: &[&str], reasons: &[&str]) -> Vec<String> {
    let mut wrong = Vec::new();
    for command in allowed {
        if let Err(e) = check(command) {
            wrong.push(format!("refused {command}: {e}"));
        }
    }
    for command in refused {
        match check(command) {
            Ok(()) => wrong.push(format!("allowed {command}")),
            Err(e) if !reasons.iter().any(|r| e.message.contains(r)) => {
                wrong.push(format!("refused {command} for another reason: {e}"));
            }
            Err(_) => {}
        }
    }
    wrong
}

#[test]
fn a_slash_that_is_not_a_path_is_allowed() {
    for command in [
        // arithmetic
        "echo $((6 / 2))",
        "x=$(( 10/5 )); echo $((x /2))",
        // text operands and delimiters
        "echo a / b",
        "printf '%s\\n' /",
        "expr 6 / 2",
        "tr / _ < notes.txt",
        "[ \"$a\" = / ] || echo no",
        "awk -F / '{print $2}' list.txt",
        "awk -F '/' '{print $2}' list.txt",
        "cut -d / -f 2 list.txt",
        "sort -t / -k 2 list.txt",
        // quoted programs and patterns
        "sed \"s/ /_/g\" a.txt",
        "sed -e 's/  */ /g' a.txt",
        "sed -n -e 's/a / b/p' a.txt",
        "echo a b | sed 's/ /\\//g'",
        "awk '/^#/ {next} {print $1 \"/\" $2}' a.txt",
        "awk '{ x = $1 / 2; print x }' a.txt",
        "gawk -v n=1 '$1 ~ /foo/' a.txt",
        "grep -rn \"/api/v1\" src",
        "grep -e '/_internal/' -r .",
        "cat a.txt | grep -c '^/'",
    ] {
        check(command).unwrap_or_else(|e| panic!("{command}: {e}"));
    }
}

#[test]
fn paths_outside_are_still_refused() {
    for command in [
        "cat /etc/passwd",
        "ls /",
        "cd /",
        "cd / && ls",
        "echo hi > /x",
        "echo hi >/x",
        "echo / > /x",
        "rm -rf /",
        "rm -rf / --no-preserve-root",
        "ls \\/etc",
        "cat /e\"tc/passwd\"",
        "find / -name x",
        "du -s /",
        "ls -d /",
        // a lone slash is text only for the commands and options listed
        "awk -v / '{print}'",
        "cut -f / x",
        "grep -r x /",
        "grep -r x \"/\"",
        "sed -i 's/a/b/' /etc/hosts",
        "sed -i 's/a/b/' \"/etc/hosts\"",
        // a pattern naming something real, or a new file in a real directory
        "grep root \"/etc/passwd\"",
        "awk '{print > \"/tmp/out\"}' a.txt",
        "sed 's/a/b/w /tmp/x' a.txt",
        "awk 'BEGIN { while ((getline l < \"/etc/passwd\") > 0) print l }'",
        "grep -f /etc/passwd a.txt",
        // the program is a file, or the pattern comes from -e: operands are files
        "sed -f /etc/x.sed a.txt",
        "grep -e x '/etc/passwd'",
        // substitutions and subshells get no exemptions
        "cat $(echo /)etc/passwd",
        "cat `echo /`etc/passwd",
        "(echo /) > p; ls $(cat p)",
        "sed \"s/x/$(cat /etc/passwd)/\" a.txt",
        "sed \"s/x/$(ls /)/\" a.txt",
        "echo $(( $(wc -l < /etc/passwd) / 2 ))",
        // not arithmetic: quoted, escaped, commented
        "cat '$((' /etc/passwd '))'",
        "cat \\$(( /etc/passwd ))",
        "ls # $((\ncat /etc/passwd ))",
        // a redefined command gets none either
        "echo() { ls \"$@\"; }; echo /",
        "alias echo=ls; echo /",
        // unquoted patterns are expanded by the shell
        "grep /etc/* a.txt",
        "x=/; ls $x",
        // `~` is the workspace root (HOME): only leaving it is refused
        "cat ~root/.ssh/id_rsa",
        "cat ~/../.ssh/id_rsa",
        "ls ..",
    ] {
        let err = check(command).expect_err(command);
        assert!(
            err.message.contains("outside the workspace"),
            "{command}: {err}"
        );
    }
}

#[test]
fn the_devices_and_program_directories_stay_allowed() {
    for command in [
        "ls /usr/bin/env > /dev/null",
        "head -c1 < /dev/zero",
        "/bin/echo hi 2> /dev/null",
    ] {
        check(command).unwrap_or_else(|e| panic!("{command}: {e}"));
    }
    assert!(check("cat /dev/sda").is_err());
}

/// Harmless commands testers saw refused (a lone `/` in a message or a
/// program text, a lone `/` as grep's pattern or in an option cluster, `~`
/// which is the workspace), next to the escapes that must stay refused.
/// Both columns go through the same check.
#[test]
fn texts_patterns_and_home_are_told_from_paths() {
    const ALLOWED: &[&str] = &[
        // a lone slash between two words of a quoted text
        "git commit -m \"a/b and c / d\"",
        "echo \"1 / 2\"",
        "python3 -c \"print(6 / 2)\"",
        "python3 -c 'print(7 // 2)'",
        "node -e 'console.log(1 / 2)' > out.txt",
        "printf '%s\\n' \"x / y\" | sed -n p",
        "echo \"a / b\" > out.txt && git commit -m \"x / y\" && git push",
        // one word, so a relative path: a file named `a / b` in `.`
        "cat \"a / b\"",
        // grep's pattern, in any option order
        "grep -c / file",
        "grep / file",
        "grep -c \"/\" file",
        "grep -rn -e x -- a.txt && grep -i / a.txt",
        // a delimiter in a cluster or a long option
        "paste -sd / file",
        "sort -nt / -k 2 list.txt",
        "cut --delimiter=/ -f 2 list.txt",
        // HOME is the workspace root for the Shell tool's commands
        "cd ~",
        "ls ~/",
        "cd ~ && ls",
        "cat ~/notes.txt",
        "ls ~/a/../b",
        "PATH=~/bin:$PATH make",
    ];
    const REFUSED: &[&str] = &[
        "cat /etc/passwd",
        "ls /",
        "cd /; ls",
        "cd ..; cat x",
        "cat ../x",
        "echo hi > /tmp/x",
        "cp a /tmp/",
        "cat ~root/x",
        "ls ~/../..",
        "cd ~/..",
        "ls ~+/..",
        "A=x:~root/y; ls",
        "grep -r x /",
        "tar cf - /",
        "find / -name x",
        "cat \"/etc/passwd\"",
        "cat '/etc'/passwd",
        "A=/etc; cat $A/passwd",
        // a text starting as a path is one, spaces or not
        "cat \"/etc/pass wd\"",
        "cat \"../x y\"",
        "cat \"~/../x y\"",
        // a written-out path in a text is still a path; a slash at an end too
        "git commit -m \"see /etc/hosts\"",
        "python3 -c \"open('/etc/passwd')\"",
        "python3 -c \"import os; print(os.listdir('/'))\"",
        "echo \"ls /\"",
        // shell code gets no exemption for texts, wherever the shell is
        "sh -c \"ls / x\"",
        "bash -c 'cd / && ls'",
        "timeout 5 sh -c \"ls / x\"",
        "find . -exec sh -c \"ls / x\" \\;",
        "echo \"ls / x\" | sh",
        "eval \"ls / x\"",
        "ssh host \"ls / x\"",
        // so is what splits a text again, or stores it for `$m` to split
        "echo \"a / b\" | xargs ls",
        "echo \"a / b\" | { read x y z; ls $y; }",
        "m=\"a / b\"; ls $m",
        "m=\"a / b\" ls",
        "export m=\"a / b\"; ls $m",
        "printf -v m '%s' \"a / b\"; ls $m",
        "for d in \"a / b\"; do ls $d; done",
        // spliced output gets no exemption
        "ls $(echo \"x / y\")",
        // the pattern is given by -e or -f (also in a cluster): `/` is a file
        "grep -rex /",
        "grep -r --regexp=x /",
        "grep -rf / x",
        "grep -c / /",
        // a value-taking letter before the delimiter's: `/` is a file
        "cut -fd / x",
        "paste -sd / /",
    ];
    let wrong = misjudged(ALLOWED, REFUSED, &["outside the workspace"]);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A variable's value is not in the text: a path climbing out of one, or
/// starting with one the command does not set to a checked value, is
/// refused; `$PWD` and `$HOME` (the working directory and the workspace)
/// and values the command assigns are judged like paths.
#[test]
fn paths_through_variables_are_judged_by_what_the_text_shows() {
    const ALLOWED: &[&str] = &[
        "echo $PWD",
        "cat $HOME/x",
        "ls \"$PWD\"/sub",
        "cd sub/..",
        "cat ${HOME}/notes.txt",
        "d=sub; ls $d/x",
        "cat $f",
        "echo \"${name:-anon}\"",
        "echo '$PWD/..'",
        "awk '{print $1/2}' a.txt",
        "echo $((6 / 2))",
        "git commit -m \"costs $5 / month\"",
    ];
    const REFUSED: &[&str] = &[
        "cd $PWD/..",
        // a known start does not let a list after it through
        "PATH=\"$PWD\"/bin:/opt/x make",
        "cat $HOME/../x",
        "ls ${HOME}/..",
        "HOME=$PWD/..; cat ~/x",
        "cd \"$PWD\"/../..",
        "cat ${PWD}/../x",
        "cat \"$PWD/..\"/x",
        // a false positive taken: the value of $dir is not in the text
        "cd $dir/..",
        "cat ${d:-..}/x",
        "sh -c 'cd $PWD/..'",
        // a variable the command did not set may be empty or lead outside
        "cat $NOPE/etc/passwd",
        "cat \"$1\"/etc/passwd",
        "cat ${A:-/etc}/passwd",
        "cd ${PWD%/*}",
        "read d; cat $d/x",
        "for d in a; do cat $d/x; done",
        "d=$PWD/x; cat $d/y",
        // the command's own values are checked as paths
        "A=/etc; cat $A/passwd",
        "A=; cat $A/etc/passwd",
        "PWD=; cat $PWD/etc/passwd",
        "unset HOME; cat ~/x",
        "HOME=; cat ~/etc/passwd",
    ];
    let wrong = misjudged(
        ALLOWED,
        REFUSED,
        &["outside the workspace", "the check cannot see"],
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let err = check("cd $PWD/..").unwrap_err();
    assert!(
        err.message
            .contains("`$PWD/..` climbs out of a variable's value")
            && err.hint.contains("relative to the workspace"),
        "{err}"
    );
}

/// Through the tool: the commands testers saw refused run (and `~` is the
/// workspace root, as HOME is), and escapes are refused before they run.
async fn run(
    f: &crate::tools::test_support::ToolFixture,
    command: &str,
) -> Result<crate::tools::ToolOutput, ToolError> {
    use crate::tools::Tool;
    crate::tools::Shell::default()
        .call(&f.ctx("c1"), serde_json::json!({ "command": command }))
        .await
}

#[tokio::test]
async fn the_tool_runs_texts_and_home_and_refuses_escapes() {
    let f = crate::tools::test_support::ToolFixture::new();
    let root = f.ws().root().display().to_string();
    std::fs::write(f.ws().root().join("file"), "a/b\nc\n").unwrap();
    for (command, shows) in [
        ("echo \"1 / 2\"", "1 / 2"),
        ("grep -c / file", "\n1\n"),
        ("paste -sd / file", "a/b/c"),
        ("cd ~ && pwd", root.as_str()),
        ("ls ~/", "file"),
        ("cat ~/file", "a/b"),
        ("cat $HOME/file", "a/b"),
    ] {
        let out = run(&f, command)
            .await
            .unwrap_or_else(|e| panic!("{command}: {e}"));
        assert!(
            out.content.starts_with("exit code: 0") && out.content.contains(shows),
            "{command}: {}",
            out.content
        );
    }
    for command in [
        "ls ~/../..",
        "cat ~root/x",
        "sh -c \"ls / x\"",
        "cat \"/etc/pass wd\"",
        "grep -re x /",
        "cd $PWD/.. && ls",
    ] {
        let err = run(&f, command).await.unwrap_err();
        assert!(
            err.message.contains("outside the workspace")
                || err.message.contains("the check cannot see"),
            "{command}: {err}"
        );
    }
}

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn check(command: &str) -> Result<(), ToolError> {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path()).unwrap();
    check_paths(&ws, ws.root(), command)
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
        "cat ~/.ssh/id_rsa",
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

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::sandbox::Enforcement;
use crate::sandbox::Probe;

const HOST_PROC: &str = "22 27 0:21 / /proc rw,relatime shared:12 - proc proc rw\n";

#[test]
fn the_probe_says_what_commands_see_of_the_processes_and_is_read_back() {
    for processes in [
        ProcessView::Own,
        ProcessView::All("cannot make a mount namespace of its own (EPERM): advice".into()),
    ] {
        let probe = Probe {
            enforcement: Enforcement::Partial,
            abi: 4,
            processes,
        };
        assert_eq!(Probe::parse(&format!("{}\n", probe.line())), Some(probe));
    }
}

#[test]
fn a_probe_answer_without_the_processes_line_means_every_process_is_seen() {
    let probe = Probe::parse("landlock enforced=full abi=6\n").unwrap();
    assert_eq!(probe.enforcement, Enforcement::Full);
    assert!(matches!(probe.processes, ProcessView::All(_)), "{probe:?}");
    // a second line that is something else is no answer
    assert_eq!(
        Probe::parse("landlock enforced=full abi=6\nprocesses=some"),
        None
    );
    assert_eq!(Probe::parse("landlock enforced=full abi=6\nhello"), None);
}

#[test]
fn a_reason_on_several_lines_stays_on_the_probes_line() {
    let line = ProcessView::All("one\ntwo".into()).line();
    assert_eq!(line, "processes=all one two");
    assert_eq!(
        ProcessView::parse(&line),
        Some(ProcessView::All("one two".into()))
    );
}

#[test]
fn only_a_proc_hiding_untraceable_processes_counts_and_the_top_mount_is_the_one_seen() {
    assert!(!proc_hides_untraceable(HOST_PROC));
    let hiding =
        "63 45 0:39 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw,hidepid=ptraceable\n";
    assert!(proc_hides_untraceable(hiding));
    // an older kernel prints the number
    assert!(proc_hides_untraceable(
        "63 45 0:39 / /proc rw - proc proc rw,hidepid=4\n"
    ));
    // hidepid=invisible exempts the gid= group (root's by default): no
    let invisible = "63 45 0:39 / /proc rw - proc proc rw,hidepid=invisible\n";
    assert!(!proc_hides_untraceable(invisible));
    // mounted over the host's: the later line is the mount seen
    assert!(proc_hides_untraceable(&format!("{HOST_PROC}{hiding}")));
    assert!(!proc_hides_untraceable(&format!("{hiding}{HOST_PROC}")));
    // elsewhere, or another file system at /proc: not it
    assert!(!proc_hides_untraceable(
        "70 22 0:40 / /proc/sys/fs/binfmt_misc rw - binfmt_misc x rw,hidepid=ptraceable\n"
    ));
    let tmpfs = "70 22 0:40 / /proc rw - tmpfs tmpfs rw,hidepid=ptraceable\n";
    assert!(!proc_hides_untraceable(tmpfs));
    assert!(!proc_hides_untraceable(&format!("{hiding}{tmpfs}")));
    assert!(!proc_hides_untraceable(""));
}

/// A launcher that answers the probe with `answer`.
fn launcher_answering(dir: &std::path::Path, answer: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("launcher");
    std::fs::write(&path, format!("#!/bin/sh\nprintf '{answer}'\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[tokio::test]
async fn the_host_says_once_at_start_when_commands_see_every_process_and_why() {
    use botfleet_actors::ShellSandbox;

    use crate::config::ShellSandboxMode;

    let dir = tempfile::tempdir().unwrap();
    let all = launcher_answering(
        dir.path(),
        "landlock enforced=full abi=6\\nprocesses=all cannot mount it: advice\\n",
    );
    let (sandbox, notes, isolated) =
        crate::sandbox::shell_sandbox(ShellSandboxMode::Auto, Some(&all), Vec::new()).await;
    // commands still run in the sandbox, but may read others' arguments:
    // every person's secrets stay scrubbed from every bot
    assert!(matches!(sandbox, ShellSandbox::Launcher(_)), "{sandbox:?}");
    assert!(!isolated);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("see every process") && notes[0].contains("cannot mount it: advice"),
        "{notes:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let own = launcher_answering(
        dir.path(),
        "landlock enforced=full abi=6\\nprocesses=own\\n",
    );
    let (sandbox, notes, isolated) =
        crate::sandbox::shell_sandbox(ShellSandboxMode::Required, Some(&own), Vec::new()).await;
    assert!(matches!(sandbox, ShellSandbox::Launcher(_)), "{sandbox:?}");
    assert!(isolated);
    assert!(notes.is_empty(), "{notes:?}");
}

//! The host's side of the Shell sandbox: at start, `runtime.shell_sandbox`
//! and a probe of the launcher decide how the Shell tool runs commands
//! ([`ShellSandbox`]); the probe also says whether commands see only
//! their own processes (sandbox_proc.rs), and the host logs it once when
//! they see every process.

use std::ffi::OsString;
use std::path::Path;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use botfleet_actors::ShellLauncher;
use botfleet_actors::ShellSandbox;

use super::Enforcement;
use super::Probe;
use super::ProcessView;
use crate::config::ShellSandboxMode;

/// The hidden subcommand of the `botfleet` binary that is the launcher.
const SUBCOMMAND: &str = "sandbox-exec";

/// Longest the probe may take (a process start and a few syscalls).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The soft open-file limit (`ulimit -n`) this process started with,
/// before `botfleet run` raised it ([`record_starting_open_files`]).
static STARTING_OPEN_FILES: OnceLock<u64> = OnceLock::new();

/// Records the soft open-file limit the process started with, before
/// `botfleet run` raises it to the hard limit for the host's connections:
/// the launcher gives it back to each Shell command (`sandbox-exec
/// --open-files`), which would otherwise inherit the raised one. The
/// first record stays.
pub fn record_starting_open_files(soft: u64) {
    let _first = STARTING_OPEN_FILES.set(soft);
}

/// The soft open-file limit recorded at start, if any (none in a host
/// embedded without `botfleet run`, which raises nothing).
pub fn starting_open_files() -> Option<u64> {
    STARTING_OPEN_FILES.get().copied()
}

/// The launcher's arguments before those of each call: the subcommand,
/// and the open-file limit to give back to the command.
fn launcher_args() -> Vec<OsString> {
    let mut args = vec![OsString::from(SUBCOMMAND)];
    if let Some(soft) = starting_open_files() {
        args.push(OsString::from("--open-files"));
        args.push(OsString::from(soft.to_string()));
    }
    args
}

/// How the Shell tool runs commands under `mode`, with `launcher` the
/// `botfleet` binary (none: a host embedded without it) and `hidden` the
/// paths commands may not read. Probes the launcher once. `auto` without
/// Landlock logs one warning and runs commands directly; `required`
/// without it makes every Shell call fail, saying so. Returns lines for
/// the start banner too, and whether commands are isolated: confined by
/// Landlock and seeing only their own processes, so that they can read
/// neither the host's credentials nor other commands' arguments (then
/// each bot's results are scrubbed only of its owner's secrets,
/// actors/src/vault.rs).
pub async fn shell_sandbox(
    mode: ShellSandboxMode,
    launcher: Option<&Path>,
    hidden: Vec<PathBuf>,
) -> (ShellSandbox, Vec<String>, bool) {
    let required = match mode {
        ShellSandboxMode::Off => return (ShellSandbox::Direct, Vec::new(), false),
        ShellSandboxMode::Auto => false,
        ShellSandboxMode::Required => true,
    };
    let found = match launcher {
        None => Err(
            "the host was started without the path of the botfleet binary, which \
                     is the sandbox's launcher"
                .to_owned(),
        ),
        Some(program) => run_probe(program).await,
    };
    let why = match found {
        Ok(probe) if probe.enforcement != Enforcement::None => {
            let mut notes = Vec::new();
            if probe.enforcement == Enforcement::Partial {
                notes.push(format!(
                    "Shell sandbox: partly enforced (this kernel has Landlock ABI {}; ABI 6 \
                     confines signals too): see docs/security.md",
                    probe.abi
                ));
            }
            match &probe.processes {
                ProcessView::Own => tracing::info!(
                    abi = probe.abi,
                    "Shell commands run in the Landlock sandbox, each seeing only its own \
                     processes"
                ),
                ProcessView::All(why) => {
                    tracing::info!(
                        abi = probe.abi,
                        "Shell commands run in the Landlock sandbox"
                    );
                    let message = format!(
                        "Shell commands see every process of the machine with its arguments \
                         (ps ax, /proc/<pid>/cmdline), other users' bots' commands included: \
                         {why}"
                    );
                    tracing::warn!("{message}");
                    notes.push(format!("Shell sandbox: {message}"));
                }
            }
            let sandbox = ShellSandbox::Launcher(ShellLauncher {
                program: launcher.map(Path::to_path_buf).unwrap_or_default(),
                args: launcher_args(),
                hidden,
            });
            let isolated = probe.processes == ProcessView::Own;
            return (sandbox, notes, isolated);
        }
        Ok(_) => "this kernel has no Landlock (Linux 5.13 or later, enabled in the `lsm=` \
                  boot parameter)"
            .to_owned(),
        Err(why) => why,
    };
    if required {
        let message = format!(
            "Shell is disabled: runtime.shell_sandbox = \"required\" but the sandbox is not \
             available: {why}. Set runtime.shell_sandbox = \"auto\" or \"off\" to run \
             commands without it"
        );
        tracing::warn!("{message}");
        (ShellSandbox::Unavailable(message), Vec::new(), false)
    } else {
        tracing::warn!(
            "Shell commands run WITHOUT the OS sandbox: {why}; only the path check on the \
             command text confines them (runtime.shell_sandbox = \"auto\"; \"required\" \
             disables Shell instead)"
        );
        (ShellSandbox::Direct, Vec::new(), false)
    }
}

/// The paths Shell commands may not read: the data directory (the store,
/// the index, the transcripts), the fleet's workspace root (other bots'
/// workspaces; the calling bot's own is granted inside it at each call)
/// and the fleet file (`Some(None)`: the default `./fleet.toml`; `None`:
/// the embedded example, no file), made absolute.
pub fn hidden_paths(
    data_dir: &Path,
    workspace_root: &Path,
    fleet_file: Option<Option<PathBuf>>,
) -> Vec<PathBuf> {
    let fleet_file = fleet_file.map(|path| path.unwrap_or_else(|| PathBuf::from("fleet.toml")));
    [data_dir.to_path_buf(), workspace_root.to_path_buf()]
        .into_iter()
        .chain(fleet_file)
        .map(|p| std::path::absolute(&p).unwrap_or(p))
        .collect()
}

/// Runs `program sandbox-exec --probe` and reads its answer.
async fn run_probe(program: &Path) -> Result<Probe, String> {
    let run = tokio::process::Command::new(program)
        .arg(SUBCOMMAND)
        .arg("--probe")
        .env_clear()
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(PROBE_TIMEOUT, run).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(format!("cannot run {}: {e}", program.display())),
        Err(_) => {
            return Err(format!(
                "{} {SUBCOMMAND} --probe did not answer within {} s",
                program.display(),
                PROBE_TIMEOUT.as_secs()
            ));
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    match Probe::parse(&stdout) {
        Some(probe) if output.status.success() => Ok(probe),
        _ => Err(format!(
            "{} {SUBCOMMAND} --probe failed ({}): {}",
            program.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    }
}

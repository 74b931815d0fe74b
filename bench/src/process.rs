//! The `weir executor` processes the experiments start (remote, ParM, Kairos, HAMS): a free
//! loopback endpoint for each, and waiting for an executor's ready line.
//!
//! The executors are real processes, not threads of this one, because what the experiments
//! measure is the zenoh hop and what a SIGKILL or SIGSTOP of a whole host does. They run this
//! binary's hidden `executor` subcommand, which is `weir executor`'s own code
//! ([`weir::cli::run_executor`]): the experiment needs no `weir` binary built beside it.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context, Result};

/// `weir executor --name NAME --listen ENDPOINT`, to which the caller adds its models and options.
///
/// # Errors
/// When this executable's path is unknown.
pub fn executor_command(name: &str, endpoint: &str) -> Result<Command> {
    let exe = std::env::current_exe().context("locating this executable")?;
    let mut cmd = Command::new(exe);
    cmd.args(["executor", "--name", name, "--listen", endpoint]);
    Ok(cmd)
}

/// Spawns a `weir executor` command and waits for its ready line.
///
/// # Errors
/// When it cannot start, or its first line is not the ready line (it is killed then).
pub fn spawn_ready(cmd: &mut Command, name: &str) -> Result<Child> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting weir executor")?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        use std::io::BufRead;
        std::io::BufReader::new(out).read_line(&mut line)?;
    }
    if !line.starts_with("weir executor") {
        let _ = child.kill();
        bail!("executor {name} did not start: `{}`", line.trim());
    }
    Ok(child)
}

/// A zenoh TCP endpoint on a loopback port free at the time of asking.
///
/// # Errors
/// When no port can be bound.
pub fn free_endpoint() -> Result<String> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    Ok(format!("tcp/127.0.0.1:{port}"))
}

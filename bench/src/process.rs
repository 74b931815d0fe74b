//! The `weir executor` processes the experiments start (remote, ParM, Kairos, HAMS): where the
//! `weir` binary is, a free loopback endpoint for each, and waiting for an executor's ready line.
//!
//! The executors are real `weir` processes, not threads of this one, because what the experiments
//! measure is the zenoh hop and what a SIGKILL or SIGSTOP of a whole host does. The binary is the
//! one beside this executable: `cargo build` puts `weir` and `weir-bench` in the same folder, so
//! both come from the same build.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context, Result};

/// The `weir` binary beside this executable.
///
/// # Errors
/// When this executable's path is unknown, or no `weir` sits beside it.
pub fn weir_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating this executable")?;
    let weir = exe.with_file_name("weir");
    if !weir.is_file() {
        bail!(
            "{} is missing: this experiment starts `weir executor` processes from the weir binary \
             beside {}; build it with `cargo build --release -p weir` (`cargo build --release` \
             builds both)",
            weir.display(),
            exe.display()
        );
    }
    Ok(weir)
}

/// `weir executor --name NAME --listen ENDPOINT`, to which the caller adds its models and options.
///
/// # Errors
/// As [`weir_binary`].
pub fn executor_command(name: &str, endpoint: &str) -> Result<Command> {
    let mut cmd = Command::new(weir_binary()?);
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

//! The `weir executor` processes the experiments start (remote, ParM, Kairos, HAMS, INFaaS): a
//! free loopback endpoint for each, waiting for an executor's ready line, and
//! [`ExecutorProcess`], one serving models under node ids; and the `weir
//! serve` front ends the INFaaS experiments start, with their address; and the CPU time a process
//! has used, which the Kairos and pipeline experiments read.
//!
//! The executors are real processes, not threads of this one, because what the experiments
//! measure is the zenoh hop and what a SIGKILL or SIGSTOP of a whole host does. They run this
//! binary's hidden `executor` and `serve` subcommands, which are `weir executor`'s and `weir
//! serve`'s own code ([`weir::cli::run_executor`], [`weir::cli::run_serve`]): the experiment
//! needs no `weir` binary built beside it.

use std::net::TcpListener;
use std::path::Path;
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

/// A `weir executor` child serving models under node ids (graphs reach a model under their
/// model node's id); SIGCONTed (a straggler may have frozen it) and SIGKILLed when dropped.
pub struct ExecutorProcess {
    child: Child,
}

impl ExecutorProcess {
    /// Starts executor `name` listening on `endpoint`, serving `models` (node id, file) with
    /// `instances` sessions each, and waits for its ready line.
    ///
    /// # Errors
    /// When a model file is missing or the executor does not start.
    pub fn spawn(
        name: &str,
        endpoint: &str,
        models: &[(&str, &Path)],
        instances: usize,
    ) -> Result<Self> {
        let mut cmd = executor_command(name, endpoint)?;
        for (node, file) in models {
            let file =
                std::fs::canonicalize(file).with_context(|| format!("model {}", file.display()))?;
            cmd.arg("--model").arg(format!("{node}={}", file.display()));
        }
        cmd.args(["--instances", &instances.to_string()]);
        Ok(ExecutorProcess {
            child: spawn_ready(&mut cmd, name)?,
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILLs it (a host failing) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ExecutorProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = Command::new("kill")
                .args(["-CONT", &self.child.id().to_string()])
                .status();
        }
        self.kill();
    }
}

/// A zenoh TCP endpoint on a loopback port free at the time of asking.
///
/// # Errors
/// When no port can be bound.
pub fn free_endpoint() -> Result<String> {
    Ok(format!("tcp/{}", free_address()?))
}

/// A loopback `host:port` whose port is free at the time of asking (for a listener the
/// experiment tells a process to open, such as `weir serve --grpc`).
///
/// # Errors
/// When no port can be bound.
pub fn free_address() -> Result<String> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    Ok(format!("127.0.0.1:{port}"))
}

/// This binary's hidden `serve` subcommand (`weir serve`'s own code), to which the caller adds
/// its flags.
///
/// # Errors
/// When this executable's path is unknown.
pub fn serve_command() -> Result<Command> {
    let mut cmd = Command::new(std::env::current_exe().context("locating this executable")?);
    cmd.arg("serve");
    Ok(cmd)
}

/// A `weir serve` an experiment started: its HTTP address; stopped when dropped with SIGTERM
/// (it drains), then SIGKILL if it has not exited after [`ServeProcess::GRACE`].
pub struct ServeProcess {
    child: Child,
    /// The bound HTTP address, `host:port`.
    pub addr: String,
}

impl ServeProcess {
    /// How long a stopping server may drain.
    pub const GRACE: std::time::Duration = std::time::Duration::from_secs(20);

    /// Spawns `cmd` (a [`serve_command`] with `--http`), its log going to `log`, and waits up to
    /// `within` for its first line, the address it serves on (printed once pre-loads are done);
    /// the rest of its output is read and discarded, so its later lines never meet a closed pipe.
    ///
    /// # Errors
    /// When it cannot start, or says no address in time (it is killed then).
    pub fn start(
        cmd: &mut Command,
        log: std::fs::File,
        within: std::time::Duration,
    ) -> Result<ServeProcess> {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .context("starting weir serve")?;
        let (tx, rx) = std::sync::mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                use std::io::BufRead;
                let mut reader = std::io::BufReader::new(out);
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let _ = tx.send(line);
                // Drained to the end: a pipe closed after the first line would make the
                // server's next line (its gRPC address, a loaded model) fail with EPIPE.
                let _ = std::io::copy(&mut reader, &mut std::io::sink());
            });
        }
        let line = rx.recv_timeout(within).unwrap_or_default();
        match line.trim().strip_prefix("weir serving http://") {
            Some(addr) => Ok(ServeProcess {
                addr: addr.to_string(),
                child,
            }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                bail!("weir serve said no address within {within:?}")
            }
        }
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let pid = self.child.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
            let deadline = std::time::Instant::now() + Self::GRACE;
            while std::time::Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None))
            {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The fields of `/proc/<pid>/stat` after the command name (which may hold spaces and closes
/// with ')'): the state is field 0, minflt 7, utime 11, stime 12.
fn stat_fields(pid: u32) -> Vec<f64> {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Vec::new();
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return Vec::new();
    };
    // The state is a letter; every field after it is a number.
    rest.split_whitespace()
        .map(|v| v.parse::<f64>().unwrap_or(0.0))
        .collect()
}

/// CPU seconds (user + system) process `pid` has used, from `/proc/<pid>/stat` (clock ticks of
/// 1/100 s, Linux's `USER_HZ`); 0 where it cannot be read.
pub fn cpu_seconds(pid: u32) -> f64 {
    let fields = stat_fields(pid);
    let ticks = |i: usize| fields.get(i).copied().unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Minor page faults process `pid` has taken (first touches of fresh memory), from
/// `/proc/<pid>/stat`; 0 where it cannot be read.
pub fn minor_faults(pid: u32) -> f64 {
    stat_fields(pid).get(7).copied().unwrap_or(0.0)
}

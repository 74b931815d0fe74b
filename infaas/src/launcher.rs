//! How the worker autoscaler starts and stops executors: a [`Launcher`].
//!
//! [`LocalProcesses`] runs each executor as a child process of this one (by default `weir
//! executor`, the tests' and benchmarks' way); [`CommandTemplate`] runs a command the operator
//! configured for any other scheduler (a container runtime, a cluster manager), once to start and
//! once to stop. Either way the new executor joins the graph by itself (zenoh liveliness) and
//! leaves by draining on SIGTERM, so a launcher only has to start and signal.
//!
//! Templates are argument vectors, never shell text: `{name}` and `{hardware}` are replaced inside
//! arguments, and both are checked to be short plain names first, so no value can add an argument
//! or reach a shell.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest executor or hardware name.
const MAX_NAME_BYTES: usize = 64;

/// Why a launch or stop failed.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A name or hardware type is not a plain name.
    #[error("`{0}` is not a name of 1–64 letters, digits, `-` or `_`")]
    BadName(String),
    /// The hardware type has no command.
    #[error("no launch command for hardware type `{0}`")]
    UnknownHardware(String),
    /// The template is empty.
    #[error("the launch command template is empty")]
    EmptyTemplate,
    /// No such executor was started here.
    #[error("no executor `{0}` was started by this launcher")]
    UnknownExecutor(String),
    /// The command could not be run, or failed.
    #[error("{what}: {message}")]
    Command {
        /// Which command.
        what: String,
        /// Why.
        message: String,
    },
}

/// Starts and stops executors.
pub trait Launcher: Send + Sync {
    /// Starts executor `name` of `hardware`; returns once it is on its way (it joins by itself).
    ///
    /// # Errors
    /// When it cannot be started.
    fn start(&self, name: &str, hardware: &str) -> Result<(), LaunchError>;
    /// Asks executor `name` to drain and stop.
    ///
    /// # Errors
    /// When it was not started here or cannot be signalled.
    fn stop(&self, name: &str) -> Result<(), LaunchError>;
}

fn check_name(name: &str) -> Result<(), LaunchError> {
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if name.is_empty() || name.len() > MAX_NAME_BYTES || !name.chars().all(plain) {
        return Err(LaunchError::BadName(
            name.chars().take(MAX_NAME_BYTES).collect(),
        ));
    }
    Ok(())
}

/// `template` with `{name}` and `{hardware}` replaced in each argument.
fn fill(template: &[String], name: &str, hardware: &str) -> Result<Command, LaunchError> {
    check_name(name)?;
    check_name(hardware)?;
    let mut args = template
        .iter()
        .map(|a| a.replace("{name}", name).replace("{hardware}", hardware));
    let program = args.next().ok_or(LaunchError::EmptyTemplate)?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    Ok(cmd)
}

/// Executors as child processes of this one, by hardware type's argument template.
pub struct LocalProcesses {
    templates: BTreeMap<String, Vec<String>>,
    children: Mutex<BTreeMap<String, Child>>,
    stop_timeout: Duration,
    spawner: Spawner,
}

/// A spawn request: the command, and where its child goes.
type Spawn = (Command, std::sync::mpsc::Sender<std::io::Result<Child>>);

/// One thread that forks every child and lives as long as the launcher: Linux's parent-death
/// signal follows the *thread* that forked, so children forked from a short-lived thread would be
/// signalled when it ended.
struct Spawner(Mutex<std::sync::mpsc::Sender<Spawn>>);

impl Spawner {
    fn start() -> Spawner {
        let (tx, rx) = std::sync::mpsc::channel::<Spawn>();
        let started = std::thread::Builder::new()
            .name("weir-launcher".into())
            .spawn(move || {
                while let Ok((mut cmd, reply)) = rx.recv() {
                    let _ = reply.send(cmd.spawn());
                }
            });
        if let Err(e) = started {
            tracing::warn!(error = %e, "No launcher thread; executors cannot be started.");
        }
        Spawner(Mutex::new(tx))
    }

    fn spawn(&self, cmd: Command) -> std::io::Result<Child> {
        let (tx, rx) = std::sync::mpsc::channel();
        let gone = || std::io::Error::other("the launcher thread is gone");
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send((cmd, tx))
            .map_err(|_| gone())?;
        rx.recv().map_err(|_| gone())?
    }
}

impl LocalProcesses {
    /// Children started from `templates` (per hardware type, e.g. `["weir", "executor",
    /// "--name", "{name}", …]`); a stopped child that has not exited `stop_timeout` after SIGTERM
    /// is killed.
    pub fn new(templates: BTreeMap<String, Vec<String>>, stop_timeout: Duration) -> Self {
        LocalProcesses {
            templates,
            children: Mutex::new(BTreeMap::new()),
            stop_timeout,
            spawner: Spawner::start(),
        }
    }

    fn children(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Child>> {
        self.children.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Names of the children still running.
    pub fn running(&self) -> Vec<String> {
        let mut children = self.children();
        children.retain(|_, c| matches!(c.try_wait(), Ok(None)));
        children.keys().cloned().collect()
    }
}

impl Launcher for LocalProcesses {
    fn start(&self, name: &str, hardware: &str) -> Result<(), LaunchError> {
        let template = self.templates.get(hardware).ok_or_else(|| {
            LaunchError::UnknownHardware(hardware.chars().take(MAX_NAME_BYTES).collect())
        })?;
        let mut cmd = fill(template, name, hardware)?;
        let mut children = self.children();
        if children.contains_key(name) {
            return Err(LaunchError::Command {
                what: format!("starting `{name}`"),
                message: "an executor of that name is running".to_string(),
            });
        }
        // The child dies with this process (Linux's parent-death signal), so no executor is left
        // behind when the serving process is killed.
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure only calls `prctl`, which is async-signal-safe, between fork
            // and exec.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        let child = self.spawner.spawn(cmd).map_err(|e| LaunchError::Command {
            what: format!("starting `{name}`"),
            message: e.to_string(),
        })?;
        tracing::info!(
            executor = name,
            hardware,
            pid = child.id(),
            "Executor started."
        );
        children.insert(name.to_string(), child);
        Ok(())
    }

    fn stop(&self, name: &str) -> Result<(), LaunchError> {
        let mut child = self.children().remove(name).ok_or_else(|| {
            LaunchError::UnknownExecutor(name.chars().take(MAX_NAME_BYTES).collect())
        })?;
        let pid = libc::pid_t::try_from(child.id())
            .map_err(|_| LaunchError::UnknownExecutor(name.into()))?;
        // SAFETY: `pid` is our own child, not yet reaped (we hold its handle), so it cannot have
        // been reused by another process.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let timeout = self.stop_timeout;
        let name = name.to_string();
        std::thread::spawn(move || {
            let deadline = Instant::now() + timeout;
            while Instant::now() < deadline {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    tracing::info!(executor = %name, "Executor stopped.");
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            tracing::warn!(executor = %name, "Executor did not drain in time; killed.");
            let _ = child.kill();
            let _ = child.wait();
        });
        Ok(())
    }
}

impl Drop for LocalProcesses {
    fn drop(&mut self) {
        for (_, mut child) in std::mem::take(&mut *self.children()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Executors started and stopped by operator-given commands (argument templates).
pub struct CommandTemplate {
    /// Runs to start an executor.
    pub start: Vec<String>,
    /// Runs to stop one.
    pub stop: Vec<String>,
    /// Longest either command may run.
    pub timeout: Duration,
}

impl CommandTemplate {
    fn run(
        &self,
        template: &[String],
        name: &str,
        hardware: &str,
        what: &str,
    ) -> Result<(), LaunchError> {
        let failed = |message: String| LaunchError::Command {
            what: format!("{what} `{name}`"),
            message,
        };
        let mut child = fill(template, name, hardware)?
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| failed(e.to_string()))?;
        let deadline = Instant::now() + self.timeout;
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => return Err(failed(format!("exited with {status}"))),
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(failed("timed out".to_string()));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => return Err(failed(e.to_string())),
            }
        }
    }
}

impl Launcher for CommandTemplate {
    fn start(&self, name: &str, hardware: &str) -> Result<(), LaunchError> {
        self.run(&self.start, name, hardware, "starting")
    }

    fn stop(&self, name: &str) -> Result<(), LaunchError> {
        // An executor is stopped by name; a `{hardware}` in the stop command reads `any`.
        self.run(&self.stop, name, "any", "stopping")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn names_that_could_inject_are_refused() {
        for bad in ["", "a b", "a;rm", "../x", "x\ny", &"n".repeat(65)] {
            assert!(
                matches!(check_name(bad), Err(LaunchError::BadName(_))),
                "{bad:?}"
            );
        }
        assert!(check_name("exec-cpu_2").is_ok());
    }

    #[test]
    fn local_children_start_and_stop_on_sigterm() {
        let launcher = LocalProcesses::new(
            BTreeMap::from([("cpu".to_string(), argv(&["sleep", "30"]))]),
            Duration::from_secs(5),
        );
        launcher.start("e1", "cpu").unwrap();
        launcher.start("e2", "cpu").unwrap();
        assert!(
            launcher.start("e1", "cpu").is_err(),
            "one name, one executor"
        );
        assert!(matches!(
            launcher.start("e3", "gpu"),
            Err(LaunchError::UnknownHardware(_))
        ));
        assert_eq!(launcher.running(), vec!["e1", "e2"]);
        launcher.stop("e1").unwrap();
        assert_eq!(launcher.running(), vec!["e2"]);
        assert!(matches!(
            launcher.stop("e1"),
            Err(LaunchError::UnknownExecutor(_))
        ));
    }

    #[test]
    fn templates_fill_names_into_arguments_without_a_shell() {
        let dir = std::env::temp_dir().join(format!("weir-launcher-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = format!("{}/{{name}}.{{hardware}}", dir.display());
        let launcher = CommandTemplate {
            start: argv(&["touch", &target]),
            stop: argv(&["rm", &format!("{}/{{name}}.cpu", dir.display())]),
            timeout: Duration::from_secs(10),
        };
        launcher.start("x1", "cpu").unwrap();
        assert!(dir.join("x1.cpu").exists());
        launcher.stop("x1").unwrap();
        assert!(!dir.join("x1.cpu").exists());
        assert!(matches!(
            launcher.start("x;touch", "cpu"),
            Err(LaunchError::BadName(_))
        ));
        let failing = CommandTemplate {
            start: argv(&["false"]),
            stop: argv(&[]),
            timeout: Duration::from_secs(10),
        };
        assert!(matches!(
            failing.start("x2", "cpu"),
            Err(LaunchError::Command { .. })
        ));
        assert!(matches!(
            failing.stop("x2"),
            Err(LaunchError::EmptyTemplate)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! The fault harness's network: a namespace per test host, joined to the test's own namespace by
//! a veth pair on a private /30 of its own, and the faults it can inject while both ends keep
//! running — a link taken down and back up, a one-way partition, a token-bucket throttle.
//!
//! Made with `ip netns` / `ip link` / `tc` (iproute2) as root. A namespace that cannot be made is
//! a failed test naming why, never a skipped one. The kernel here has neither `netem` nor
//! classifiers that drop (`matchall`, `prio`), so faults are what links and neighbours allow:
//! - **partition**: the host end of the veth down (both directions dark; sockets stay open, so
//!   nothing ends a TCP stream but time);
//! - **one-way partition**: the host's neighbour entry for the namespace pinned to a MAC nobody
//!   has, so frames towards the namespace are dropped by its kernel while frames from it still
//!   arrive;
//! - **throttle**: a `tbf` qdisc on the host end (the namespace's replies are unthrottled).
//!
//! Everything is undone in `Drop`, which runs on panic too: deleting the namespace deletes its
//! veth end and with it the pair.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// One test host: a network namespace and the veth pair to it.
pub(crate) struct Netns {
    name: String,
    host_if: String,
    ns_if: String,
    host_ip: String,
    ns_ip: String,
}

/// Runs `ip`/`tc` with `args`, returning its error output on failure.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("`{program}` cannot run: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs `ip`/`tc`, panicking with what failed (a fault that cannot be injected fails its test).
fn must(program: &str, args: &[&str]) {
    run(program, args).unwrap_or_else(|e| panic!("fault harness: {e}"));
}

impl Netns {
    /// A fresh namespace with a veth pair to it on a /30 of its own (`10.213.<n>.0/30`, `.1` on
    /// this side, `.2` inside), loopback up. Panics naming the cause when namespaces cannot be
    /// made (not root, no iproute2, no veth).
    pub(crate) fn create() -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // One /30 per (process, namespace); interface names stay under 15 characters.
        let net = (pid.wrapping_mul(7).wrapping_add(n * 4)) % 250;
        let tag = format!("{}{n}", pid % 100_000);
        let ns = Netns {
            name: format!("weir-f{tag}"),
            host_if: format!("wfh{tag}"),
            ns_if: format!("wfn{tag}"),
            host_ip: format!("10.213.{net}.1"),
            ns_ip: format!("10.213.{net}.2"),
        };
        let made = ns.make();
        if let Err(e) = made {
            // Drop removes whatever part was made.
            drop(ns);
            panic!(
                "fault harness: cannot create a network namespace with a veth pair ({e}); these \
                 tests need root and iproute2, and do not pass without them"
            );
        }
        ns
    }

    fn make(&self) -> Result<(), String> {
        // A stale namespace of a recycled pid is ours to replace.
        let _ = run("ip", &["netns", "del", &self.name]);
        run("ip", &["netns", "add", &self.name])?;
        run(
            "ip",
            &[
                "link",
                "add",
                &self.host_if,
                "type",
                "veth",
                "peer",
                "name",
                &self.ns_if,
            ],
        )?;
        run("ip", &["link", "set", &self.ns_if, "netns", &self.name])?;
        run(
            "ip",
            &[
                "addr",
                "add",
                &format!("{}/30", self.host_ip),
                "dev",
                &self.host_if,
            ],
        )?;
        run("ip", &["link", "set", &self.host_if, "up"])?;
        let inside = |args: &[&str]| {
            let mut all = vec!["-n", self.name.as_str()];
            all.extend_from_slice(args);
            run("ip", &all)
        };
        inside(&[
            "addr",
            "add",
            &format!("{}/30", self.ns_ip),
            "dev",
            &self.ns_if,
        ])?;
        inside(&["link", "set", &self.ns_if, "up"])?;
        inside(&["link", "set", "lo", "up"])
    }

    /// The address inside the namespace.
    pub(crate) fn ip(&self) -> &str {
        &self.ns_ip
    }

    /// A command that runs `program` inside the namespace (`ip netns exec` execs it, so the
    /// child's pid is the program's own).
    pub(crate) fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, program]);
        cmd
    }

    /// Partitions the namespace: its link goes dark both ways (both processes keep running).
    pub(crate) fn cut(&self) {
        must("ip", &["link", "set", &self.host_if, "down"]);
    }

    /// Heals [`Netns::cut`].
    pub(crate) fn heal(&self) {
        must("ip", &["link", "set", &self.host_if, "up"]);
    }

    /// Drops every frame from this side to the namespace, while its frames still arrive here.
    pub(crate) fn cut_towards(&self) {
        must(
            "ip",
            &[
                "neigh",
                "replace",
                &self.ns_ip,
                "lladdr",
                "02:00:00:00:00:01",
                "nud",
                "permanent",
                "dev",
                &self.host_if,
            ],
        );
    }

    /// Heals [`Netns::cut_towards`] (the neighbour is learnt again).
    pub(crate) fn heal_towards(&self) {
        must("ip", &["neigh", "del", &self.ns_ip, "dev", &self.host_if]);
    }

    /// Throttles traffic towards the namespace to `rate` (`64kbit`) with a token bucket.
    pub(crate) fn throttle(&self, rate: &str) {
        must(
            "tc",
            &[
                "qdisc",
                "replace",
                "dev",
                &self.host_if,
                "root",
                "tbf",
                "rate",
                rate,
                "burst",
                "16kb",
                "latency",
                "400ms",
            ],
        );
    }

    /// Removes [`Netns::throttle`].
    pub(crate) fn unthrottle(&self) {
        must("tc", &["qdisc", "del", "dev", &self.host_if, "root"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.name]);
        // Gone with the namespace's end already; this covers a half-made pair.
        let _ = run("ip", &["link", "del", &self.host_if]);
    }
}

#[test]
fn a_namespace_is_reachable_and_its_faults_apply_and_heal() {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;
    let ns = Netns::create();
    // A listener on this side; a client inside the namespace (python, as `nc` may be absent).
    let listener = TcpListener::bind(format!("{}:0", ns.host_ip)).expect("bind on the veth");
    let port = listener.local_addr().expect("addr").port();
    let reach = |timeout_s: &str| {
        let script = format!(
            "import socket,sys\ns=socket.socket()\ns.settimeout({timeout_s})\ntry:\n s.connect(('{}',{port}))\n s.sendall(b'hi')\n sys.exit(0)\nexcept Exception:\n sys.exit(1)\n",
            ns.host_ip
        );
        ns.command("python3")
            .args(["-c", &script])
            .status()
            .expect("python3 runs in the namespace")
            .success()
    };
    assert!(reach("5"), "the namespace reaches this side");
    let (mut conn, _) = listener.accept().expect("accepted");
    let mut buf = [0u8; 2];
    conn.read_exact(&mut buf).expect("read");
    assert_eq!(&buf, b"hi");
    ns.cut();
    assert!(!reach("1"), "a cut link carries nothing");
    ns.heal();
    // The link comes back with its carrier (a moment after `up`).
    let back = (0..20).any(|_| {
        let ok = reach("1");
        if !ok {
            std::thread::sleep(Duration::from_millis(100));
        }
        ok
    });
    assert!(back, "a healed link carries again");
    let _ = listener.accept();
    // One way: this side cannot reach in, even though the namespace's frames arrive.
    ns.cut_towards();
    let inside = TcpStream::connect_timeout(
        &format!("{}:9", ns.ip()).parse().expect("addr"),
        Duration::from_millis(800),
    );
    assert!(
        matches!(&inside, Err(e) if e.kind() == std::io::ErrorKind::TimedOut),
        "frames towards the namespace are dropped (a refusal would mean they arrived): {inside:?}"
    );
    ns.heal_towards();
    ns.throttle("64kbit");
    ns.unthrottle();
    drop(conn.write_all(b"x"));
}

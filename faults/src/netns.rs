//! The fault harness's network: a namespace per test host, joined to the test's own namespace by
//! a veth pair on a private /30 of its own ([`Netns::create`]), or several on one bridge so that
//! they reach each other too ([`Lan`]: HAMS members ship states to each other), and the faults it can inject while both ends keep
//! running — a link taken down and back up, a one-way partition, a token-bucket throttle.
//!
//! Made with `ip netns` / `ip link` / `tc` (iproute2) as root. A namespace that cannot be made is
//! a failed test naming why, never a skipped one. The kernel here has neither `netem` nor
//! classifiers that drop (`matchall`, `prio`), so faults are what links and neighbours allow:
//! - **partition**: the host end of the veth down (both directions dark, to this side and, on a
//!   [`Lan`], to the other hosts; sockets stay open, so nothing ends a TCP stream but time);
//! - **one-way partition**: the host's neighbour entry for the namespace pinned to a MAC nobody
//!   has, so frames towards the namespace are dropped by its kernel while frames from it still
//!   arrive;
//! - **cut from here**: the same both ways, this side's entry for the namespace and the
//!   namespace's entry for this side, so that on a [`Lan`] only this side loses the host;
//! - **throttle**: a `tbf` qdisc on the host end (the namespace's replies are unthrottled).
//!
//! Everything is undone in `Drop`, which runs on panic too: deleting the namespace deletes its
//! veth end and with it the pair.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// One test host: a network namespace and the veth pair to it.
pub struct Netns {
    name: String,
    host_if: String,
    ns_if: String,
    ns_ip: String,
    /// This side's address on the link.
    host_ip: String,
    /// This side's address, with its prefix length (`10.213.7.1/30`), on `host_if` or, on a
    /// [`Lan`], on the bridge.
    host_cidr: Option<String>,
    /// The prefix length of `ns_ip`.
    prefix: u8,
    /// The host interface on which this side's neighbour entry for `ns_ip` lives (`host_if`, or
    /// the bridge of a [`Lan`]).
    neigh_dev: String,
    /// The bridge `host_if` joins, on a [`Lan`].
    bridge: Option<String>,
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

/// Runs `ip`/`tc`, panicking with what failed (a fault that cannot be injected fails its test or
/// its experiment).
fn must(program: &str, args: &[&str]) {
    run(program, args).unwrap_or_else(|e| panic!("fault harness: {e}"));
}

impl Netns {
    /// A fresh namespace with a veth pair to it on a /30 of its own (`10.213.<n>.0/30`, `.1` on
    /// this side, `.2` inside), loopback up. Panics naming the cause when namespaces cannot be
    /// made (not root, no iproute2, no veth).
    pub fn create() -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // One /30 per (process, namespace); interface names stay under 15 characters.
        let net = (pid.wrapping_mul(7).wrapping_add(n * 4)) % 250;
        let tag = format!("{}{n}", pid % 100_000);
        let host_if = format!("wfh{tag}");
        let ns = Netns {
            name: format!("weir-f{tag}"),
            ns_if: format!("wfn{tag}"),
            ns_ip: format!("10.213.{net}.2"),
            host_ip: format!("10.213.{net}.1"),
            host_cidr: Some(format!("10.213.{net}.1/30")),
            prefix: 30,
            neigh_dev: host_if.clone(),
            host_if,
            bridge: None,
        };
        Netns::made(ns)
    }

    /// Makes `ns`, or panics naming why (see [`Netns::create`]).
    fn made(ns: Netns) -> Netns {
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
        if let Some(cidr) = &self.host_cidr {
            run("ip", &["addr", "add", cidr, "dev", &self.host_if])?;
        }
        if let Some(bridge) = &self.bridge {
            run("ip", &["link", "set", &self.host_if, "master", bridge])?;
        }
        run("ip", &["link", "set", &self.host_if, "up"])?;
        let inside = |args: &[&str]| {
            let mut all = vec!["-n", self.name.as_str()];
            all.extend_from_slice(args);
            run("ip", &all)
        };
        inside(&[
            "addr",
            "add",
            &format!("{}/{}", self.ns_ip, self.prefix),
            "dev",
            &self.ns_if,
        ])?;
        inside(&["link", "set", &self.ns_if, "up"])?;
        inside(&["link", "set", "lo", "up"])
    }

    /// The address inside the namespace.
    pub fn ip(&self) -> &str {
        &self.ns_ip
    }

    /// This side's address on the link (on a [`Lan`], the bridge's).
    pub fn host_ip(&self) -> &str {
        &self.host_ip
    }

    /// A command that runs `program` inside the namespace (`ip netns exec` execs it, so the
    /// child's pid is the program's own).
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, program]);
        cmd
    }

    /// Partitions the namespace: its link goes dark both ways (both processes keep running).
    pub fn cut(&self) {
        must("ip", &["link", "set", &self.host_if, "down"]);
    }

    /// Heals [`Netns::cut`].
    pub fn heal(&self) {
        must("ip", &["link", "set", &self.host_if, "up"]);
    }

    /// Drops every frame from this side to the namespace, while its frames still arrive here.
    pub fn cut_towards(&self) {
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
                &self.neigh_dev,
            ],
        );
    }

    /// Heals [`Netns::cut_towards`] (the neighbour is learnt again).
    pub fn heal_towards(&self) {
        must("ip", &["neigh", "del", &self.ns_ip, "dev", &self.neigh_dev]);
    }

    /// Cuts the namespace off from this side only, both ways, while on a [`Lan`] it still
    /// reaches the other hosts: this side's neighbour entry for it and its neighbour entry for
    /// this side are both pinned to a MAC nobody has (a front end cut off from a host that its
    /// peers still reach).
    pub fn cut_from_here(&self) {
        self.cut_towards();
        must("ip", &self.inside_neigh_args("replace"));
    }

    /// Heals [`Netns::cut_from_here`] (each side learns the other's neighbour again).
    pub fn heal_from_here(&self) {
        let _ = run("ip", &self.inside_neigh_args("del"));
        self.heal_towards();
    }

    /// `ip -n <ns> neigh <op> <this side's address> … dev <ns_if>`: the namespace's own
    /// neighbour entry for this side, pinned nowhere on `replace`.
    fn inside_neigh_args<'a>(&'a self, op: &'a str) -> Vec<&'a str> {
        let mut args = vec!["-n", self.name.as_str(), "neigh", op, self.host_ip.as_str()];
        if op == "replace" {
            args.extend(["lladdr", "02:00:00:00:00:01", "nud", "permanent"]);
        }
        args.extend(["dev", self.ns_if.as_str()]);
        args
    }

    /// Throttles traffic towards the namespace to `rate` (`64kbit`) with a token bucket.
    pub fn throttle(&self, rate: &str) {
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
    pub fn unthrottle(&self) {
        must("tc", &["qdisc", "del", "dev", &self.host_if, "root"]);
    }
}

/// Hosts on one bridge in this namespace: a /24 of their own (`10.214.<n>.0/24`, the bridge
/// `.1`, host `k` at `.(k + 2)`), each reaching this side and the others; cutting one host's link
/// ([`Netns::cut`]) cuts it off from all of them.
pub struct Lan {
    bridge: String,
    /// The hosts, in the order made.
    pub hosts: Vec<Netns>,
}

impl Lan {
    /// A bridge with `hosts` namespaces on it. Panics naming the cause when they cannot be made.
    pub fn create(hosts: usize) -> Lan {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let net = (pid.wrapping_mul(7).wrapping_add(n)) % 250;
        let tag = format!("{}{n}", pid % 100_000);
        let mut lan = Lan {
            bridge: format!("wfb{tag}"),
            hosts: Vec::new(),
        };
        let bridge = lan.make_bridge(&format!("10.214.{net}.1/24"));
        if let Err(e) = bridge {
            drop(lan);
            panic!(
                "fault harness: cannot create a bridge ({e}); these tests need root and \
                 iproute2, and do not pass without them"
            );
        }
        for k in 0..hosts {
            let host_if = format!("wfl{tag}h{k}");
            lan.hosts.push(Netns::made(Netns {
                name: format!("weir-l{tag}h{k}"),
                ns_if: format!("wfl{tag}n{k}"),
                ns_ip: format!("10.214.{net}.{}", k + 2),
                host_ip: format!("10.214.{net}.1"),
                host_cidr: None,
                prefix: 24,
                neigh_dev: lan.bridge.clone(),
                host_if,
                bridge: Some(lan.bridge.clone()),
            }));
        }
        lan
    }

    fn make_bridge(&self, cidr: &str) -> Result<(), String> {
        let _ = run("ip", &["link", "del", &self.bridge]);
        run("ip", &["link", "add", &self.bridge, "type", "bridge"])?;
        run("ip", &["addr", "add", cidr, "dev", &self.bridge])?;
        run("ip", &["link", "set", &self.bridge, "up"])
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        // The hosts first (each deletes its namespace and pair), then the bridge.
        self.hosts.clear();
        let _ = run("ip", &["link", "del", &self.bridge]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.name]);
        // Gone with the namespace's end already; this covers a half-made pair.
        let _ = run("ip", &["link", "del", &self.host_if]);
    }
}

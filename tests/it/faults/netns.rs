//! The fault harness's own check ([`weir_faults::netns`]): a namespace reaches this side, and
//! each fault it injects applies and heals.

use weir_faults::netns::Netns;

#[test]
fn a_namespace_is_reachable_and_its_faults_apply_and_heal() {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;
    let ns = Netns::create();
    // A listener on this side; a client inside the namespace (python, as `nc` may be absent).
    let listener = TcpListener::bind(format!("{}:0", ns.host_ip())).expect("bind on the veth");
    let port = listener.local_addr().expect("addr").port();
    let reach = |timeout_s: &str| {
        let script = format!(
            "import socket,sys\ns=socket.socket()\ns.settimeout({timeout_s})\ntry:\n s.connect(('{}',{port}))\n s.sendall(b'hi')\n sys.exit(0)\nexcept Exception:\n sys.exit(1)\n",
            ns.host_ip()
        );
        ns.command("python3")
            .args(["-c", &script])
            .status()
            .expect("python3 runs in the namespace")
            .success()
    };
    // A healed link comes back with its carrier (a moment after `up`), a neighbour once learnt.
    let reach_again = || {
        (0..20).any(|_| {
            let ok = reach("1");
            if !ok {
                std::thread::sleep(Duration::from_millis(100));
            }
            ok
        })
    };
    assert!(reach("5"), "the namespace reaches this side");
    let (mut conn, _) = listener.accept().expect("accepted");
    let mut buf = [0u8; 2];
    conn.read_exact(&mut buf).expect("read");
    assert_eq!(&buf, b"hi");
    ns.cut();
    assert!(!reach("1"), "a cut link carries nothing");
    ns.heal();
    assert!(reach_again(), "a healed link carries again");
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
    // Cut off from this side, both ways.
    ns.cut_from_here();
    assert!(!reach("1"), "a host cut off from here reaches nothing here");
    ns.heal_from_here();
    assert!(reach_again(), "a host healed from here carries again");
    let _ = listener.accept();
    ns.throttle("64kbit");
    ns.unthrottle();
    drop(conn.write_all(b"x"));
}

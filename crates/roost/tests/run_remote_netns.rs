//! `roost run` through a network cut: a `roost serve` runs in a network namespace of its own
//! (its own address on a veth link to a bridge in this namespace) and meanwhile the server's
//! link goes down for longer than the io-timeout (packets vanish instead of being refused)
//! and comes back.
//!
//! - A program under roost appends numbered records to a file on the server: roost must
//!   reconnect and every record must reach the server exactly once, in order.
//! - A program removes a file while the link is down and then writes it anew: the removal
//!   left unanswered on the old connection must never reach the server after its retry.
//!
//! Needs root and `ip` (iproute2); as another user the test says so and does nothing.

use roost_testkit::netns::ip;
use roost_testkit::peer;
use roost_testkit::run::roost;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The output of `ip ARGS` (empty if it fails).
fn ip_text(args: &[&str]) -> String {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// The file's text (empty if it cannot be read).
fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// One host in a namespace `roost-rn-TAG`, joined by veth `rrTAGh` (this side) and
/// `rrTAGn` (its side) to bridge `rrTAGb`, which holds 10.SUBNET.0.1 while the host has
/// 10.SUBNET.0.10. TAG is this process's id and the host's number in it (the tests of this
/// file run at once). Dropping it stops the server and removes everything.
struct Host {
    tag: String,
    subnet: u32,
    server: Option<Child>,
}

impl Host {
    fn create() -> Host {
        static CREATING: Mutex<()> = Mutex::new(());
        static HOSTS: AtomicU32 = AtomicU32::new(0);
        // One at a time, so that a subnet found free is taken before the next looks.
        let _one = CREATING.lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        let number = HOSTS.fetch_add(1, Ordering::Relaxed);
        // A /24 no route here mentions yet (group_netns.rs takes 10.100-249).
        let routes = ip_text(&["route", "show", "table", "all"]) + &ip_text(&["-o", "addr"]);
        let subnet = (0..80)
            .map(|k| 20 + (pid + k) % 80)
            .find(|n| !routes.contains(&format!("10.{n}.")))
            .expect("a free 10.N.0.0/24");
        let mut host = Host {
            tag: format!("{}{number}", pid % 100_000),
            subnet,
            server: None,
        };
        // From here on, a failure leaves nothing behind: Drop removes what was made.
        host.build();
        host
    }

    fn build(&mut self) {
        let (bridge, ns, host_end, ns_end) = (self.bridge(), self.ns(), self.link(), self.ns_end());
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&[
            "addr",
            "add",
            &format!("{}/24", self.gateway()),
            "dev",
            &bridge,
        ]);
        ip(&["link", "set", &bridge, "up"]);
        ip(&["netns", "add", &ns]);
        ip(&[
            "link", "add", &host_end, "type", "veth", "peer", "name", &ns_end,
        ]);
        ip(&["link", "set", &ns_end, "netns", &ns]);
        ip(&["link", "set", &host_end, "master", &bridge, "up"]);
        let addr = format!("{}/24", self.addr());
        ip(&["-n", &ns, "addr", "add", &addr, "dev", &ns_end]);
        ip(&["-n", &ns, "link", "set", &ns_end, "up"]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
    }

    /// Fixes each side's neighbour (ARP) entry for the other, so that a cut only loses
    /// packets: no address resolution fails during it or is awaited after it, and TCP's own
    /// retransmissions alone decide when a packet held back by the cut goes out again.
    fn pin_neighbours(&self) {
        let ns_mac = ip_text(&["-n", &self.ns(), "-o", "link", "show", &self.ns_end()]);
        let ns_mac = ns_mac
            .split_whitespace()
            .skip_while(|w| *w != "link/ether")
            .nth(1)
            .expect("the namespace end's MAC address")
            .to_string();
        let bridge_mac = read(Path::new(&format!(
            "/sys/class/net/{}/address",
            self.bridge()
        )));
        ip(&[
            "neigh",
            "replace",
            &self.addr(),
            "lladdr",
            &ns_mac,
            "dev",
            &self.bridge(),
            "nud",
            "permanent",
        ]);
        ip(&[
            "-n",
            &self.ns(),
            "neigh",
            "replace",
            &self.gateway(),
            "lladdr",
            bridge_mac.trim(),
            "dev",
            &self.ns_end(),
            "nud",
            "permanent",
        ]);
    }

    fn bridge(&self) -> String {
        format!("rr{}b", self.tag)
    }

    fn ns(&self) -> String {
        format!("roost-rn-{}", self.tag)
    }

    /// The host's veth end in this namespace: down cuts the host off.
    fn link(&self) -> String {
        format!("rr{}h", self.tag)
    }

    fn ns_end(&self) -> String {
        format!("rr{}n", self.tag)
    }

    /// This namespace's address on the bridge: the one the server sees the client come from.
    fn gateway(&self) -> String {
        format!("10.{}.0.1", self.subnet)
    }

    fn addr(&self) -> String {
        format!("10.{}.0.10", self.subnet)
    }

    /// Starts `roost serve` in the namespace on port 9094, exporting `dir` with every right
    /// to this namespace's address, its stderr going to `log`.
    fn serve(&mut self, dir: &Path, log: &Path) {
        let mut child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns(),
                env!("CARGO_BIN_EXE_roost"),
                "serve",
            ])
            .arg(dir)
            .args(["--listen", &self.addr(), "--port", "9094"])
            .args(["--log-level", "error", "--auth", "address"])
            .args(["--acl", &format!("address:{}=rwldpa", self.gateway())])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("start roost serve in a namespace");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        self.server = Some(child);
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        assert!(first.contains("listening"), "{first:?}");
        // Whatever else it says is read and dropped, so it never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    }

    fn link_up(&self, up: bool) {
        ip(&["link", "set", &self.link(), if up { "up" } else { "down" }]);
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(child) = &mut self.server {
            let _ = child.kill();
            let _ = child.wait();
        }
        let quiet = |args: &[&str]| {
            let _ = Command::new("ip").args(args).stderr(Stdio::null()).status();
        };
        quiet(&["netns", "del", &self.ns()]);
        quiet(&["link", "del", &self.link()]);
        quiet(&["link", "del", &self.bridge()]);
    }
}

/// A child killed (with its process group's tracees, which roost kills as it dies) if the
/// test ends before it does.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `roost run --io-timeout 2 --timeout 120 -- sh -c SCRIPT` with a cache in `cache`,
/// its stdout and stderr going to the files given.
fn run_script(cache: &Path, script: &str, stdout: &Path, stderr: &Path) -> Running {
    Running(
        roost()
            .args(["run", "--io-timeout", "2", "--timeout", "120", "--cache"])
            .arg(cache)
            .args(["--", "sh", "-c", script])
            .stdout(std::fs::File::create(stdout).unwrap())
            .stderr(std::fs::File::create(stderr).unwrap())
            .spawn()
            .unwrap(),
    )
}

impl Running {
    /// Waits for the program to end; past `deadline` it is killed and the test fails,
    /// saying `state()`.
    fn wait_until(&mut self, deadline: Instant, state: impl Fn() -> String) -> ExitStatus {
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.0.kill();
                panic!("roost still runs past its deadline\n{}", state());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn is_running(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

/// A server in a namespace of its own, exporting `export` in a scratch directory that also
/// holds its log (`serve.err`), roost's cache and whatever else a test keeps there.
struct Setup {
    host: Host,
    scratch: tempfile::TempDir,
    export: PathBuf,
}

impl Setup {
    /// `pinned`: with permanent neighbour entries (`Host::pin_neighbours`).
    fn new(pinned: bool) -> Setup {
        let mut host = Host::create();
        if pinned {
            host.pin_neighbours();
        }
        let scratch = tempfile::tempdir().unwrap();
        let export = scratch.path().join("export");
        std::fs::create_dir(&export).unwrap();
        host.serve(&export, &scratch.path().join("serve.err"));
        Setup {
            host,
            scratch,
            export,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.scratch.path().join(name)
    }

    /// `/chirp/ADDR:9094/NAME`: the server's `NAME` as a program under roost names it.
    fn chirp(&self, name: &str) -> String {
        format!("/chirp/{}:9094/{name}", self.host.addr())
    }

    /// Runs `script` under roost (`run_script`); its stdout goes to `out`, stderr to `err`.
    fn run(&self, script: &str) -> Running {
        run_script(
            &self.path("cache"),
            script,
            &self.path("out"),
            &self.path("err"),
        )
    }

    /// What roost and the server said.
    fn context(&self) -> String {
        format!(
            "roost said:\n{}\nthe server said:\n{}",
            read(&self.path("err")),
            read(&self.path("serve.err"))
        )
    }

    /// Whether roost said it lost the server and then that it reconnected.
    fn reconnected(&self) -> bool {
        let err = read(&self.path("err"));
        let chirp = format!("roost: chirp://{}:9094", self.host.addr());
        err.contains(&format!("{chirp}: "))
            && err.contains("reconnecting until --timeout")
            && err.contains(&format!("{chirp}: reconnected"))
    }
}

/// The records the log holds so far.
fn records(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

const N: usize = 100;

/// A shell appending one record per `>>` (each a copy of the file, written back when the
/// redirection closes).
#[test]
fn records_appended_while_the_network_is_cut_and_restored_arrive_exactly_once() {
    appended_through_a_cut(|log| {
        format!("for i in $(seq 1 {N}); do echo record $i >> {log} || exit 1; sleep 0.05; done")
    });
}

/// A program appending through one descriptor held open across the cut (direct mode: a
/// write at the end learnt first, retried at the same place after the reconnection).
#[test]
fn records_appended_through_one_descriptor_across_a_cut_arrive_exactly_once() {
    appended_through_a_cut(|log| {
        format!(
            "python3 -c 'import os, time\nfd = os.open(\"{log}\", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)\nfor i in range(1, {N} + 1):\n    os.write(fd, b\"record %d\\n\" % i)\n    time.sleep(0.05)'"
        )
    });
}

/// Runs the script `script_of(log path)` makes, cuts the network once records flow and
/// restores it: every record arrives exactly once, in order.
fn appended_through_a_cut(script_of: impl Fn(&str) -> String) {
    if !peer::namespaces() {
        return;
    }
    const CUT: Duration = Duration::from_secs(6); // three io-timeouts
    let started = Instant::now();
    let setup = Setup::new(false);
    let log = setup.export.join("log");
    let script = script_of(&setup.chirp("log"));
    let mut program = setup.run(&script);

    // Cut once the records flow, well before they end.
    let deadline = Instant::now() + Duration::from_secs(20);
    while records(&log) < 10 {
        assert!(
            program.is_running(),
            "roost ended early: {}",
            setup.context()
        );
        assert!(
            Instant::now() < deadline,
            "no records arrive: {}",
            setup.context()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    setup.host.link_up(false);
    let at_cut = records(&log);
    std::thread::sleep(CUT);
    let during = records(&log);
    setup.host.link_up(true);
    assert!(
        program.is_running(),
        "the program ended during the cut: {}",
        setup.context()
    );
    assert!(at_cut < N, "all {at_cut} records were in before the cut");
    // What reached the server while it was cut off was sent before the cut.
    assert!(
        during <= at_cut + 1,
        "{at_cut} at the cut, {during} after it"
    );

    let status = program.wait_until(started + Duration::from_secs(50), || {
        format!(
            "{:?} after the test began, {} records on the server\n{}",
            started.elapsed(),
            records(&log),
            setup.context()
        )
    });
    let context = setup.context();
    assert!(status.success(), "{status}\n{context}");
    let expected: String = (1..=N).map(|i| format!("record {i}\n")).collect();
    assert_eq!(read(&log), expected, "{context}");
    assert!(setup.reconnected(), "{context}");
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "{:?}",
        started.elapsed()
    );
    eprintln!(
        "cut at record {at_cut} for {CUT:?}; done in {:?}; {context}",
        started.elapsed()
    );
}

/// A request that TCP had not yet got through when the io-timeout ended its call sits in the
/// old connection's send queue. Closing that connection the ordinary way (a FIN after the
/// data) leaves the kernel retransmitting it; roost meanwhile retries the call on a new
/// connection and goes on, and once the link is back the old connection's next
/// retransmission reaches the server, which carries out the stale request after everything
/// that followed it. Here it is the removal of `f`, which the program then writes anew: the
/// stale removal would delete the new `f`. roost must reset the old connection instead,
/// discarding what is unsent.
///
/// The neighbour entries are pinned, so TCP's retransmission timer alone decides when the
/// old connection's request goes out again. Times from the cut, as measured (retransmission
/// timeout ~0.21 s on this link, doubling): the removal is sent at ~0.4 s and retransmitted
/// at ~0.8, 1.2, 2.1, 3.7, 7.0 and then ~13.7 s. roost's reconnection attempts (2 s each,
/// with back-off sleeps of 0.05, 0.1, ... 1.6 s between them) start at ~2.5, 4.6, 6.8, 9.2
/// and 11.6 s. So with the link back at CUT = 11 s, every retransmission up to 7.0 s was
/// lost, roost reconnects at ~11.6 s and is done by ~12 s, and without the reset the stale
/// removal reaches the server at ~13.7-13.9 s (~1.8 s after roost ends): the test watches `f`
/// until STALE_BY = 16 s after the cut.
#[test]
fn a_request_cut_off_before_its_answer_never_reaches_the_server_after_its_retry() {
    if !peer::namespaces() {
        return;
    }
    const CUT: Duration = Duration::from_secs(11);
    const STALE_BY: Duration = Duration::from_secs(16);
    let started = Instant::now();
    let setup = Setup::new(true);
    let (f, m) = (setup.export.join("f"), setup.export.join("m"));
    let script = format!(
        "echo v1 > {f}; sleep 2; echo m > {m}; ls -l {f}; sleep 0.6; rm {f}; echo v2 > {f}; cat {f}",
        f = setup.chirp("f"),
        m = setup.chirp("m")
    );
    let mut program = setup.run(&script);

    // The removal comes ~0.6 s after `m` reaches the server: cut just before it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !m.exists() {
        assert!(
            program.is_running(),
            "roost ended early: {}",
            setup.context()
        );
        assert!(Instant::now() < deadline, "no m: {}", setup.context());
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    setup.host.link_up(false);
    let cut = Instant::now();
    std::thread::sleep(CUT);
    // The removal was held back by the cut, not done before it.
    let during = read(&f);
    setup.host.link_up(true);
    assert_eq!(
        during,
        "v1\n",
        "f at the end of the cut\n{}",
        setup.context()
    );
    assert!(
        program.is_running(),
        "the program ended during the cut: {}",
        setup.context()
    );

    let status = program.wait_until(cut + STALE_BY, || {
        format!("{:?} after the cut\n{}", cut.elapsed(), setup.context())
    });
    let ended = Instant::now();
    let out = read(&setup.path("out"));
    let context = format!(
        "the program printed {out:?}; f holds {:?}\n{}",
        read(&f),
        setup.context()
    );
    assert!(status.success(), "{status}\n{context}");
    assert!(out.ends_with("\nv2\n"), "{context}");
    assert!(setup.reconnected(), "{context}");
    assert_eq!(read(&f), "v2\n", "f as roost ended\n{context}");

    // Watch f until a stale removal would have arrived.
    while Instant::now() < cut + STALE_BY {
        let now = read(&f);
        assert_eq!(
            now,
            "v2\n",
            "f changed {:?} after roost ended ({:?} after the cut): a stale request reached \
             the server\n{context}",
            ended.elapsed(),
            cut.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(read(&f), "v2\n", "{context}");
    eprintln!(
        "roost ended {:?} after the cut; f held v2 until {:?} after it; done in {:?}",
        ended - cut,
        cut.elapsed(),
        started.elapsed()
    );
}

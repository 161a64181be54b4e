//! Hosts in network namespaces for the tests that need several machines: each host a
//! namespace with its own address, all joined by one bridge that holds the address of the
//! world outside (where the test and its client run). Needs root and `ip` (iproute2): a test
//! asks [`peer::namespaces`](crate::peer::namespaces) first.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {}", args.join(" "));
}

/// Namespaces `roost-TAG-K` with veth links `rgTAGhK` on bridge `rgTAGb`, addresses
/// 10.SUBNET.0.(10+K); the bridge holds 10.SUBNET.0.1. Dropping it kills what was started in
/// it and removes everything.
pub struct Hosts {
    tag: String,
    subnet: u32,
    count: usize,
    children: Vec<Child>,
}

impl Hosts {
    /// `count` hosts; `salt` keeps two tests of one process apart.
    pub fn create(count: usize, salt: u32) -> Hosts {
        let pid = std::process::id() + salt;
        let hosts = Hosts {
            tag: format!("{}", pid % 100_000),
            subnet: 100 + pid % 150,
            count,
            children: Vec::new(),
        };
        let bridge = hosts.bridge();
        // A fixed MAC: a bridge otherwise takes its lowest port's, which changes as hosts are
        // added, and a host that learned the old one cannot reach the outside for half a
        // minute (its ARP entry must expire first).
        let mac = format!("02:00:0a:{:02x}:00:01", hosts.subnet);
        ip(&["link", "add", &bridge, "address", &mac, "type", "bridge"]);
        ip(&[
            "addr",
            "add",
            &format!("{}/24", hosts.outside()),
            "dev",
            &bridge,
        ]);
        ip(&["link", "set", &bridge, "up"]);
        for k in 0..count {
            let (ns, host_end) = (hosts.ns(k), hosts.link(k));
            let ns_end = format!("rg{}n{k}", hosts.tag);
            ip(&["netns", "add", &ns]);
            ip(&[
                "link", "add", &host_end, "type", "veth", "peer", "name", &ns_end,
            ]);
            ip(&["link", "set", &ns_end, "netns", &ns]);
            ip(&["link", "set", &host_end, "master", &bridge, "up"]);
            let addr = format!("{}/24", hosts.addr(k));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", &ns_end]);
            ip(&["-n", &ns, "link", "set", &ns_end, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        hosts
    }

    fn bridge(&self) -> String {
        format!("rg{}b", self.tag)
    }

    pub fn ns(&self, k: usize) -> String {
        format!("roost-{}-{k}", self.tag)
    }

    /// Host `k`'s end of its link outside its namespace (set it down to cut the host off:
    /// its packets then vanish instead of being refused).
    pub fn link(&self, k: usize) -> String {
        format!("rg{}h{k}", self.tag)
    }

    pub fn addr(&self, k: usize) -> String {
        format!("10.{}.0.{}", self.subnet, 10 + k)
    }

    /// The address of the world outside the hosts, on the bridge.
    pub fn outside(&self) -> String {
        format!("10.{}.0.1", self.subnet)
    }

    /// Starts `roost ARGS` in host `k`'s namespace and waits for its first line, which must
    /// say where it listens.
    pub fn start_roost(&mut self, k: usize, args: &[String]) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns(k)])
            .arg(crate::roost_bin())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start roost in a namespace");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(first.contains("listening"), "{first}");
        self.children.push(child);
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for k in 0..self.count {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(k)])
                .status();
            let _ = Command::new("ip")
                .args(["link", "del", &self.link(k)])
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge()])
            .status();
    }
}

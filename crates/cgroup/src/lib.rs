//! Where the cgroup hierarchies are mounted and where this process stands in them
//! ([`Placement`], from `/proc/self/mountinfo` and `/proc/self/cgroup`), and whether they
//! limit its CPU time. Read by the pool's thermostat (roost-server), which places guests in
//! groups of its own, and by the agent, which keeps a CPU awake only where that costs no
//! quota.

use std::path::PathBuf;

/// One cgroup file system mounted, from a line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// `cgroup` (v1) or `cgroup2`.
    pub fstype: String,
    /// The part of the hierarchy mounted there (`/` unless a subtree is).
    pub root: String,
    pub point: PathBuf,
    /// The super options: for v1, its controllers among them (`rw,cpu`).
    pub options: String,
}

impl Mount {
    /// The directory of the group `path` (as `/proc/self/cgroup` names it).
    pub fn dir(&self, path: &str) -> PathBuf {
        let within = match path.strip_prefix(self.root.trim_end_matches('/')) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
            _ => path,
        };
        match within.trim_start_matches('/') {
            "" => self.point.clone(),
            rest => self.point.join(rest),
        }
    }

    fn has(&self, controller: &str) -> bool {
        self.options.split(',').any(|o| o == controller)
    }
}

/// Where the cgroup hierarchies are mounted and which group of each this process is in.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    pub mounts: Vec<Mount>,
    /// From `/proc/self/cgroup`: the controllers of each hierarchy (empty for v2's `0::`)
    /// and the group's path in it.
    pub groups: Vec<(String, String)>,
}

impl Placement {
    /// This process's (a file that cannot be read counts as empty).
    pub fn of_self() -> Placement {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        Placement::parse(&read("/proc/self/mountinfo"), &read("/proc/self/cgroup"))
    }

    /// From the texts of `/proc/self/mountinfo` and `/proc/self/cgroup`.
    pub fn parse(mountinfo: &str, cgroup: &str) -> Placement {
        let mounts = mountinfo
            .lines()
            .filter_map(|line| {
                let (left, right) = line.split_once(" - ")?;
                let mut r = right.split_whitespace();
                let fstype = r.next()?;
                if fstype != "cgroup" && fstype != "cgroup2" {
                    return None;
                }
                let options = r.nth(1).unwrap_or_default();
                let mut l = left.split_whitespace();
                Some(Mount {
                    fstype: fstype.into(),
                    root: l.nth(3)?.into(),
                    point: PathBuf::from(l.next()?),
                    options: options.into(),
                })
            })
            .collect();
        let groups = cgroup
            .lines()
            .filter_map(|line| {
                let mut f = line.splitn(3, ':');
                let (_, list, path) = (f.next()?, f.next()?, f.next()?);
                Some((list.to_string(), path.to_string()))
            })
            .collect();
        Placement { mounts, groups }
    }

    /// The v1 hierarchy with `controller`.
    pub fn v1_mount(&self, controller: &str) -> Option<&Mount> {
        self.mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.has(controller))
    }

    /// This process's group in the v1 hierarchy with `controller` (its root if it is in
    /// none).
    pub fn v1_group(&self, controller: &str) -> Option<PathBuf> {
        let mount = self.v1_mount(controller)?;
        let path = self
            .groups
            .iter()
            .find(|(list, _)| list.split(',').any(|c| c == controller))
            .map_or("/", |(_, path)| path.as_str());
        Some(mount.dir(path))
    }

    /// Whether this process's group, or one above it, limits its CPU time: `cpu.max` other
    /// than `max` (v2), `cpu.cfs_quota_us` other than -1 (v1).
    pub fn cpu_limited(&self) -> bool {
        let v1 = self.v1_mount("cpu").zip(self.v1_group("cpu"));
        let v2 = self.v2_group().and_then(|(mount, own)| Some((mount, own?)));
        let limited_in = |(mount, own): (&Mount, PathBuf), file: &str| {
            own.ancestors()
                .take_while(|dir| dir.starts_with(&mount.point))
                .any(|dir| {
                    std::fs::read_to_string(dir.join(file)).is_ok_and(|v| {
                        let v = v.split_whitespace().next().unwrap_or("max");
                        v != "max" && v != "-1"
                    })
                })
        };
        v1.is_some_and(|g| limited_in(g, "cpu.cfs_quota_us"))
            || v2.is_some_and(|g| limited_in(g, "cpu.max"))
    }

    /// The unified (v2) hierarchy, and this process's group in it.
    pub fn v2_group(&self) -> Option<(&Mount, Option<PathBuf>)> {
        let mount = self.mounts.iter().find(|m| m.fstype == "cgroup2")?;
        let path = self
            .groups
            .iter()
            .find(|(list, _)| list.is_empty())
            .map(|(_, path)| mount.dir(path));
        Some((mount, path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 40 0:40 /lxc/c1 /mnt/sub rw,relatime - cgroup cgroup rw,cpuacct
";

    #[test]
    fn hierarchies_and_own_groups_are_read_from_proc() {
        let p = Placement::parse(
            MOUNTINFO,
            "4:memory:/process_api/7c\n1:cpu:/\n2:cpuacct:/lxc/c1/x\n0::/svc/roost\n",
        );
        assert_eq!(p.mounts.len(), 4);
        assert_eq!(
            p.v1_group("memory"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/process_api/7c"))
        );
        assert_eq!(p.v1_group("cpu"), Some(PathBuf::from("/sys/fs/cgroup/cpu")));
        // A mounted subtree: the path is taken relative to it.
        assert_eq!(p.v1_group("cpuacct"), Some(PathBuf::from("/mnt/sub/x")));
        assert_eq!(p.v1_group("pids"), None);
        let (mount, own) = p.v2_group().unwrap();
        assert_eq!(mount.point, PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(own, Some(PathBuf::from("/sys/fs/cgroup/unified/svc/roost")));
        assert!(Placement::parse("", "").v2_group().is_none());
    }

    #[test]
    fn a_cpu_quota_here_or_above_limits_and_none_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let point = tmp.path().join("cpu");
        let own = point.join("a/b");
        std::fs::create_dir_all(&own).unwrap();
        for dir in [&point, &point.join("a"), &own] {
            std::fs::write(dir.join("cpu.cfs_quota_us"), "-1\n").unwrap();
        }
        // One hierarchy mounted at `point`, as /proc/self/mountinfo would say it.
        let mounted = |point: &std::path::Path, fstype: &str, options: &str| {
            format!(
                "32 31 0:29 / {} rw - {fstype} {fstype} {options}\n",
                point.display()
            )
        };
        let placement = Placement::parse(&mounted(&point, "cgroup", "rw,cpu"), "4:cpu:/a/b\n");
        assert!(!placement.cpu_limited(), "no quota anywhere");
        std::fs::write(point.join("a/cpu.cfs_quota_us"), "50000\n").unwrap();
        assert!(placement.cpu_limited(), "a quota on the parent");
        std::fs::write(point.join("a/cpu.cfs_quota_us"), "-1\n").unwrap();
        std::fs::write(own.join("cpu.cfs_quota_us"), "50000\n").unwrap();
        assert!(placement.cpu_limited(), "a quota on its own group");
        let v2 = tmp.path().join("unified");
        std::fs::create_dir_all(v2.join("svc")).unwrap();
        std::fs::write(v2.join("svc/cpu.max"), "max 100000\n").unwrap();
        let unified = Placement::parse(&mounted(&v2, "cgroup2", "rw"), "0::/svc\n");
        assert!(!unified.cpu_limited(), "cpu.max is max");
        std::fs::write(v2.join("svc/cpu.max"), "20000 100000\n").unwrap();
        assert!(unified.cpu_limited(), "cpu.max set");
    }

    #[test]
    fn own_groups_are_found_on_this_machine() {
        let p = Placement::of_self();
        if p.v1_mount("cpu").is_some() {
            assert!(p.v1_group("cpu").unwrap().join("cgroup.procs").exists());
        }
        if let Some((_, Some(own))) = p.v2_group() {
            assert!(own.join("cgroup.procs").exists(), "{}", own.display());
        }
    }
}

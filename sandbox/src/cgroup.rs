//! The task cgroup: the task limit for a server run as the host's root, which the kernel exempts
//! from `RLIMIT_NPROC` in every user namespace.
//!
//! The launcher, still root with its capabilities and before it unshares, makes a child of its
//! own pids cgroup named for its guard (`mcpsum-<guard pid>`), writes `pids.max` and moves
//! itself in; the server's whole tree stays there (the read-only view and Landlock keep it
//! from writing any cgroup file). The guard, which never entered it, removes the folder once
//! the tree is gone; mcpsum's own sweep ([`sweep`]) removes a folder whose guard was killed
//! before it could. This module owns finding the pids controller (cgroup v1 `pids` hierarchy or
//! cgroup v2 with `pids` enabled below the current cgroup), that folder and its removal.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The prefix of every task cgroup's folder name.
const PREFIX: &str = "mcpsum-";

/// The folder of this process's current pids cgroup, or why there is none to use.
pub(crate) fn current() -> Result<PathBuf, String> {
    let cgroups = fs_err::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let mountinfo = fs_err::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    locate(&cgroups, &mountinfo)
}

/// The pids cgroup folder from the texts of `/proc/self/cgroup` and `/proc/self/mountinfo`:
/// the v1 `pids` hierarchy where there is one, else the v2 hierarchy if `pids` is enabled for
/// the children of the current cgroup.
fn locate(cgroups: &str, mountinfo: &str) -> Result<PathBuf, String> {
    let mut v1 = None;
    let mut v2 = None;
    for line in cgroups.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if controllers.split(',').any(|c| c == "pids") {
            v1 = Some(path);
        } else if id == "0" && controllers.is_empty() {
            v2 = Some(path);
        }
    }
    let mount = |fstype: &str, needs_pids: bool| {
        mountinfo.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let mut r = right.split_whitespace();
            let (ty, _, options) = (r.next()?, r.next()?, r.next().unwrap_or(""));
            if ty != fstype || (needs_pids && !options.split(',').any(|o| o == "pids")) {
                return None;
            }
            let mut l = left.split_whitespace();
            let (root, point) = (l.nth(3)?, l.next()?);
            Some((PathBuf::from(root), PathBuf::from(point)))
        })
    };
    let join = |(root, point): (PathBuf, PathBuf), path: &str| {
        let rel = Path::new(path).strip_prefix(&root).ok()?.to_path_buf();
        Some(point.join(rel))
    };
    if let Some(path) = v1 {
        return mount("cgroup", true)
            .and_then(|m| join(m, path))
            .ok_or_else(|| "the pids cgroup of this process is not mounted here".into());
    }
    let Some(path) = v2 else {
        return Err("no pids controller (neither a cgroup v1 pids hierarchy nor cgroup v2)".into());
    };
    let dir = mount("cgroup2", false)
        .and_then(|m| join(m, path))
        .ok_or("cgroup v2 is not mounted here")?;
    let enabled = fs_err::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
    if enabled.split_whitespace().any(|c| c == "pids") {
        Ok(dir)
    } else {
        Err(format!(
            "the pids controller is not enabled below `{}`",
            dir.display()
        ))
    }
}

/// The folder a launch would use, if it can be made: the current pids cgroup, writable.
pub(crate) fn available() -> Result<PathBuf, String> {
    let dir = current()?;
    nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK)
        .map_err(|e| format!("`{}` is not writable: {e}", dir.display()))?;
    Ok(dir)
}

/// Makes `mcpsum-<guard>` below the current pids cgroup with `pids.max` = `tasks` and moves this
/// process in. On failure nothing is left behind and this process stays where it was.
pub(crate) fn enter(guard: i32, tasks: u64) -> Result<PathBuf, String> {
    let dir = available()?.join(format!("{PREFIX}{guard}"));
    // The `fs-err` errors name the path.
    fs_err::create_dir(&dir).map_err(|e| e.to_string())?;
    let write =
        |file: &str, data: String| fs_err::write(dir.join(file), data).map_err(|e| e.to_string());
    // `0` is the writing thread itself. `cgroup.procs` moves a whole thread group under the
    // kernel's global threadgroup lock, whose writer waits for an RCU grace period (7-18 ms
    // seen here, on the launch path); cgroup v1's `tasks` moves one thread and takes no global
    // lock (0.06 ms). One thread is the whole process while the launcher has no other thread,
    // which it never has after the guard's fork; v2 moves threads only inside a threaded
    // subtree, so it keeps `cgroup.procs`.
    let join = if dir.join("tasks").exists() && single_threaded() {
        "tasks"
    } else {
        "cgroup.procs"
    };
    match write("pids.max", tasks.to_string()).and_then(|()| write(join, "0".into())) {
        Ok(()) => Ok(dir),
        Err(e) => {
            let _ = fs_err::remove_dir(&dir);
            Err(e)
        }
    }
}

/// Whether this process has one thread (`/proc/self/task` lists one entry).
fn single_threaded() -> bool {
    fs_err::read_dir("/proc/self/task").is_ok_and(|d| d.count() == 1)
}

/// Removes the folder of the guard `guard`, a child of the caller's pids cgroup, once it is
/// empty. The tree was just reaped; the kernel may need a moment to let go of the last tasks.
pub(crate) fn remove(guard: i32) {
    let Ok(dir) = current() else { return };
    let dir = dir.join(format!("{PREFIX}{guard}"));
    for _ in 0..100 {
        match fs_err::remove_dir(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy => {
                std::thread::sleep(Duration::from_millis(2));
            }
            _ => return,
        }
    }
}

/// Removes every empty task cgroup below the caller's pids cgroup whose guard is gone (a guard
/// killed with the server's group). A live guard's folder is left alone.
pub(crate) fn sweep() {
    let Ok(dir) = current() else { return };
    let Ok(entries) = fs_err::read_dir(&dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(guard) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(guard), None).is_ok()
            && !is_zombie(guard);
        if !alive {
            // Busy (tasks left) or already gone: nothing to do now.
            let _ = fs_err::remove_dir(entry.path());
        }
    }
}

fn is_zombie(pid: i32) -> bool {
    fs_err::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next())
            == Some("Z")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn a_v1_pids_hierarchy_is_found_from_both_files() {
        let cg = "8:pids:/ci/job\n4:memory:/x\n0::/\n";
        assert_eq!(
            locate(cg, MOUNTS).unwrap(),
            PathBuf::from("/sys/fs/cgroup/pids/ci/job")
        );
        // A container whose pids mount is its own cgroup: the mount root is stripped.
        let mounts = "39 31 0:36 /ci/job /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids\n";
        assert_eq!(
            locate(cg, mounts).unwrap(),
            PathBuf::from("/sys/fs/cgroup/pids")
        );
        let e = locate(cg, "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n").unwrap_err();
        assert!(e.contains("not mounted"), "{e}");
    }

    #[test]
    fn cgroup_v2_needs_pids_enabled_below() {
        let e = locate("0::/nonexistent-mcpsum\n", MOUNTS).unwrap_err();
        assert!(e.contains("not enabled below"), "{e}");
        let e = locate("0::/\n", "").unwrap_err();
        assert!(e.contains("not mounted"), "{e}");
        let e = locate("", "").unwrap_err();
        assert!(e.contains("no pids controller"), "{e}");
    }
}

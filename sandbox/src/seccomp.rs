//! Compiles a [`SeccompTable`] into the three stacked BPF filters of design 5 and installs them,
//! and owns the launcher's floor: three more filters, built here from constants and stacked
//! after the table's, that refuse every way to create or join a namespace and every mount call
//! to whatever the launcher executes. No spec can lift them: the launcher binary carries the
//! AppArmor `userns` grant on Ubuntu, and a server must never inherit it.
//!
//! seccompiler allows one match action per filter, hence separate filters for ENOSYS and EPERM;
//! the kernel applies the most restrictive answer, so the tables never name a syscall twice.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

use crate::plan::{ArgCmp, SeccompTable, SyscallRule};

/// The compiled filters, in installation order.
pub(crate) struct Compiled {
    pub(crate) programs: Vec<(&'static str, BpfProgram)>,
}

/// An empty table: no filter of its own beyond an empty denylist (the floor still applies).
impl Default for SeccompTable {
    fn default() -> Self {
        SeccompTable {
            x32_guard: false,
            enosys: Vec::new(),
            eperm: Vec::new(),
        }
    }
}

/// How many filters the floor adds after a table's (x32 guard on x86_64, ENOSYS, EPERM).
pub(crate) const FLOOR_FILTERS: usize = if cfg!(target_arch = "x86_64") { 3 } else { 2 };

/// The floor as a table: [`crate::FLOOR_SYSCALLS`] refused outright, `clone` with any
/// `CLONE_NEW*` flag refused, `clone3` (whose flags a filter cannot read) answered ENOSYS so
/// that libc falls back to `clone`, and the x32 guard, without which an x32 call number would
/// pass the number-keyed rules.
pub(crate) fn floor_table() -> SeccompTable {
    let mut eperm: Vec<SyscallRule> = crate::FLOOR_SYSCALLS
        .iter()
        .map(|name| SyscallRule {
            syscall: (*name).into(),
            any_of: vec![],
        })
        .collect();
    eperm.push(crate::plan::clone_new_rule());
    SeccompTable {
        x32_guard: cfg!(target_arch = "x86_64"),
        enosys: vec![SyscallRule {
            syscall: "clone3".into(),
            any_of: vec![],
        }],
        eperm,
    }
}

/// Compiles the table for the running architecture, with the floor's filters after it.
pub(crate) fn compile(table: &SeccompTable) -> Result<Compiled, String> {
    let mut compiled = compile_table(table)?;
    let floor = compile_table(&floor_table())?;
    for (name, prog) in floor.programs {
        compiled.programs.push((floor_name(name), prog));
    }
    Ok(compiled)
}

fn floor_name(name: &'static str) -> &'static str {
    match name {
        "x32 guard" => "floor x32 guard",
        "enosys" => "floor enosys",
        _ => "floor denylist",
    }
}

fn compile_table(table: &SeccompTable) -> Result<Compiled, String> {
    let arch = target_arch()?;
    let mut programs = Vec::new();
    if table.x32_guard && cfg!(target_arch = "x86_64") {
        programs.push(("x32 guard", x32_guard()));
    }
    if !table.enosys.is_empty() {
        programs.push(("enosys", filter(&table.enosys, libc::ENOSYS, arch)?));
    }
    programs.push(("denylist", filter(&table.eperm, libc::EPERM, arch)?));
    Ok(Compiled { programs })
}

/// Installs the compiled filters on the calling (only) thread. Sets `no_new_privs` first.
pub(crate) fn install(compiled: &Compiled) -> Result<(), String> {
    for (name, prog) in &compiled.programs {
        seccompiler::apply_filter(prog).map_err(|e| format!("{name} filter: {e}"))?;
    }
    Ok(())
}

fn target_arch() -> Result<TargetArch, String> {
    if cfg!(target_arch = "x86_64") {
        Ok(TargetArch::x86_64)
    } else if cfg!(target_arch = "aarch64") {
        Ok(TargetArch::aarch64)
    } else if cfg!(target_arch = "riscv64") {
        Ok(TargetArch::riscv64)
    } else {
        Err("unsupported CPU architecture".into())
    }
}

fn filter(rules: &[SyscallRule], errno: i32, arch: TargetArch) -> Result<BpfProgram, String> {
    let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for r in rules {
        // Calls this architecture does not have (iopl on aarch64) cannot be made at all.
        let Some(nr) = syscall_number(&r.syscall) else {
            continue;
        };
        let mut alts = Vec::new();
        for conj in &r.any_of {
            let conds = conj.iter().map(condition).collect::<Result<Vec<_>, _>>()?;
            alts.push(SeccompRule::new(conds).map_err(|e| e.to_string())?);
        }
        map.insert(nr, alts);
    }
    let errno = u32::try_from(errno).map_err(|e| e.to_string())?;
    let f = SeccompFilter::new(map, SeccompAction::Allow, SeccompAction::Errno(errno), arch)
        .map_err(|e| e.to_string())?;
    BpfProgram::try_from(f).map_err(|e| e.to_string())
}

fn condition(c: &ArgCmp) -> Result<SeccompCondition, String> {
    let (arg, op, value) = match *c {
        ArgCmp::Eq(a, v) => (a, SeccompCmpOp::Eq, v),
        ArgCmp::Ne(a, v) => (a, SeccompCmpOp::Ne, v),
        ArgCmp::HasBits(a, m) => (a, SeccompCmpOp::MaskedEq(m), m),
    };
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
}

/// x86_64: answer EPERM to every syscall number with the x32 bit (0x4000_0000) set. x32 calls
/// carry the x86_64 audit arch, so the number-keyed denylist would miss them.
fn x32_guard() -> BpfProgram {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
    const RET_ERRNO: u32 = 0x0005_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    let eperm = u32::try_from(libc::EPERM).unwrap_or(1);
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        ins(LD_W_ABS, 0, 0, 4),              // seccomp_data.arch
        ins(JEQ_K, 0, 3, AUDIT_ARCH_X86_64), // other arch: allow (seccompiler kills it)
        ins(LD_W_ABS, 0, 0, 0),              // seccomp_data.nr
        ins(JSET_K, 0, 1, 0x4000_0000),      // __X32_SYSCALL_BIT
        ins(RET_K, 0, 0, RET_ERRNO | eperm),
        ins(RET_K, 0, 0, RET_ALLOW),
    ]
}

macro_rules! numbers {
    ($name:expr; $($sys:ident),* $(,)?) => {
        match $name {
            $(stringify!($sys) => Some(paste_sys!($sys)),)*
            _ => None,
        }
    };
}

macro_rules! paste_sys {
    ($sys:ident) => {{
        #[allow(clippy::useless_conversion)]
        let n = i64::from(sysno::$sys);
        n
    }};
}

/// `libc::SYS_*` under their plain names.
#[allow(non_upper_case_globals)]
mod sysno {
    pub(super) use libc::{
        SYS_acct as acct, SYS_add_key as add_key, SYS_bpf as bpf, SYS_chroot as chroot,
        SYS_clone as clone, SYS_clone3 as clone3, SYS_delete_module as delete_module,
        SYS_fanotify_init as fanotify_init, SYS_finit_module as finit_module,
        SYS_fsconfig as fsconfig, SYS_fsmount as fsmount, SYS_fsopen as fsopen,
        SYS_fspick as fspick, SYS_init_module as init_module, SYS_io_uring_enter as io_uring_enter,
        SYS_io_uring_register as io_uring_register, SYS_io_uring_setup as io_uring_setup,
        SYS_ioctl as ioctl, SYS_kcmp as kcmp, SYS_kexec_file_load as kexec_file_load,
        SYS_kexec_load as kexec_load, SYS_keyctl as keyctl, SYS_mount as mount,
        SYS_mount_setattr as mount_setattr, SYS_move_mount as move_mount,
        SYS_name_to_handle_at as name_to_handle_at, SYS_open_by_handle_at as open_by_handle_at,
        SYS_open_tree as open_tree, SYS_perf_event_open as perf_event_open,
        SYS_personality as personality, SYS_pidfd_getfd as pidfd_getfd,
        SYS_pivot_root as pivot_root, SYS_process_vm_readv as process_vm_readv,
        SYS_process_vm_writev as process_vm_writev, SYS_ptrace as ptrace, SYS_quotactl as quotactl,
        SYS_reboot as reboot, SYS_request_key as request_key, SYS_setns as setns,
        SYS_socket as socket, SYS_socketpair as socketpair, SYS_swapoff as swapoff,
        SYS_swapon as swapon, SYS_syslog as syslog, SYS_truncate as truncate,
        SYS_umount2 as umount2, SYS_unshare as unshare, SYS_userfaultfd as userfaultfd,
        SYS_vhangup as vhangup,
    };
    pub(super) use libc::{
        SYS_fchmod as fchmod, SYS_fchmodat as fchmodat, SYS_fchmodat2 as fchmodat2,
        SYS_fchown as fchown, SYS_fchownat as fchownat, SYS_fremovexattr as fremovexattr,
        SYS_fsetxattr as fsetxattr, SYS_ioprio_set as ioprio_set, SYS_lremovexattr as lremovexattr,
        SYS_lsetxattr as lsetxattr, SYS_migrate_pages as migrate_pages,
        SYS_move_pages as move_pages, SYS_mq_getsetattr as mq_getsetattr,
        SYS_mq_notify as mq_notify, SYS_mq_open as mq_open, SYS_mq_timedreceive as mq_timedreceive,
        SYS_mq_timedsend as mq_timedsend, SYS_mq_unlink as mq_unlink, SYS_msgctl as msgctl,
        SYS_msgget as msgget, SYS_msgrcv as msgrcv, SYS_msgsnd as msgsnd,
        SYS_prlimit64 as prlimit64, SYS_process_madvise as process_madvise,
        SYS_removexattr as removexattr, SYS_sched_setaffinity as sched_setaffinity,
        SYS_sched_setattr as sched_setattr, SYS_sched_setparam as sched_setparam,
        SYS_sched_setscheduler as sched_setscheduler, SYS_semctl as semctl, SYS_semget as semget,
        SYS_semop as semop, SYS_semtimedop as semtimedop, SYS_setpriority as setpriority,
        SYS_setxattr as setxattr, SYS_shmat as shmat, SYS_shmctl as shmctl, SYS_shmget as shmget,
        SYS_utimensat as utimensat,
    };
    /// Linux 6.13; one number on every architecture (new calls share the generic table), not
    /// yet in `libc`.
    pub(super) const setxattrat: libc::c_long = 463;
    pub(super) const removexattrat: libc::c_long = 466;
    #[cfg(target_arch = "x86_64")]
    pub(super) use libc::{
        SYS_chmod as chmod, SYS_chown as chown, SYS_futimesat as futimesat, SYS_ioperm as ioperm,
        SYS_iopl as iopl, SYS_lchown as lchown, SYS_uselib as uselib, SYS_utime as utime,
        SYS_utimes as utimes,
    };
}

/// The syscall number of `name` on this architecture.
pub(crate) fn syscall_number(name: &str) -> Option<i64> {
    #[cfg(target_arch = "x86_64")]
    if let Some(n) =
        numbers!(name; chmod, chown, futimesat, ioperm, iopl, lchown, uselib, utime, utimes)
    {
        return Some(n);
    }
    numbers!(name;
        acct, add_key, bpf, chroot, clone, clone3, delete_module, fanotify_init, finit_module,
        fsconfig, fsmount, fsopen, fspick, init_module, io_uring_enter, io_uring_register,
        io_uring_setup, ioctl, kcmp, kexec_file_load, kexec_load, keyctl, mount, mount_setattr,
        move_mount, name_to_handle_at, open_by_handle_at, open_tree, perf_event_open, personality,
        pidfd_getfd, pivot_root, process_vm_readv, process_vm_writev, ptrace, quotactl, reboot,
        request_key, setns, socket, socketpair, swapoff, swapon, syslog, truncate, umount2,
        unshare, userfaultfd, vhangup, fchmod, fchmodat, fchmodat2, fchown, fchownat,
        fremovexattr, fsetxattr, ioprio_set, lremovexattr, lsetxattr, migrate_pages, move_pages,
        mq_getsetattr, mq_notify, mq_open, mq_timedreceive, mq_timedsend, mq_unlink, msgctl,
        msgget, msgrcv, msgsnd, prlimit64, process_madvise, removexattr, removexattrat,
        sched_setaffinity, sched_setattr, sched_setparam, sched_setscheduler, semctl, semget,
        semop, semtimedop, setpriority, setxattr, setxattrat, shmat, shmctl, shmget, utimensat,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ReadOnlyView;
    use crate::policy::NetworkMode;

    /// The floor is there whatever the table: an empty one compiles to an empty denylist and
    /// the whole floor, and every floor name has a number here.
    #[test]
    fn the_floor_follows_every_table_even_an_empty_one() {
        let c = compile(&SeccompTable::default()).unwrap();
        let names: Vec<&str> = c.programs.iter().map(|(n, _)| *n).collect();
        let mut want = vec!["denylist"];
        if cfg!(target_arch = "x86_64") {
            want.push("floor x32 guard");
        }
        want.extend(["floor enosys", "floor denylist"]);
        assert_eq!(names, want);
        for r in floor_table().eperm.iter().chain(&floor_table().enosys) {
            assert!(syscall_number(&r.syscall).is_some(), "{}", r.syscall);
        }
        for name in ["unshare", "setns", "mount", "clone"] {
            assert!(
                floor_table().eperm.iter().any(|r| r.syscall == name),
                "{name}"
            );
        }
    }

    #[test]
    fn every_table_name_has_a_number_here() {
        for abi in [1, 7] {
            for mode in [NetworkMode::None, NetworkMode::Egress { allow: vec![] }] {
                for view in [
                    ReadOnlyView::MountNamespace,
                    ReadOnlyView::Seccomp("test".into()),
                ] {
                    let t = crate::plan::seccomp_table(&mode, abi, &view);
                    for r in t.eperm.iter().chain(&t.enosys) {
                        assert!(syscall_number(&r.syscall).is_some(), "{}", r.syscall);
                    }
                    let c = compile(&t).unwrap();
                    assert_eq!(c.programs.len(), 3 + FLOOR_FILTERS);
                }
            }
        }
    }
}

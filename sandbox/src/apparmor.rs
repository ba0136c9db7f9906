//! Ubuntu's restriction of unprivileged user namespaces (design 8): what the launcher asks of its
//! own label before it unshares, and what mcpsum asks of the machine when it plans (whether the
//! launcher's profile is loaded). Owns nothing else; the sandbox's other modules ask it.

use crate::LAUNCHER_NAME;

/// Ubuntu >= 23.10: an unconfined process that creates a user namespace loses every
/// capability in it. The launcher checks its own label before `unshare` (design 8): the profile
/// attaches to the launcher binary, not to mcpsum, so only the launcher can tell.
pub(crate) fn check_apparmor_userns() -> Result<(), String> {
    let sysctl = fs_err::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
        .unwrap_or_default();
    let label = fs_err::read_to_string("/proc/self/attr/apparmor/current")
        .or_else(|_| fs_err::read_to_string("/proc/self/attr/current"))
        .unwrap_or_default();
    if apparmor_blocks_userns(&sysctl, &label, nix::unistd::geteuid().is_root()) {
        return Err(format!(
            "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1) and no profile is attached to the launcher `{LAUNCHER_NAME}`"
        ));
    }
    Ok(())
}

/// Whether AppArmor would take every capability from a user namespace the launcher makes: the
/// sysctl is 1, the user is not root, and no profile for the launcher is loaded. mcpsum's own
/// label says nothing (the profile attaches to the launcher binary only); an unreadable profile
/// list counts as "restricted", so `network.allow: []` takes its compensation and a server with
/// hosts fails closed in the launcher, naming the fix.
pub(crate) fn apparmor_restricts_userns() -> bool {
    let sysctl = fs_err::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
        .unwrap_or_default();
    if sysctl.trim() != "1" || nix::unistd::geteuid().is_root() {
        return false;
    }
    let profiles =
        fs_err::read_to_string("/sys/kernel/security/apparmor/profiles").unwrap_or_default();
    !profiles
        .lines()
        .any(|l| l.split(' ').next() == Some(LAUNCHER_NAME))
}

/// Design 8: the sysctl is 1 and the launcher runs unconfined (no profile granting `userns`).
/// Root keeps `CAP_SYS_ADMIN` and is not restricted.
fn apparmor_blocks_userns(sysctl: &str, label: &str, root: bool) -> bool {
    sysctl.trim() == "1" && !root && label.trim().trim_end_matches('\0').trim() == "unconfined"
}

#[cfg(test)]
mod tests {
    use super::apparmor_blocks_userns;

    #[test]
    fn apparmor_userns_restriction_is_detected() {
        assert!(apparmor_blocks_userns("1\n", "unconfined\n", false));
        assert!(!apparmor_blocks_userns("1\n", "unconfined\n", true));
        assert!(!apparmor_blocks_userns("0\n", "unconfined\n", false));
        assert!(!apparmor_blocks_userns("", "", false));
        assert!(!apparmor_blocks_userns(
            "1\n",
            "mcpsum-launch (unconfined)\n",
            false
        ));
    }
}

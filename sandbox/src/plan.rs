//! Policy -> plan: the pure part of the sandbox.
//!
//! [`plan_for_kernel`] turns a [`LaunchRequest`] into a [`SandboxPlan`]: the read set (runtime
//! base + interpreter prefixes + `filesystem.read`), the write set (`${TMP}`, per-server caches,
//! `filesystem.write`), the character devices, the environment, the Landlock level with its
//! compensations and the seccomp table. Apart from resolving the command on `PATH`, reading a
//! script's `#!` line, reading `/etc/passwd` for the people's homes, resolving rule paths to
//! real paths and `stat`ing them it does no I/O, and it changes nothing: everything here is
//! unit-tested as a whole value. Applying the plan is the launcher's job (`launcher.rs`).
//!
//! It also owns what no read rule may open ([`check_read_set`]): the root, an ancestor of a
//! protected home, by path or by identity (a bind mount), and, for rules it derives itself, the
//! protected paths, every user's home, the TLS keys and the credential paths
//! ([`CREDENTIAL_PATHS`], the one list other features reuse), and which folders below a home a
//! command's prefix may be ([`HOME_INSTALL_LAYOUTS`]).

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::SandboxError;
use crate::policy::{Limits, NetworkMode, PolicyPath, ValidatedPolicy};

/// Everything needed to launch one server under its sandbox.
#[derive(Clone, Debug)]
pub struct LaunchRequest {
    /// The server's name in `mcp.lock` (names its cache directory).
    pub server: String,
    /// Its validated `policy.sandbox`.
    pub policy: ValidatedPolicy,
    /// The locked argv (I1).
    pub argv: Vec<String>,
    /// Exactly the server's environment as mcpsum computed it (I2). The plan adds `TMPDIR`/`TMP`,
    /// the per-server cache variables for `uv`/`uvx`/`npm`/`npx`, and (in the launcher, allow
    /// mode) the proxy variables.
    pub env: Vec<(OsString, OsString)>,
    /// mcpsum's state directory; per-server caches live in `<state_dir>/cache/<server>/`.
    pub state_dir: PathBuf,
}

/// Why a path is in the read or write set (shown by `sandbox test`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Origin {
    /// The documented runtime base (crate docs).
    RuntimeBase,
    /// The command's own install prefix (found on the server's `PATH`).
    Command,
    /// The interpreter named by the command's `#!` line, and its prefix.
    Interpreter,
    /// A `filesystem.read` / `filesystem.write` entry; the key.
    Policy(String),
    /// The private `${TMP}`.
    Tmp,
    /// A per-server package-manager cache (design 7.3).
    Cache,
    /// The probe binary of `sandbox test`.
    Probe,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::RuntimeBase => f.write_str("runtime base"),
            Origin::Command => f.write_str("command prefix"),
            Origin::Interpreter => f.write_str("interpreter prefix"),
            Origin::Policy(k) => write!(f, "`{k}`"),
            Origin::Tmp => f.write_str("private tmp"),
            Origin::Cache => f.write_str("per-server cache"),
            Origin::Probe => f.write_str("probe binary"),
        }
    }
}

/// One Landlock path rule of the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsRule {
    /// The path (a `${TMP}` path is resolved by `prepare`).
    pub path: PolicyPath,
    /// Why it is there.
    pub origin: Origin,
    /// Whether a missing path is an error (policy paths) or skipped (runtime base entries that a
    /// distribution does not have, such as `/lib32` or `/etc/pki`).
    pub required: bool,
}

/// The value of one variable of the server's environment.
#[derive(Clone, PartialEq, Eq)]
pub enum EnvValue {
    /// A value mcpsum passed through (never printed: `Debug` redacts it).
    Given(OsString),
    /// The private `${TMP}` path, known once `prepare` made it.
    Tmp,
    /// A path the plan chose (cache directories).
    Path(PathBuf),
}

impl fmt::Debug for EnvValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvValue::Given(_) => f.write_str("Given(<redacted>)"),
            EnvValue::Tmp => f.write_str("Tmp"),
            EnvValue::Path(p) => f.debug_tuple("Path").field(p).finish(),
        }
    }
}

/// A Landlock feature missing on this kernel and what stands in for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compensation {
    /// The Landlock feature (`truncate`, `tcp`, `scopes`, ...).
    pub feature: String,
    /// The ABI that brings it.
    pub abi: u32,
    /// What mcpsum does instead, or what stays possible.
    pub instead: String,
}

/// The Landlock level of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockPlan {
    /// The kernel's Landlock ABI (0 = none).
    pub abi: u32,
    /// The hard minimum: ABI 1.
    pub required: u32,
    /// Features of newer ABIs missing here, with their compensation.
    pub compensations: Vec<Compensation>,
}

/// Comparison of one syscall argument.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArgCmp {
    /// 32-bit argument equals the value.
    Eq(u8, u64),
    /// 32-bit argument differs from the value.
    Ne(u8, u64),
    /// 64-bit argument has every bit of the mask set.
    HasBits(u8, u64),
}

/// One syscall of a seccomp filter: matches when any of `any_of` holds (each an AND of
/// comparisons); an empty `any_of` matches every call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallRule {
    /// Syscall name (`libc::SYS_<name>`); names absent on this architecture are skipped.
    pub syscall: String,
    /// Alternatives, each a conjunction of argument comparisons.
    pub any_of: Vec<Vec<ArgCmp>>,
}

/// The three stacked seccomp filters (design 5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeccompTable {
    /// x86_64: syscall numbers with the x32 bit answer EPERM.
    pub x32_guard: bool,
    /// Calls answered with ENOSYS (`clone3`: its flags cannot be inspected, glibc falls back).
    pub enosys: Vec<SyscallRule>,
    /// Calls answered with EPERM.
    pub eperm: Vec<SyscallRule>,
}

/// How the filesystem outside the write set is kept read-only in every respect: modes, owners,
/// times and extended attributes, which Landlock (below ABI 13) does not govern.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReadOnlyView {
    /// The server's own user + mount namespace: the launcher remounts the whole tree read-only
    /// and binds the write set (`${TMP}`, the caches, `filesystem.write`) read-write again, so
    /// `chmod`, `utimensat`, ... outside it fail with `EROFS`, for root too. The task limit counts
    /// the server's tree alone (`RLIMIT_NPROC` is counted per user namespace).
    MountNamespace,
    /// No user namespace can be made here (`network.allow: []` only; the reason): seccomp
    /// refuses every change of mode, owner, times and extended attributes anywhere, the write
    /// set included, and the task limit is the user's running tasks plus the limit.
    Seccomp(String),
}

impl fmt::Display for ReadOnlyView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadOnlyView::MountNamespace => f.write_str(
                "own user + mount namespace: everything outside the write set is mounted read-only",
            ),
            ReadOnlyView::Seccomp(why) => write!(
                f,
                "missing ({why}): seccomp refuses every mode, owner, time and xattr change, also in the write set"
            ),
        }
    }
}

/// The complete plan for one sandboxed launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxPlan {
    /// Server name.
    pub server: String,
    /// Network mode.
    pub network: NetworkMode,
    /// The resolved program (`argv[0]` on the server's `PATH`).
    pub program: PathBuf,
    /// The argv, `argv[0]` as locked.
    pub argv: Vec<String>,
    /// Read-only (and execute) rules.
    pub read: Vec<FsRule>,
    /// Read-write rules.
    pub write: Vec<FsRule>,
    /// Character devices readable and writable (no other device rights).
    pub devices: Vec<PathBuf>,
    /// Directories `prepare` creates (0700) before launch: `${TMP}` write paths and caches.
    pub create_dirs: Vec<PolicyPath>,
    /// The server's environment, in order.
    pub env: Vec<(OsString, EnvValue)>,
    /// Landlock level and compensations.
    pub landlock: LandlockPlan,
    /// The seccomp filters.
    pub seccomp: SeccompTable,
    /// How modes, owners, times and xattrs outside the write set are kept unchanged.
    pub view: ReadOnlyView,
    /// The resource limits of the server's tree.
    pub limits: Limits,
    /// Protected paths the launcher re-checks write rules against.
    pub protected: Vec<(String, PathBuf)>,
}

impl SandboxPlan {
    /// The names of the server's environment (never the values).
    pub fn env_names(&self) -> Vec<String> {
        self.env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }
}

/// Runtime base read set (design 7.2). Directories and files; missing ones are skipped.
pub const RUNTIME_BASE: &[&str] = &[
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    // TLS trust: the certificate stores, bundles and OpenSSL configuration that OpenSSL,
    // Python's `ssl`, Node and uv read, never `/etc/ssl` or `/etc/pki` as a whole: their
    // `private/` folders hold the host's TLS keys (`ssl-cert-snakeoil.key`, a web server's).
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ssl/openssl.cnf.d",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki/tls/certs",
    "/etc/pki/tls/cert.pem",
    "/etc/pki/tls/openssl.cnf",
    "/etc/pki/tls/openssl.d",
    "/etc/pki/ca-trust/extracted",
    "/etc/crypto-policies",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/resolv.conf",
    "/etc/alternatives",
    "/etc/mime.types",
    "/etc/os-release",
    "/dev/random",
    "/dev/urandom",
    "/proc",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    "/sys/kernel/mm/transparent_hugepage",
];

/// Folders of the host's TLS private keys: never in any read set derived by the plan, and
/// checked unreadable by `sandbox test`.
pub const TLS_KEY_DIRS: &[&str] = &["/etc/ssl/private", "/etc/pki/tls/private"];

/// Well-known credential files and folders, relative to the home directory: registry and cloud
/// tokens, SSH and GnuPG keys, browser profiles (saved passwords, cookies) and keyrings. A
/// command's install prefix never covers one (Landlock cannot carve an exception out of a
/// granted folder, so the prefix shrinks instead), and a policy that lists one is warned about
/// ([`exposed_credentials`]). This is the one list: other features reuse it.
pub const CREDENTIAL_PATHS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pypirc",
    ".local/share/uv/credentials",
    ".gem/credentials",
    ".config/gh",
    ".config/hub",
    ".docker/config.json",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".pgpass",
    ".my.cnf",
    ".password-store",
    ".local/share/keyrings",
    ".local/share/kwalletd",
    ".mozilla",
    ".thunderbird",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".config/op",
    ".config/rclone",
    // AI coding agents' tokens and the npm prefix a user-level `npm -g` installs into (its
    // `etc/npmrc` holds registry tokens).
    ".claude",
    ".claude.json",
    ".codex",
    ".config/github-copilot",
    ".npm-global",
    // Shell and REPL histories: commands typed with tokens in them.
    ".bash_history",
    ".zsh_history",
    ".histfile",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".lesshst",
    ".viminfo",
];

/// Install layouts below a home directory, as path components (`*` is any one name): a command
/// at or below one gets that folder as its prefix. Anywhere else in a home a command gets its
/// own folder: other folders there hold tokens no list can name in advance.
pub const HOME_INSTALL_LAYOUTS: &[&[&str]] = &[
    &[".nvm", "versions", "node", "*"],
    &[".pyenv", "versions", "*"],
    // pyenv's shims run `pyenv` itself from its `libexec/`.
    &[".pyenv"],
    &[".local", "share", "uv", "tools", "*"],
    &[".local", "share", "uv", "python", "*"],
    &[".volta", "tools", "image", "*", "*"],
    // volta's shims are one binary that reads `tools/`.
    &[".volta"],
    &[
        ".local",
        "share",
        "fnm",
        "node-versions",
        "*",
        "installation",
    ],
    &[".fnm", "node-versions", "*", "installation"],
    &[".asdf", "installs", "*", "*"],
    &[".asdf"],
    &[".local", "share", "mise", "installs", "*", "*"],
    &[".rustup", "toolchains", "*"],
    &[".npm-global", "lib", "node_modules", "*"],
    &[".cargo", "bin"],
];

/// What a home directory from `/etc/passwd` other than the protected ones is called.
const USER_HOME: &str = "a user's home directory";

/// The home directories of the machine's people, from `/etc/passwd`: entries with a login
/// shell, or whose home lies below `/home` or is `/root`. A derived prefix never is one, nor an
/// ancestor of one, nor covers one of their credential paths, whatever `$HOME` says.
pub fn user_homes() -> Vec<PathBuf> {
    fs_err::read_to_string("/etc/passwd")
        .map(|t| passwd_homes(&t))
        .unwrap_or_default()
}

/// [`user_homes`] from the text of a passwd file.
pub fn passwd_homes(passwd: &str) -> Vec<PathBuf> {
    const NO_LOGIN: &[&str] = &["nologin", "false", "sync", "shutdown", "halt", ""];
    let mut out: Vec<PathBuf> = Vec::new();
    for line in passwd.lines() {
        let f: Vec<&str> = line.split(':').collect();
        let (Some(home), Some(shell)) = (f.get(5), f.get(6)) else {
            continue;
        };
        let home = Path::new(home);
        let shell = Path::new(shell).file_name().and_then(OsStr::to_str);
        let person = !NO_LOGIN.contains(&shell.unwrap_or(""));
        let listed = home.starts_with("/home") || home.starts_with("/root");
        if home.is_absolute() && home.parent().is_some() && (person || listed) {
            let home = crate::policy::canonical_or_lexical(home);
            if home.parent().is_some() && !out.contains(&home) {
                out.push(home);
            }
        }
    }
    out
}

/// The credential paths of `home` ([`CREDENTIAL_PATHS`]), each as written below `home` and, if
/// it is a link, also where it leads (a `~/.ssh` kept in a dotfiles repository).
pub fn credential_paths(home: &Path) -> Vec<PathBuf> {
    let home = crate::policy::canonical_or_lexical(home);
    // Most of the list is absent: when the first name below the (real) home has no entry, the
    // path is its own real form. One listing of the home says which names are there; where it
    // cannot be listed, one `lstat` per path.
    let names: Option<std::collections::HashSet<OsString>> = fs_err::read_dir(&home)
        .ok()
        .map(|d| {
            d.map(|e| e.map(|e| e.file_name()))
                .collect::<Result<_, _>>()
        })
        .and_then(Result::ok);
    let mut out = Vec::new();
    for rel in CREDENTIAL_PATHS {
        let p = home.join(rel);
        let first = rel.split('/').next().unwrap_or(rel);
        let absent = match &names {
            Some(names) => !names.contains(OsStr::new(first)),
            None => crate::policy::has_no_entry(&home.join(first)),
        };
        let real = if absent {
            p.clone()
        } else {
            crate::policy::canonical_or_lexical(&p)
        };
        if real != p {
            out.push(real);
        }
        out.push(p);
    }
    out
}

/// Credential paths a policy opens on purpose: each `filesystem.read` / `filesystem.write` entry
/// that covers an existing credential path or lies inside one, with its key and that path.
/// Allowed (the policy is the person's), but `sandbox test` and `lock` say so.
pub fn exposed_credentials(policy: &ValidatedPolicy) -> Vec<(String, PathBuf)> {
    let creds: Vec<PathBuf> = homes_of(&policy.protected)
        .into_iter()
        .flat_map(credential_paths)
        .collect();
    let mut out = Vec::new();
    for (key, p) in policy.read.iter().chain(&policy.write) {
        let PolicyPath::Host(p) = p else { continue };
        for c in &creds {
            let opens = (c.starts_with(p) && c.symlink_metadata().is_ok()) || p.starts_with(c);
            if opens && !out.iter().any(|(k, q)| k == key && q == c) {
                out.push((key.clone(), c.clone()));
            }
        }
    }
    out
}

/// Folders of the system layout. A write rule on one (or on an ancestor of one) lets a server
/// change what every program on the host runs or reads: allowed (the policy is the person's),
/// but `lock` warns ([`system_write_rules`]) and learn mode never proposes a rule on one.
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libexec",
    "/usr/include",
    "/usr/share",
    "/usr/src",
    "/usr/local",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/usr/local/lib",
    "/usr/local/share",
    "/usr/local/include",
    "/usr/local/src",
    "/opt",
    "/etc",
    "/var",
    "/var/lib",
    "/var/cache",
    "/var/log",
    "/var/spool",
    "/var/opt",
    "/var/local",
    "/var/mail",
    "/var/run",
    "/var/backups",
    "/run",
    "/srv",
    "/mnt",
    "/media",
    "/boot",
    "/home",
    "/root",
    "/lib",
    "/lib32",
    "/lib64",
    "/bin",
    "/sbin",
    "/proc",
    "/sys",
    "/dev",
    "/tmp",
    "/var/tmp",
];

/// Whether `p` is one of [`SYSTEM_DIRS`] or an ancestor of one (`/` included).
pub fn is_system_folder(p: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|d| Path::new(d).starts_with(p))
}

/// The policy's write rules on a system folder ([`SYSTEM_DIRS`]): key and path.
pub fn system_write_rules(policy: &ValidatedPolicy) -> Vec<(String, PathBuf)> {
    policy
        .write
        .iter()
        .filter_map(|(key, p)| match p {
            PolicyPath::Host(p) if is_system_folder(p) => Some((key.clone(), p.clone())),
            _ => None,
        })
        .collect()
}

/// The home directories among the protected paths: `$HOME` and the passwd home of the
/// effective uid.
fn homes_of(protected: &[(String, PathBuf)]) -> Vec<&Path> {
    protected
        .iter()
        .filter(|(what, _)| what == crate::policy::HOME_DIRECTORY)
        .map(|(_, p)| p.as_path())
        .collect()
}

/// Python's `/etc/pythonX.Y` directories are added when present (names vary by version).
const ETC_PYTHON_PREFIX: &str = "python";

/// Character devices readable and writable by every server.
pub const RW_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Directories of the runtime base whose contents need no interpreter-prefix rule.
const BASE_CODE_DIRS: &[&str] = &["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"];

/// `PATH` used to find `argv[0]` when the server's environment has none (I2 withholds `PATH`
/// unless listed); the same default `execvp` falls back to, plus `/usr/local`.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Builds the plan, detecting the kernel's Landlock ABI and whether a user namespace can be made.
pub fn plan(req: &LaunchRequest) -> Result<SandboxPlan, SandboxError> {
    #[cfg(target_os = "linux")]
    {
        let abi = crate::sys::landlock_abi();
        let view = match userns_unavailable() {
            Some(why) if req.policy.network == NetworkMode::None => ReadOnlyView::Seccomp(why),
            // With hosts listed the namespace is required: the launcher names the failure.
            _ => ReadOnlyView::MountNamespace,
        };
        plan_with_view(req, abi, view)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = req;
        Err(SandboxError::Unsupported)
    }
}

/// `clone` with any `CLONE_NEW*` flag (one masked-equality rule per flag): the plan's table and
/// the launcher's floor both refuse it.
pub(crate) fn clone_new_rule() -> SyscallRule {
    SyscallRule {
        syscall: "clone".into(),
        any_of: CLONE_NEW_FLAGS
            .iter()
            .map(|f| vec![ArgCmp::HasBits(0, *f)])
            .collect(),
    }
}

/// Why this machine cannot give the launcher a user namespace, read from the settings that
/// refuse one (`user.max_user_namespaces`, Debian's `kernel.unprivileged_userns_clone`, Ubuntu's
/// AppArmor restriction); `None` when nothing refuses it.
#[cfg(target_os = "linux")]
fn userns_unavailable() -> Option<String> {
    let read = |p: &str| fs_err::read_to_string(p).map(|s| s.trim().to_owned());
    if read("/proc/sys/user/max_user_namespaces").is_ok_and(|v| v == "0") {
        return Some("user.max_user_namespaces is 0".into());
    }
    let root = nix::unistd::geteuid().is_root();
    if !root && read("/proc/sys/kernel/unprivileged_userns_clone").is_ok_and(|v| v == "0") {
        return Some("kernel.unprivileged_userns_clone is 0".into());
    }
    if crate::apparmor::apparmor_restricts_userns() {
        return Some("AppArmor restricts unprivileged user namespaces".into());
    }
    None
}

/// Whether this process's real uid is the host's uid 0 (its uid maps to 0 one level up, which is
/// the host in every setup mcpsum supports): the kernel never holds that user to `RLIMIT_NPROC`,
/// in any user namespace, so for a root server the launcher holds the task limit with a pids
/// cgroup instead (see `cgroup`), where one can be used.
#[cfg(target_os = "linux")]
pub(crate) fn task_limit_exempt() -> bool {
    let uid = u64::from(nix::unistd::getuid().as_raw());
    fs_err::read_to_string("/proc/self/uid_map").is_ok_and(|map| {
        map.lines().any(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            matches!(f.as_slice(), [inner, outer, n]
                if (*inner..inner.saturating_add(*n)).contains(&uid) && outer + (uid - inner) == 0)
        })
    })
}

/// Builds the plan for a kernel with Landlock ABI `abi` (0 = none) where user namespaces can be
/// made. Pure apart from resolving the command: the unit-tested core of [`plan`].
pub fn plan_for_kernel(req: &LaunchRequest, abi: u32) -> Result<SandboxPlan, SandboxError> {
    plan_with_view(req, abi, ReadOnlyView::MountNamespace)
}

/// [`plan_for_kernel`] with the read-only view decided by the caller.
pub fn plan_with_view(
    req: &LaunchRequest,
    abi: u32,
    view: ReadOnlyView,
) -> Result<SandboxPlan, SandboxError> {
    if abi < 1 {
        return Err(SandboxError::layer(
            "landlock",
            "not available in this kernel",
            "use a kernel >= 5.13 with `landlock` in the `lsm=` list",
        ));
    }
    check_server_name(&req.server)?;
    let Some(arg0) = req.argv.first() else {
        return Err(SandboxError::layer(
            "exec",
            "the locked command is empty",
            "lock the server with a command",
        ));
    };
    let path_var = req
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map_or_else(|| OsString::from(DEFAULT_PATH), |(_, v)| v.clone());
    let program = resolve_command(arg0, &path_var)?;
    let protected = &req.policy.protected;
    let mut create_dirs = Vec::new();

    // What no derived prefix may cover: the protected paths and the credential paths.
    let avoid = avoided_paths(protected);
    let mut read: Vec<FsRule> = Vec::new();
    for rule in runtime_base_rules() {
        push_unique(&mut read, rule);
    }
    // The runtime base rules, first in `read`, already name real paths (resolved just above).
    let already_real = read.len();
    for (p, origin) in command_prefixes(&program, &path_var, &avoid)? {
        push_unique(
            &mut read,
            FsRule {
                path: PolicyPath::Host(p),
                origin,
                required: true,
            },
        );
    }
    for (key, p) in &req.policy.read {
        // `${TMP}/...` paths exist once the private tmp is made: `prepare` creates them.
        if let PolicyPath::Tmp(rel) = p
            && !rel.as_os_str().is_empty()
        {
            create_dirs.push(p.clone());
        }
        push_unique(
            &mut read,
            FsRule {
                path: p.clone(),
                origin: Origin::Policy(key.clone()),
                required: true,
            },
        );
    }

    let mut write = vec![FsRule {
        path: PolicyPath::Tmp(PathBuf::new()),
        origin: Origin::Tmp,
        required: true,
    }];
    let mut env: Vec<(OsString, EnvValue)> = Vec::new();
    let cache_vars = cache_vars(arg0, &req.state_dir, &req.server);
    for (k, v) in &req.env {
        check_env_var(k, v)?;
        let overridden = k == "TMPDIR"
            || k == "TMP"
            || cache_vars
                .iter()
                .any(|(name, _)| OsStr::new(name) == k.as_os_str());
        if !overridden {
            // A name given twice keeps its last value, as `Command::env` would.
            env.retain(|(name, _)| name != k);
            env.push((k.clone(), EnvValue::Given(v.clone())));
        }
    }
    env.push(("TMPDIR".into(), EnvValue::Tmp));
    env.push(("TMP".into(), EnvValue::Tmp));
    for (name, dir) in cache_vars {
        env.push((name.into(), EnvValue::Path(dir.clone())));
        create_dirs.push(PolicyPath::Host(dir.clone()));
        write.push(FsRule {
            path: PolicyPath::Host(dir),
            origin: Origin::Cache,
            required: true,
        });
    }
    for (key, p) in &req.policy.write {
        if let PolicyPath::Tmp(rel) = p
            && !rel.as_os_str().is_empty()
        {
            create_dirs.push(p.clone());
        }
        push_unique(
            &mut write,
            FsRule {
                path: p.clone(),
                origin: Origin::Policy(key.clone()),
                required: true,
            },
        );
    }

    // Rules name real paths, so the launcher can tell a path swapped for a link after this
    // point (it compares each opened descriptor's real path with the rule's). The runtime base
    // was resolved in this plan already: resolving it again would only repeat its system calls.
    for rule in read.iter_mut().skip(already_real).chain(write.iter_mut()) {
        if let PolicyPath::Host(p) = &rule.path {
            rule.path = PolicyPath::Host(crate::policy::canonical_or_lexical(p));
        }
    }
    check_read_set_avoiding(&read, protected, &avoid)?;

    Ok(SandboxPlan {
        server: req.server.clone(),
        network: req.policy.network.clone(),
        program,
        argv: req.argv.clone(),
        read,
        write,
        devices: RW_DEVICES.iter().map(PathBuf::from).collect(),
        create_dirs,
        env,
        landlock: LandlockPlan {
            abi,
            required: 1,
            compensations: compensations(&req.policy.network, abi),
        },
        seccomp: seccomp_table(&req.policy.network, abi, &view),
        view,
        limits: req.policy.limits,
        protected: protected.clone(),
    })
}

/// A variable `execve` can carry unchanged: a non-empty name without `=` or NUL, a value
/// without NUL. The error names the variable, never its value (I2).
fn check_env_var(name: &OsStr, value: &OsStr) -> Result<(), SandboxError> {
    // Lossy conversion keeps `=` and NUL, so the check is exact and portable.
    let n = name.to_string_lossy();
    if n.is_empty() || n.contains(['=', '\0']) || value.to_string_lossy().contains('\0') {
        return Err(SandboxError::layer(
            "environment",
            format!("variable `{}` cannot be passed", name.to_string_lossy()),
            "remove it from envPassthrough",
        ));
    }
    Ok(())
}

/// The runtime base as rules, each a real path (`/lib` is `/usr/lib` on a merged-`/usr`
/// system), plus `/etc/pythonX.Y`.
fn runtime_base_rules() -> Vec<FsRule> {
    let mut out: Vec<FsRule> = Vec::new();
    let paths = RUNTIME_BASE
        .iter()
        .map(PathBuf::from)
        .chain(etc_python_dirs());
    for p in paths {
        push_unique(
            &mut out,
            FsRule {
                path: PolicyPath::Host(crate::policy::canonical_or_lexical(&p)),
                origin: Origin::RuntimeBase,
                required: false,
            },
        );
    }
    out
}

/// The paths a derived read rule must not cover: the protected paths, every credential path of
/// the home directory and the TLS key folders.
fn avoided_paths(protected: &[(String, PathBuf)]) -> Vec<(String, PathBuf)> {
    avoided_paths_with(protected, &user_homes())
}

/// [`avoided_paths`] with the machine's user homes given: those homes and their credential
/// paths are avoided too.
fn avoided_paths_with(
    protected: &[(String, PathBuf)],
    users: &[PathBuf],
) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = protected.to_vec();
    let homes: Vec<&Path> = homes_of(protected);
    for u in users {
        if !homes.contains(&u.as_path()) {
            out.push((USER_HOME.to_string(), u.clone()));
        }
    }
    let all: Vec<&Path> = homes
        .iter()
        .copied()
        .chain(users.iter().map(PathBuf::as_path))
        .collect();
    for (i, home) in all.iter().enumerate() {
        if all[..i].contains(home) {
            continue;
        }
        out.extend(
            credential_paths(home)
                .into_iter()
                .map(|p| ("a credential path".to_string(), p)),
        );
    }
    out.extend(
        TLS_KEY_DIRS
            .iter()
            .map(|p| ("the TLS private keys".to_string(), PathBuf::from(p))),
    );
    out
}

/// The last line of defence, whatever a rule's origin: no read rule is `/` or an ancestor of
/// a protected home directory (each would open every user's files), by path or, through a bind
/// mount, by identity (`folder_in_disguise`); no rule the plan derived itself (runtime base,
/// command and interpreter prefixes) covers a protected path, any user's home, a credential
/// path or the TLS keys. Only `filesystem.read` entries may open the home directory or a
/// credential path, on purpose (`sandbox test` and `lock` warn about the latter).
pub fn check_read_set(
    read: &[FsRule],
    protected: &[(String, PathBuf)],
) -> Result<(), SandboxError> {
    check_read_set_avoiding(read, protected, &avoided_paths(protected))
}

/// [`check_read_set`] with the avoided paths of `protected` ([`avoided_paths`]) already found
/// (the plan found them for the prefixes a moment before).
fn check_read_set_avoiding(
    read: &[FsRule],
    protected: &[(String, PathBuf)],
    avoid: &[(String, PathBuf)],
) -> Result<(), SandboxError> {
    let homes = homes_of(protected);
    // Each guarded folder's identity, taken once for every rule.
    let guarded = guarded_identities(protected);
    // Hundreds of avoided paths (every home's credential paths) against each derived rule:
    // compared as bytes of their normal forms, which answers as `Path::starts_with` does.
    let avoid_normal: Vec<PathBuf> = avoid.iter().map(|(_, a)| normal_form(a)).collect();
    for rule in read {
        let PolicyPath::Host(p) = &rule.path else {
            continue;
        };
        let derived = !matches!(rule.origin, Origin::Policy(_));
        let hit = if crate::policy::is_whole_filesystem(p) {
            Some(("the whole filesystem".to_string(), p.clone()))
        } else if let Some(h) = homes
            .iter()
            .find(|h| h.starts_with(p) && (derived || **h != p))
        {
            Some((crate::policy::HOME_DIRECTORY.to_string(), h.to_path_buf()))
        } else if let Some((what, real)) = folder_in_disguise(p, &guarded) {
            return Err(SandboxError::layer(
                "read set",
                format!(
                    "`{}` ({}) is {what} (`{}`) mounted elsewhere: it would open {what} to the server",
                    p.display(),
                    rule.origin,
                    real.display()
                ),
                "list the folder the server needs itself, not a bind mount of a wider one",
            ));
        } else if derived {
            let p = normal_form(p);
            avoid
                .iter()
                .zip(&avoid_normal)
                .filter(|((what, _), _)| {
                    // The binary is code, not a secret (the base holds it when installed in
                    // `/usr`); the base is fixed and documented: only its secrets matter there.
                    what != crate::policy::BINARY
                        && (rule.origin != Origin::RuntimeBase
                            || (what != "`mcp.lock`"
                                && what != "the directory of `mcp.lock`"
                                && what != USER_HOME))
                })
                .find(|(_, a)| starts_with_normal(a, &p))
                .map(|(hit, _)| hit.clone())
        } else {
            None
        };
        if let Some((what, covered)) = hit {
            return Err(SandboxError::layer(
                "read set",
                format!(
                    "`{}` ({}) would open {what} (`{}`) to the server",
                    p.display(),
                    rule.origin,
                    covered.display()
                ),
                match rule.origin {
                    Origin::Policy(_) => "list a narrower directory in filesystem.read",
                    _ => "install the server's command (and its interpreter) outside that folder",
                },
            ));
        }
    }
    Ok(())
}

/// A path as its components joined again (no repeated or trailing `/`, no `.` inside): what
/// [`starts_with_normal`] compares.
fn normal_form(p: &Path) -> PathBuf {
    p.components().collect()
}

/// `path.starts_with(base)` ([`Path::starts_with`], by whole components) for two paths in
/// [`normal_form`], by their bytes: `base` is empty, the root, `path` itself or `path` up to one
/// of its `/`.
fn starts_with_normal(path: &Path, base: &Path) -> bool {
    let (a, b) = (
        path.as_os_str().as_encoded_bytes(),
        base.as_os_str().as_encoded_bytes(),
    );
    b.is_empty()
        || (a.starts_with(b)
            && (a.len() == b.len() || b.ends_with(b"/") || a.get(b.len()) == Some(&b'/')))
}

/// A folder no read rule may be under another name: what it is, its path and its identity now
/// (`None`: it cannot be found, so nothing is it).
pub(crate) type Guarded = (String, PathBuf, Option<(u64, u64)>);

/// The folders no read rule may be under another name (a bind mount): `/`, each protected
/// home and each ancestor of one, with what each is and its `(st_dev, st_ino)` taken now.
/// Take them once per check of a whole set of rules, right before it.
pub(crate) fn guarded_identities(protected: &[(String, PathBuf)]) -> Vec<Guarded> {
    guarded_folders(protected)
        .into_iter()
        .map(|(what, p)| {
            let id = identity(&p);
            (what, p, id)
        })
        .collect()
}

/// [`guarded_identities`] without the identities.
fn guarded_folders(protected: &[(String, PathBuf)]) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = vec![("the whole filesystem".into(), PathBuf::from("/"))];
    for home in homes_of(protected) {
        for a in home.ancestors() {
            let what = if a == home {
                crate::policy::HOME_DIRECTORY.to_string()
            } else if a.parent().is_none() {
                continue;
            } else {
                "an ancestor of the home directory".to_string()
            };
            if !out.iter().any(|(_, p)| p == a) {
                out.push((what, a.to_path_buf()));
            }
        }
    }
    out
}

/// `(st_dev, st_ino)` of a path, following links.
pub(crate) fn identity(p: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        fs_err::metadata(p).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = p;
        None
    }
}

/// The guarded folder ([`guarded_identities`]) that `p` is under another path: a bind mount of
/// `/` or of a home passes every comparison of paths. A `filesystem.read` entry may name a home
/// by its own path (the lexical checks judge that), never under another one.
fn folder_in_disguise(p: &Path, guarded: &[Guarded]) -> Option<(String, PathBuf)> {
    let id = identity(p)?;
    disguised(p, id, guarded)
}

/// The guarded folder that the file with identity `id`, named `p`, is under another path.
pub(crate) fn disguised(
    p: &Path,
    id: (u64, u64),
    guarded: &[Guarded],
) -> Option<(String, PathBuf)> {
    guarded
        .iter()
        .find(|(_, g, gid)| g != p && *gid == Some(id))
        .map(|(what, g, _)| (what.clone(), g.clone()))
}

fn push_unique(rules: &mut Vec<FsRule>, rule: FsRule) {
    if !rules.iter().any(|r| r.path == rule.path) {
        rules.push(rule);
    }
}

fn etc_python_dirs() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs_err::read_dir("/etc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(ETC_PYTHON_PREFIX))
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

fn check_server_name(name: &str) -> Result<(), SandboxError> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(SandboxError::layer(
            "cache",
            format!("server name `{name}` cannot name a cache directory"),
            "rename the server without `/`",
        ));
    }
    Ok(())
}

/// The per-server cache variables of design 7.3 that a sandboxed `arg0` (`uv`, `uvx`, `npm`,
/// `npx`) gets, with their folders: what learn mode gives the unsandboxed server too, so that
/// what it learns is what the sandboxed server will use.
pub fn cache_env(arg0: &str, state_dir: &Path, server: &str) -> Vec<(&'static str, PathBuf)> {
    if check_server_name(server).is_err() {
        return Vec::new();
    }
    cache_vars(arg0, state_dir, server)
}

/// Cache variables of design 7.3 for package-manager launchers.
fn cache_vars(arg0: &str, state_dir: &Path, server: &str) -> Vec<(&'static str, PathBuf)> {
    let base = state_dir.join("cache").join(server);
    let name = Path::new(arg0)
        .file_name()
        .and_then(OsStr::to_str)
        .unwrap_or("");
    match name {
        "uv" | "uvx" => vec![
            ("UV_CACHE_DIR", base.join("uv")),
            ("UV_TOOL_DIR", base.join("uv-tools")),
        ],
        "npx" | "npm" => vec![("npm_config_cache", base.join("npm"))],
        _ => Vec::new(),
    }
}

/// Resolves `argv[0]` like `execvp`: a name with `/` as is, else the first executable file on
/// `path_var`.
pub fn resolve_command(arg0: &str, path_var: &OsStr) -> Result<PathBuf, SandboxError> {
    let is_exec = |p: &Path| {
        fs_err::metadata(p).is_ok_and(|m| {
            #[cfg(unix)]
            let exec = {
                use std::os::unix::fs::PermissionsExt;
                m.permissions().mode() & 0o111 != 0
            };
            #[cfg(not(unix))]
            let exec = true;
            m.is_file() && exec
        })
    };
    if arg0.contains('/') {
        let p = std::path::absolute(arg0).unwrap_or_else(|_| PathBuf::from(arg0));
        if is_exec(&p) {
            return Ok(p);
        }
    } else {
        for dir in std::env::split_paths(path_var) {
            if dir.is_absolute() {
                let p = dir.join(arg0);
                if is_exec(&p) {
                    return Ok(p);
                }
            }
        }
    }
    Err(SandboxError::layer(
        "exec",
        format!("`{arg0}` not found or not executable on the server's PATH"),
        "pass PATH through (`--env PATH`) or lock an absolute command path",
    ))
}

/// Interpreter discovery (design 7.2): the command (link and target) and the interpreter of its
/// `#!` line, each as its install prefix when outside the base. Every path is made real first
/// (`..` and links resolved): a prefix computed on `#!/etc/../bin/python3` would be `/etc/..`,
/// which Landlock opens as `/`.
fn command_prefixes(
    program: &Path,
    path_var: &OsStr,
    avoid: &[(String, PathBuf)],
) -> Result<Vec<(PathBuf, Origin)>, SandboxError> {
    let mut out: Vec<(PathBuf, Origin)> = Vec::new();
    let add = |file: &Path, origin: Origin, out: &mut Vec<(PathBuf, Origin)>| {
        for f in real_forms(file)? {
            if BASE_CODE_DIRS.iter().any(|b| f.starts_with(b)) {
                continue;
            }
            let p = install_prefix(&f, avoid);
            if !out.iter().any(|(q, _)| p.starts_with(q)) {
                out.retain(|(q, _)| !q.starts_with(&p));
                out.push((p, origin.clone()));
            }
        }
        Ok::<(), SandboxError>(())
    };
    add(program, Origin::Command, &mut out)?;
    if let Some(interp) = shebang_interpreter(program, path_var)? {
        add(&interp, Origin::Interpreter, &mut out)?;
    }
    Ok(out)
}

/// A command file as the two real paths a prefix may come from: the link itself in its real
/// directory (`~/.local/bin/uvx`) and the file it leads to. Both are absolute, without `.`,
/// `..` or links in their directories.
fn real_forms(file: &Path) -> Result<[PathBuf; 2], SandboxError> {
    // The `fs-err` error names the path that failed (the command or its folder).
    let unresolvable = |e: std::io::Error| {
        SandboxError::layer(
            "exec",
            format!("the command cannot be resolved to a real path: {e}"),
            "lock the server with an existing absolute command path",
        )
    };
    let real = fs_err::canonicalize(file).map_err(unresolvable)?;
    let link = match (file.parent(), file.file_name()) {
        (Some(dir), Some(name)) => fs_err::canonicalize(dir).map_err(unresolvable)?.join(name),
        _ => real.clone(),
    };
    Ok([link, real])
}

/// Below a home directory (the protected homes and every user's, among `avoid`): the first
/// [`HOME_INSTALL_LAYOUTS`] folder holding the file that covers no avoided path, else the file's
/// own directory. Elsewhere the parent of the nearest `bin/` or `shims/` ancestor, or the file's
/// own directory when there is none or when that prefix would cover an avoided path (home,
/// state dir, lockfile, credentials). The file itself when even its directory would. `file` is
/// a real path.
fn install_prefix(file: &Path, avoid: &[(String, PathBuf)]) -> PathBuf {
    let covers =
        |dir: &Path| dir.parent().is_none() || avoid.iter().any(|(_, p)| p.starts_with(dir));
    let own = || match file.parent() {
        Some(dir) if !covers(dir) => dir.to_path_buf(),
        _ => file.to_path_buf(),
    };
    // The deepest home holding the file (a home inside another's is the nearer one).
    let home = avoid
        .iter()
        .filter(|(what, h)| {
            (what == crate::policy::HOME_DIRECTORY || what == USER_HOME) && file.starts_with(h)
        })
        .map(|(_, h)| h)
        .max_by_key(|h| h.components().count());
    if let Some(home) = home {
        let Ok(rel) = file.strip_prefix(home) else {
            return own();
        };
        let names: Vec<&OsStr> = rel.iter().collect();
        for layout in HOME_INSTALL_LAYOUTS {
            let fits = names.len() > layout.len()
                && layout
                    .iter()
                    .zip(&names)
                    .all(|(want, got)| *want == "*" || OsStr::new(want) == *got);
            if fits {
                let prefix = home.join(names.iter().take(layout.len()).collect::<PathBuf>());
                if !covers(&prefix) {
                    return prefix;
                }
            }
        }
        return own();
    }
    let mut cur = file.parent();
    while let Some(dir) = cur {
        if matches!(
            dir.file_name().and_then(OsStr::to_str),
            Some("bin" | "shims")
        ) {
            if let Some(prefix) = dir.parent()
                && !covers(prefix)
            {
                return prefix.to_path_buf();
            }
            break;
        }
        cur = dir.parent();
    }
    own()
}

/// The interpreter of a `#!` script: the absolute path on the line, or for `env` the command it
/// runs (`#!/usr/bin/env node` resolves `node` on `path_var`; `env -S /opt/x/bin/python3 -u`
/// names it). A relative interpreter is refused: the kernel would look it up from the working
/// directory, and no prefix can be judged for it.
fn shebang_interpreter(program: &Path, path_var: &OsStr) -> Result<Option<PathBuf>, SandboxError> {
    let mut buf = [0u8; 256];
    let Ok(n) = fs_err::File::open(program).and_then(|mut f| f.read(&mut buf)) else {
        return Ok(None);
    };
    let Some(line) = buf.get(..n).and_then(|h| h.strip_prefix(b"#!")) else {
        return Ok(None);
    };
    let line = line.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let Some(interp) = words.next() else {
        return Ok(None);
    };
    let relative = |what: &str| {
        SandboxError::layer(
            "exec",
            format!(
                "`{}` names the relative interpreter `{what}` on its `#!` line",
                program.display()
            ),
            "write an absolute interpreter path (or `/usr/bin/env NAME`) on the script's first line",
        )
    };
    if !interp.starts_with('/') {
        return Err(relative(interp));
    }
    if Path::new(interp).file_name() != Some(OsStr::new("env")) {
        return Ok(Some(PathBuf::from(interp)));
    }
    let Some(name) = env_command(words) else {
        return Ok(None);
    };
    if name.starts_with('/') {
        Ok(Some(PathBuf::from(name)))
    } else if name.contains('/') {
        Err(relative(name))
    } else {
        Ok(resolve_command(name, path_var).ok())
    }
}

/// The command `env` runs, from its arguments on a `#!` line: options and `NAME=VALUE`
/// assignments skipped (`-u NAME` and `-C DIR` take a value; `-S` splits the rest, as here).
fn env_command<'a>(mut words: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    while let Some(w) = words.next() {
        match w {
            "-u" | "--unset" | "-C" | "--chdir" => {
                words.next();
            }
            "--" => return words.next(),
            _ if w.starts_with("--split-string=") => {
                return w.strip_prefix("--split-string=").filter(|c| !c.is_empty());
            }
            _ if w.starts_with("-S") && w.len() > 2 => return w.get(2..),
            _ if w.starts_with('-') || w.contains('=') => {}
            _ => return Some(w),
        }
    }
    None
}

/// Landlock features missing below the newest ABI mcpsum uses, with their compensation
/// (design 7.1).
pub fn compensations(network: &NetworkMode, abi: u32) -> Vec<Compensation> {
    let egress = matches!(network, NetworkMode::Egress { .. });
    let c = |feature: &str, need: u32, instead: &str| Compensation {
        feature: feature.into(),
        abi: need,
        instead: instead.into(),
    };
    let mut out = Vec::new();
    if abi < 2 {
        out.push(c(
            "refer",
            2,
            "cross-directory renames and links are denied",
        ));
    }
    if abi < 3 {
        out.push(c("truncate", 3, "seccomp denies truncate(2)"));
    }
    if abi < 4 {
        out.push(if egress {
            c("tcp", 4, "own network namespace with loopback only")
        } else {
            c("tcp", 4, "seccomp denies socket(2)")
        });
    }
    if abi < 5 {
        out.push(c(
            "ioctl-dev",
            5,
            "device ioctls stay possible on /dev/null, /dev/zero, /dev/full, /dev/urandom",
        ));
    }
    if abi < 6 {
        out.push(c(
            "scopes",
            6,
            "abstract unix sockets: seccomp denies AF_UNIX socket(2); signals to same-uid processes outside stay possible",
        ));
    }
    if abi < 9 {
        out.push(c("resolve-unix", 9, "seccomp denies AF_UNIX socket(2)"));
    }
    out
}

fn rule(name: &str) -> SyscallRule {
    SyscallRule {
        syscall: name.into(),
        any_of: Vec::new(),
    }
}

/// `CLONE_NEW*` flags refused in `clone(2)` (`CLONE_NEWTIME` is not a `clone` flag).
pub const CLONE_NEW_FLAGS: &[u64] = &[
    0x0002_0000, // CLONE_NEWNS
    0x0200_0000, // CLONE_NEWCGROUP
    0x0400_0000, // CLONE_NEWUTS
    0x0800_0000, // CLONE_NEWIPC
    0x1000_0000, // CLONE_NEWUSER
    0x2000_0000, // CLONE_NEWPID
    0x4000_0000, // CLONE_NEWNET
];

const AF_UNIX: u64 = 1;
const AF_INET: u64 = 2;
const AF_INET6: u64 = 10;
const SOCK_STREAM: u64 = 1;
const SOCK_NONBLOCK: u64 = 0o4000;
const SOCK_CLOEXEC: u64 = 0o2_000_000;
const S_ISUID: u64 = 0o4000;
const S_ISGID: u64 = 0o2000;
const S_IWOTH: u64 = 0o2;
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;

/// The seccomp table for a mode and Landlock ABI (design 5); `root` when the server runs as
/// root on the host (its owner may change any file's mode, so it may change none by path).
pub fn seccomp_table(network: &NetworkMode, abi: u32, view: &ReadOnlyView) -> SeccompTable {
    let mut eperm: Vec<SyscallRule> = [
        // other processes' memory
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "pidfd_getfd",
        "kcmp",
        // mounts
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "open_tree",
        "move_mount",
        "mount_setattr",
        // namespaces
        "unshare",
        "setns",
        // kernel attack surface (io_uring can create sockets without socket(2))
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "keyctl",
        "add_key",
        "request_key",
        // handles
        "open_by_handle_at",
        "name_to_handle_at",
        // administration
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "reboot",
        "swapon",
        "swapoff",
        "acct",
        "quotactl",
        "syslog",
        "vhangup",
        "fanotify_init",
        "iopl",
        "ioperm",
        "uselib",
        // Metadata of files anywhere: Landlock (below ABI 13) governs opening, creating and
        // removing files, not their owner or extended attributes. As root a server could give
        // a file file capabilities (`security.capability`) or another owner.
        "chown",
        "fchown",
        "lchown",
        "fchownat",
        "setxattr",
        "lsetxattr",
        "fsetxattr",
        "setxattrat",
        "removexattr",
        "lremovexattr",
        "fremovexattr",
        "removexattrat",
        // System V IPC and POSIX message queues: host objects no namespace separates here.
        "shmget",
        "shmat",
        "shmctl",
        "msgget",
        "msgsnd",
        "msgrcv",
        "msgctl",
        "semget",
        "semop",
        "semtimedop",
        "semctl",
        "mq_open",
        "mq_unlink",
        "mq_timedsend",
        "mq_timedreceive",
        "mq_notify",
        "mq_getsetattr",
        // Another process's memory placement.
        "process_madvise",
    ]
    .into_iter()
    .map(rule)
    .collect();
    // Other processes' limits, priorities and scheduling (Landlock does not scope these): a
    // server could take its guard's file descriptors away (RLIMIT_NOFILE 0) and outlive it.
    // Each call is allowed on the calling process only (pid or `who` 0).
    for (name, pid_arg) in [
        ("prlimit64", 0),
        ("sched_setaffinity", 0),
        ("sched_setscheduler", 0),
        ("sched_setparam", 0),
        ("sched_setattr", 0),
        ("migrate_pages", 0),
        ("move_pages", 0),
    ] {
        eperm.push(SyscallRule {
            syscall: name.into(),
            any_of: vec![vec![ArgCmp::Ne(pid_arg, 0)]],
        });
    }
    for name in ["setpriority", "ioprio_set"] {
        // (which, who): only `who` 0 of the process kind (`PRIO_PROCESS` 0,
        // `IOPRIO_WHO_PROCESS` 1) is the caller itself.
        let process = if name == "setpriority" { 0 } else { 1 };
        eperm.push(SyscallRule {
            syscall: name.into(),
            any_of: vec![vec![ArgCmp::Ne(0, process)], vec![ArgCmp::Ne(1, 0)]],
        });
    }
    // Modes that hand a file to others: set-user-ID, set-group-ID, writable by anyone. A
    // server's own files need none of these, and a root server could plant a setuid binary.
    // Other modes are kept unchanged outside the write set by the read-only view (EROFS), or,
    // without it, by the compensation below, which refuses every change.
    for (name, mode_arg) in [
        ("chmod", 1),
        ("fchmod", 1),
        ("fchmodat", 2),
        ("fchmodat2", 2),
    ] {
        eperm.push(SyscallRule {
            syscall: name.into(),
            any_of: [S_ISUID, S_ISGID, S_IWOTH]
                .iter()
                .map(|bit| vec![ArgCmp::HasBits(mode_arg, *bit)])
                .collect(),
        });
    }
    eperm.push(clone_new_rule());
    eperm.push(SyscallRule {
        syscall: "personality".into(),
        any_of: vec![
            [0, 0x8, 0x0002_0000, 0x0002_0008, 0xffff_ffff]
                .into_iter()
                .map(|v| ArgCmp::Ne(0, v))
                .collect(),
        ],
    });
    eperm.push(SyscallRule {
        syscall: "ioctl".into(),
        any_of: vec![vec![ArgCmp::Eq(1, TIOCSTI)], vec![ArgCmp::Eq(1, TIOCLINUX)]],
    });
    eperm.push(match network {
        NetworkMode::None => rule("socket"),
        NetworkMode::Egress { .. } => SyscallRule {
            syscall: "socket".into(),
            any_of: vec![vec![ArgCmp::Ne(0, AF_INET), ArgCmp::Ne(0, AF_INET6)]],
        },
    });
    // Only connected stream pairs: a datagram socket of a pair can be bound in `${TMP}` and
    // send to any pathname datagram socket of the host (Landlock below ABI 9 does not check).
    eperm.push(SyscallRule {
        syscall: "socketpair".into(),
        any_of: vec![
            vec![ArgCmp::Ne(0, AF_UNIX)],
            [0, SOCK_NONBLOCK, SOCK_CLOEXEC, SOCK_NONBLOCK | SOCK_CLOEXEC]
                .iter()
                .map(|flags| ArgCmp::Ne(1, SOCK_STREAM | flags))
                .collect(),
        ],
    });
    if abi < 3 {
        eperm.push(rule("truncate"));
    }
    let mut table = SeccompTable {
        x32_guard: cfg!(target_arch = "x86_64"),
        enosys: vec![rule("clone3")],
        eperm,
    };
    if matches!(view, ReadOnlyView::Seccomp(_)) {
        compensate_metadata(&mut table);
    }
    table
}

/// The compensation for a missing read-only view: every mode and time change refused, in the
/// write set too, since no argument tells a path there from one outside. (Owners and xattrs
/// are refused in every mode.) The launcher applies it itself when the kernel refuses the user
/// namespace the plan counted on.
pub fn compensate_metadata(table: &mut SeccompTable) {
    let names = [
        "chmod",
        "fchmod",
        "fchmodat",
        "fchmodat2",
        "utimensat",
        "utime",
        "utimes",
        "futimesat",
    ];
    table.eperm.retain(|r| !names.contains(&r.syscall.as_str()));
    table.eperm.extend(names.iter().map(|n| rule(n)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::PermissionsExt;

    fn exe(path: &Path, body: &str) {
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        fs_err::write(path, body).unwrap();
        fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn base_rules() -> Vec<FsRule> {
        runtime_base_rules()
    }

    #[test]
    fn plan_as_a_whole_value() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        let tool_bin = root.join("opt/tool/bin");
        let node_bin = root.join("opt/node/v20/bin");
        exe(&tool_bin.join("npx"), "#!/usr/bin/env node\n");
        exe(&node_bin.join("node"), "");
        fs_err::create_dir_all(root.join("notes")).unwrap();
        let path = format!("{}:{}", tool_bin.display(), node_bin.display());
        let state = root.join("state");
        let req = LaunchRequest {
            server: "fs".into(),
            policy: ValidatedPolicy {
                read: vec![(
                    "filesystem.read[0]".into(),
                    PolicyPath::Host(root.join("notes")),
                )],
                write: vec![("filesystem.write[0]".into(), PolicyPath::Tmp("work".into()))],
                network: NetworkMode::None,
                limits: Limits::default(),
                protected: vec![("the home directory".into(), root.join("home"))],
            },
            argv: vec!["npx".into(), "-y".into(), "pkg@1.0.0".into()],
            env: vec![
                ("PATH".into(), path.clone().into()),
                ("HOME".into(), "/secret-value".into()),
                ("TMPDIR".into(), "/elsewhere".into()),
            ],
            state_dir: state.clone(),
        };
        let got = plan_for_kernel(&req, 2).unwrap();
        let mut read = base_rules();
        read.push(FsRule {
            path: PolicyPath::Host(root.join("opt/tool")),
            origin: Origin::Command,
            required: true,
        });
        read.push(FsRule {
            path: PolicyPath::Host(root.join("opt/node/v20")),
            origin: Origin::Interpreter,
            required: true,
        });
        read.push(FsRule {
            path: PolicyPath::Host(root.join("notes")),
            origin: Origin::Policy("filesystem.read[0]".into()),
            required: true,
        });
        let cache = state.join("cache/fs/npm");
        let expected = SandboxPlan {
            server: "fs".into(),
            network: NetworkMode::None,
            program: tool_bin.join("npx"),
            argv: req.argv.clone(),
            read,
            write: vec![
                FsRule {
                    path: PolicyPath::Tmp(PathBuf::new()),
                    origin: Origin::Tmp,
                    required: true,
                },
                FsRule {
                    path: PolicyPath::Host(cache.clone()),
                    origin: Origin::Cache,
                    required: true,
                },
                FsRule {
                    path: PolicyPath::Tmp("work".into()),
                    origin: Origin::Policy("filesystem.write[0]".into()),
                    required: true,
                },
            ],
            devices: vec!["/dev/null".into(), "/dev/zero".into(), "/dev/full".into()],
            create_dirs: vec![
                PolicyPath::Host(cache.clone()),
                PolicyPath::Tmp("work".into()),
            ],
            env: vec![
                ("PATH".into(), EnvValue::Given(path.into())),
                ("HOME".into(), EnvValue::Given("/secret-value".into())),
                ("TMPDIR".into(), EnvValue::Tmp),
                ("TMP".into(), EnvValue::Tmp),
                ("npm_config_cache".into(), EnvValue::Path(cache)),
            ],
            landlock: LandlockPlan {
                abi: 2,
                required: 1,
                compensations: compensations(&NetworkMode::None, 2),
            },
            seccomp: seccomp_table(&NetworkMode::None, 2, &ReadOnlyView::MountNamespace),
            view: ReadOnlyView::MountNamespace,
            limits: Limits::default(),
            protected: req.policy.protected.clone(),
        };
        assert_eq!(got, expected);
        assert!(!format!("{got:?}").contains("secret-value"));
        assert_eq!(
            got.env_names(),
            ["PATH", "HOME", "TMPDIR", "TMP", "npm_config_cache"]
        );
    }

    #[test]
    fn no_landlock_fails_closed() {
        let req = LaunchRequest {
            server: "s".into(),
            policy: ValidatedPolicy {
                read: vec![],
                write: vec![],
                network: NetworkMode::None,
                limits: Limits::default(),
                protected: vec![],
            },
            argv: vec!["/bin/true".into()],
            env: vec![],
            state_dir: "/nonexistent".into(),
        };
        let e = plan_for_kernel(&req, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "landlock: not available in this kernel; use a kernel >= 5.13 with `landlock` in the `lsm=` list"
        );
        let p = plan_for_kernel(&req, 7).unwrap();
        assert_eq!(p.program, PathBuf::from("/bin/true"));
        assert!(p.landlock.compensations.iter().all(|c| c.abi > 7));
    }

    #[test]
    fn bad_env_names_are_refused_without_their_value() {
        let mut req = LaunchRequest {
            server: "s".into(),
            policy: ValidatedPolicy {
                read: vec![],
                write: vec![],
                network: NetworkMode::None,
                limits: Limits::default(),
                protected: vec![],
            },
            argv: vec!["/bin/true".into()],
            env: vec![("A=B".into(), "hidden".into())],
            state_dir: "/nonexistent".into(),
        };
        let e = plan_for_kernel(&req, 7).unwrap_err().to_string();
        assert_eq!(
            e,
            "environment: variable `A=B` cannot be passed; remove it from envPassthrough"
        );
        req.env = vec![("A".into(), "1".into()), ("A".into(), "2".into())];
        let p = plan_for_kernel(&req, 7).unwrap();
        assert_eq!(p.env_names(), ["A", "TMPDIR", "TMP"]);
        assert_eq!(p.env[0].1, EnvValue::Given("2".into()));
    }

    #[test]
    fn command_not_found_names_the_fix() {
        let e = resolve_command("no-such-cmd-mcpsum", OsStr::new("/usr/bin")).unwrap_err();
        assert!(e.to_string().contains("pass PATH through"), "{e}");
    }

    #[test]
    fn prefix_never_covers_protected_paths() {
        let protected = vec![
            ("home".to_string(), PathBuf::from("/home/u")),
            (
                "state".to_string(),
                PathBuf::from("/home/u/.local/state/mcpsum"),
            ),
        ];
        assert_eq!(
            install_prefix(Path::new("/home/u/.local/bin/uvx"), &protected),
            PathBuf::from("/home/u/.local/bin")
        );
        assert_eq!(
            install_prefix(
                Path::new("/home/u/.nvm/versions/node/v20/bin/node"),
                &protected
            ),
            PathBuf::from("/home/u/.nvm/versions/node/v20")
        );
        assert_eq!(
            install_prefix(Path::new("/home/u/tool"), &protected),
            PathBuf::from("/home/u/tool")
        );
        assert_eq!(
            install_prefix(Path::new("/opt/pyenv/shims/python"), &protected),
            PathBuf::from("/opt/pyenv")
        );
    }

    fn request(argv: &[&str], read: Vec<PathBuf>, home: &Path) -> LaunchRequest {
        LaunchRequest {
            server: "s".into(),
            policy: ValidatedPolicy {
                read: read
                    .into_iter()
                    .enumerate()
                    .map(|(i, p)| (format!("filesystem.read[{i}]"), PolicyPath::Host(p)))
                    .collect(),
                write: vec![],
                network: NetworkMode::None,
                protected: vec![(crate::policy::HOME_DIRECTORY.into(), home.to_path_buf())],
                limits: Limits::default(),
            },
            argv: argv.iter().map(ToString::to_string).collect(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            state_dir: "/nonexistent".into(),
        }
    }

    /// No read rule is `/`, has a `..`, or covers the home directory.
    fn assert_read_set_is_narrow(plan: &SandboxPlan, home: &Path, ctx: &str) {
        for r in &plan.read {
            let PolicyPath::Host(p) = &r.path else {
                continue;
            };
            assert_ne!(p, Path::new("/"), "{ctx}: {r:?}");
            assert!(
                !p.components().any(|c| c == std::path::Component::ParentDir),
                "{ctx}: {r:?}"
            );
            assert!(!home.starts_with(p), "{ctx}: {r:?} covers the home");
        }
    }

    #[test]
    fn a_dotdot_interpreter_or_command_never_opens_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        fs_err::create_dir_all(home.join(".ssh")).unwrap();
        for (name, line) in [
            ("plain", "#!/etc/../bin/sh\n"),
            ("env-s", "#!/usr/bin/env -S /etc/../bin/sh -e\n"),
            (
                "env-split",
                "#!/usr/bin/env --split-string=/etc/../bin/sh\n",
            ),
            ("env-u", "#!/usr/bin/env -u X /etc/../bin/sh\n"),
        ] {
            let script = root.join("srv").join(name);
            exe(&script, line);
            let got =
                plan_for_kernel(&request(&[script.to_str().unwrap()], vec![], &home), 7).unwrap();
            assert_read_set_is_narrow(&got, &home, name);
            // The interpreter is the base's own `sh`: only the script's folder is added.
            let added: Vec<&FsRule> = got
                .read
                .iter()
                .filter(|r| r.origin != Origin::RuntimeBase)
                .collect();
            assert_eq!(
                added,
                [&FsRule {
                    path: PolicyPath::Host(root.join("srv")),
                    origin: Origin::Command,
                    required: true,
                }],
                "{name}"
            );
        }
        // A command path with `..` whose lexical prefix would be the parent of the home.
        exe(&root.join("bin/srv"), "#!/bin/sh\n");
        fs_err::create_dir_all(root.join("data")).unwrap();
        let cmd = root.join("data/../bin/srv");
        let got = plan_for_kernel(&request(&[cmd.to_str().unwrap()], vec![], &home), 7).unwrap();
        assert_read_set_is_narrow(&got, &home, "command with ..");
    }

    #[test]
    fn every_rule_names_a_real_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        fs_err::create_dir_all(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        // A policy path is canonical once validated; a base entry such as `/lib` or
        // `/etc/localtime` may be a link: the launcher compares opened paths with these.
        let got = plan_for_kernel(
            &request(&["/bin/true"], vec![root.join("link")], &root.join("home")),
            7,
        )
        .unwrap();
        for r in got.read.iter().chain(&got.write) {
            if let PolicyPath::Host(p) = &r.path {
                assert_eq!(p, &crate::policy::canonical_or_lexical(p), "{r:?}");
            }
        }
        assert!(
            got.read
                .iter()
                .any(|r| r.path == PolicyPath::Host(root.join("real")))
        );
    }

    /// The plan skips re-resolving the runtime base (resolved once already): the whole plan must
    /// be what resolving every rule again gives, for a realistic request (an `env python3`
    /// script, policy paths through a link, a missing path and a `${TMP}` path, write rules).
    #[test]
    fn resolving_every_rule_again_changes_no_plan() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        fs_err::create_dir_all(root.join("real/sub")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        let srv = root.join("app/bin/srv");
        fs_err::create_dir_all(srv.parent().unwrap()).unwrap();
        exe(&srv, "#!/usr/bin/env python3\nprint()\n");
        let mut req = request(
            &[srv.to_str().unwrap(), "--stdio"],
            vec![
                root.join("link/sub"),
                root.join("missing/a"),
                PathBuf::from("/lib"),
                PathBuf::from("/etc/localtime"),
            ],
            &root.join("home"),
        );
        req.policy
            .read
            .push(("filesystem.read[9]".into(), PolicyPath::Tmp("data".into())));
        req.policy.write.push((
            "filesystem.write[0]".into(),
            PolicyPath::Host(root.join("link")),
        ));
        req.state_dir = root.join("state");
        let got = plan_for_kernel(&req, 7).unwrap();
        let mut again = got.clone();
        for rule in again.read.iter_mut().chain(again.write.iter_mut()) {
            if let PolicyPath::Host(p) = &rule.path {
                rule.path = PolicyPath::Host(crate::policy::canonical_or_lexical(p));
            }
        }
        assert_eq!(got, again);
        // The base is in the plan, in its order, exactly as `runtime_base_rules` gives it.
        let base = runtime_base_rules();
        assert_eq!(got.read[..base.len()], base[..]);
        for r in &base {
            let PolicyPath::Host(p) = &r.path else {
                panic!("{r:?}")
            };
            assert_eq!(p, &crate::policy::canonical_or_lexical(p), "{r:?}");
        }
    }

    #[test]
    fn relative_interpreters_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        for (line, named) in [
            ("#!python3\n", "python3"),
            ("#!./bin/python3\n", "./bin/python3"),
            ("#!/usr/bin/env -S ./python3 -u\n", "./python3"),
        ] {
            let script = root.join("srv");
            exe(&script, line);
            let e = plan_for_kernel(&request(&[script.to_str().unwrap()], vec![], &root), 7)
                .unwrap_err()
                .to_string();
            assert_eq!(
                e,
                format!(
                    "exec: `{}` names the relative interpreter `{named}` on its `#!` line; write an absolute interpreter path (or `/usr/bin/env NAME`) on the script's first line",
                    script.display()
                )
            );
        }
    }

    #[test]
    fn env_arguments_name_the_command() {
        for (args, want) in [
            ("node", Some("node")),
            ("-S node --flag", Some("node")),
            ("-Snode", Some("node")),
            ("-i A=1 python3 -u", Some("python3")),
            ("-u NAME -C /tmp deno run", Some("deno")),
            ("-- -weird", Some("-weird")),
            ("--split-string=uv run", Some("uv")),
            ("-i", None),
        ] {
            assert_eq!(env_command(args.split_whitespace()), want, "{args}");
        }
    }

    #[test]
    fn the_read_set_never_holds_the_root_or_an_ancestor_of_home() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        fs_err::create_dir_all(home.join(".aws")).unwrap();
        let refused = |read: Vec<PathBuf>| {
            plan_for_kernel(&request(&["/bin/true"], read, &home), 7)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            refused(vec!["/".into()]),
            "read set: `/` (`filesystem.read[0]`) would open the whole filesystem (`/`) to the server; list a narrower directory in filesystem.read"
        );
        assert_eq!(
            refused(vec![root.join("data"), root.clone()]),
            format!(
                "read set: `{}` (`filesystem.read[1]`) would open the home directory (`{}`) to the server; list a narrower directory in filesystem.read",
                root.display(),
                home.display()
            )
        );
        // The home itself, or a credential folder, only on purpose: allowed (and warned about).
        let p = plan_for_kernel(&request(&["/bin/true"], vec![home.clone()], &home), 7).unwrap();
        assert_eq!(
            exposed_credentials(&request(&["/bin/true"], vec![home.clone()], &home).policy),
            [("filesystem.read[0]".to_string(), home.join(".aws"))]
        );
        assert!(
            p.read
                .iter()
                .any(|r| r.path == PolicyPath::Host(home.clone()))
        );
        // A derived rule may not even cover the home or a credential path.
        for covered in [home.clone(), home.join(".aws")] {
            let rule = FsRule {
                path: PolicyPath::Host(covered.clone()),
                origin: Origin::Interpreter,
                required: true,
            };
            let protected = vec![(crate::policy::HOME_DIRECTORY.to_string(), home.clone())];
            let e = check_read_set(&[rule], &protected).unwrap_err().to_string();
            assert!(e.contains("(interpreter prefix) would open"), "{e}");
        }
    }

    /// The byte comparison of normal forms answers as `Path::starts_with` for every pair.
    #[test]
    fn starts_with_normal_agrees_with_path_starts_with() {
        let paths = [
            "", "/", "//", "/a", "/a/", "/a//", "/ab", "/a/b", "/a//b", "/a/./b", "/a/b/",
            "/a/b/c", "/a/bc", "/a/../b", "/a/..", "/..", "a", "a/b", "./a", ".", "..", "../a",
            "/.a", "/a/.b", "/a.b", "/a/b.c",
        ];
        for path in paths {
            for base in paths {
                let (pn, bn) = (normal_form(Path::new(path)), normal_form(Path::new(base)));
                assert_eq!(
                    starts_with_normal(&pn, &bn),
                    Path::new(path).starts_with(base),
                    "`{path}` starts with `{base}`"
                );
            }
        }
    }

    #[test]
    fn credential_paths_name_each_path_and_where_a_link_on_the_way_leads() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        let (home, dots) = (root.join("home"), root.join("dotfiles"));
        fs_err::create_dir_all(&home).unwrap();
        fs_err::create_dir_all(dots.join("ssh")).unwrap();
        fs_err::create_dir_all(dots.join("config")).unwrap();
        // `~/.ssh` and `~/.config` kept elsewhere; `~/.aws` a real folder; the rest absent.
        std::os::unix::fs::symlink(dots.join("ssh"), home.join(".ssh")).unwrap();
        std::os::unix::fs::symlink(dots.join("config"), home.join(".config")).unwrap();
        fs_err::create_dir_all(home.join(".aws")).unwrap();
        let mut want = Vec::new();
        for rel in CREDENTIAL_PATHS {
            let p = home.join(rel);
            if let Some(tail) = rel.strip_prefix(".config/") {
                want.push(dots.join("config").join(tail));
            } else if *rel == ".ssh" {
                want.push(dots.join("ssh"));
            }
            want.push(p);
        }
        assert_eq!(credential_paths(&home), want);
        // The same where the home cannot be listed (each path is looked up instead): as a user
        // other than root, a home without read permission; as root, it can still be listed.
        use std::os::unix::fs::PermissionsExt;
        fs_err::set_permissions(&home, std::fs::Permissions::from_mode(0o311)).unwrap();
        assert_eq!(credential_paths(&home), want);
        fs_err::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Through a link to the home, the same real paths.
        std::os::unix::fs::symlink(&home, root.join("home-link")).unwrap();
        assert_eq!(credential_paths(&root.join("home-link")), want);
    }

    #[test]
    fn prefixes_under_home_never_cover_credentials() {
        let home = PathBuf::from("/home/u");
        let protected = vec![
            (crate::policy::HOME_DIRECTORY.to_string(), home.clone()),
            ("state".to_string(), PathBuf::from("/var/lib/mcpsum")),
        ];
        let avoid = avoided_paths(&protected);
        for (file, prefix) in [
            ("/home/u/.cargo/bin/srv", "/home/u/.cargo/bin"),
            ("/home/u/.local/bin/srv", "/home/u/.local/bin"),
            ("/home/u/.docker/bin/srv", "/home/u/.docker/bin"),
            (
                "/home/u/.nvm/versions/node/v20/bin/node",
                "/home/u/.nvm/versions/node/v20",
            ),
            ("/home/u/.ssh/srv", "/home/u/.ssh/srv"),
            ("/home/u/srv", "/home/u/srv"),
        ] {
            let got = install_prefix(Path::new(file), &avoid);
            assert_eq!(got, PathBuf::from(prefix), "{file}");
            for c in credential_paths(&home) {
                assert!(!c.starts_with(&got), "{file}: {got:?} covers {c:?}");
            }
        }
    }

    #[test]
    fn prefixes_under_any_home_take_only_known_install_layouts() {
        // `$HOME` is /home/u; /home/alice is another person's home from /etc/passwd.
        let protected = vec![
            (
                crate::policy::HOME_DIRECTORY.to_string(),
                PathBuf::from("/home/u"),
            ),
            ("state".to_string(), PathBuf::from("/var/lib/mcpsum")),
        ];
        let avoid = avoided_paths_with(&protected, &[PathBuf::from("/home/alice")]);
        for (file, prefix) in [
            ("/home/u/.claude/bin/srv", "/home/u/.claude/bin"),
            ("/home/u/.npm-global/bin/srv", "/home/u/.npm-global/bin"),
            (
                "/home/u/.npm-global/lib/node_modules/pkg/dist/cli.js",
                "/home/u/.npm-global/lib/node_modules/pkg",
            ),
            ("/home/u/.codex/bin/srv", "/home/u/.codex/bin"),
            ("/home/u/tools/x/bin/srv", "/home/u/tools/x/bin"),
            ("/home/u/.cargo/bin/srv", "/home/u/.cargo/bin"),
            ("/home/u/.local/bin/srv", "/home/u/.local/bin"),
            (
                "/home/u/.local/share/uv/tools/srv/bin/srv",
                "/home/u/.local/share/uv/tools/srv",
            ),
            (
                "/home/u/.local/share/uv/python/cpython-3.12/bin/python3.12",
                "/home/u/.local/share/uv/python/cpython-3.12",
            ),
            (
                "/home/u/.pyenv/versions/3.12/bin/python",
                "/home/u/.pyenv/versions/3.12",
            ),
            ("/home/u/.pyenv/shims/python", "/home/u/.pyenv"),
            (
                "/home/u/.volta/tools/image/node/22.1.0/bin/node",
                "/home/u/.volta/tools/image/node/22.1.0",
            ),
            (
                "/home/u/.local/share/fnm/node-versions/v22/installation/bin/node",
                "/home/u/.local/share/fnm/node-versions/v22/installation",
            ),
            (
                "/home/u/.asdf/installs/nodejs/22/bin/node",
                "/home/u/.asdf/installs/nodejs/22",
            ),
            (
                "/home/u/.local/share/mise/installs/node/22/bin/node",
                "/home/u/.local/share/mise/installs/node/22",
            ),
            // Another user's home is a home too, whatever `$HOME` says.
            ("/home/alice/bin/srv", "/home/alice/bin"),
            ("/home/alice/.claude/bin/srv", "/home/alice/.claude/bin"),
            ("/home/alice/srv", "/home/alice/srv"),
            // Outside every home: the parent of `bin/`, never an ancestor of a home.
            ("/opt/tool/bin/srv", "/opt/tool"),
            ("/home/bin/srv", "/home/bin"),
        ] {
            let got = install_prefix(Path::new(file), &avoid);
            assert_eq!(got, PathBuf::from(prefix), "{file}");
            for home in ["/home/u", "/home/alice"] {
                for c in credential_paths(Path::new(home)) {
                    assert!(!c.starts_with(&got), "{file}: {got:?} covers {c:?}");
                }
            }
        }
    }

    #[test]
    fn passwd_homes_are_the_homes_of_people() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
sync:x:4:65534:sync:/bin:/bin/sync\n\
alice:x:1000:1000::/home/alice:/bin/zsh\n\
svc:x:990:990::/srv/svc:/usr/bin/false\n\
bob:x:1001:1001::/home/bob:/usr/sbin/nologin\n\
dev:x:1002:1002::/data/dev:/bin/sh\n\
odd:x:1003:1003::/:/bin/sh\n\
broken line\n";
        assert_eq!(
            passwd_homes(passwd),
            ["/root", "/home/alice", "/home/bob", "/data/dev"]
                .map(PathBuf::from)
                .to_vec()
        );
    }

    #[test]
    fn every_protected_home_is_guarded() {
        // `$HOME` points elsewhere; the passwd home is the second home entry.
        let protected = vec![
            (
                crate::policy::HOME_DIRECTORY.to_string(),
                PathBuf::from("/tmp/elsewhere"),
            ),
            (
                crate::policy::HOME_DIRECTORY.to_string(),
                PathBuf::from("/home/u"),
            ),
        ];
        let avoid = avoided_paths_with(&protected, &[]);
        assert_eq!(
            install_prefix(Path::new("/home/u/bin/srv"), &avoid),
            PathBuf::from("/home/u/bin")
        );
        for covered in ["/home/u", "/home"] {
            let rule = FsRule {
                path: PolicyPath::Host(covered.into()),
                origin: Origin::Command,
                required: true,
            };
            let e = check_read_set(&[rule], &protected).unwrap_err().to_string();
            assert!(
                e.contains("would open the home directory (`/home/u`)"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_read_rule_that_is_the_root_or_a_home_under_another_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs_err::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        fs_err::create_dir_all(home.join(".ssh")).unwrap();
        // A link stands in for a bind mount: another path, the same (st_dev, st_ino).
        std::os::unix::fs::symlink("/", root.join("rootb")).unwrap();
        std::os::unix::fs::symlink(&home, root.join("homeb")).unwrap();
        std::os::unix::fs::symlink(&root, root.join("upb")).unwrap();
        let protected = vec![(crate::policy::HOME_DIRECTORY.to_string(), home.clone())];
        for (rule, what) in [
            ("rootb", "the whole filesystem (`/`)"),
            (
                "homeb",
                &format!("the home directory (`{}`)", home.display()),
            ),
            (
                "upb",
                &format!("an ancestor of the home directory (`{}`)", root.display()),
            ),
        ] {
            for origin in [
                Origin::Policy("filesystem.read[0]".into()),
                Origin::Interpreter,
            ] {
                let r = FsRule {
                    path: PolicyPath::Host(root.join(rule)),
                    origin: origin.clone(),
                    required: true,
                };
                let e = check_read_set(&[r], &protected).unwrap_err().to_string();
                assert!(
                    e.contains(&format!(
                        "`{}` ({origin}) is {what} mounted elsewhere",
                        root.join(rule).display()
                    )),
                    "{e}"
                );
            }
        }
        // The home by its own path stays a policy's choice; a plain folder passes.
        for ok in [home.clone(), home.join(".ssh")] {
            let r = FsRule {
                path: PolicyPath::Host(ok),
                origin: Origin::Policy("filesystem.read[0]".into()),
                required: true,
            };
            check_read_set(&[r], &protected).unwrap();
        }
    }

    #[test]
    fn the_runtime_base_holds_no_tls_keys() {
        for base in RUNTIME_BASE {
            for key in TLS_KEY_DIRS {
                assert!(!Path::new(key).starts_with(base), "{base} covers {key}");
            }
        }
        let protected = vec![(
            crate::policy::HOME_DIRECTORY.to_string(),
            "/nonexistent-home".into(),
        )];
        check_read_set(&runtime_base_rules(), &protected).unwrap();
    }

    #[test]
    fn seccomp_table_per_mode() {
        let ns = ReadOnlyView::MountNamespace;
        let none = seccomp_table(&NetworkMode::None, 7, &ns);
        let egress = seccomp_table(&NetworkMode::Egress { allow: vec![] }, 2, &ns);
        let compensated =
            seccomp_table(&NetworkMode::None, 7, &ReadOnlyView::Seccomp("test".into()));
        let find = |t: &SeccompTable, n: &str| t.eperm.iter().find(|r| r.syscall == n).cloned();
        assert_eq!(find(&none, "socket"), Some(rule("socket")));
        assert_eq!(
            find(&egress, "socket").unwrap().any_of,
            vec![vec![ArgCmp::Ne(0, 2), ArgCmp::Ne(0, 10)]]
        );
        for t in [&none, &egress] {
            assert_eq!(
                find(t, "socketpair").unwrap().any_of,
                vec![
                    vec![ArgCmp::Ne(0, 1)],
                    vec![
                        ArgCmp::Ne(1, 1),
                        ArgCmp::Ne(1, 0o4001),
                        ArgCmp::Ne(1, 0o2_000_001),
                        ArgCmp::Ne(1, 0o2_004_001)
                    ]
                ]
            );
            assert_eq!(
                find(t, "prlimit64").unwrap().any_of,
                vec![vec![ArgCmp::Ne(0, 0)]]
            );
            assert_eq!(find(t, "fchmodat").unwrap().any_of.len(), 3);
            assert_eq!(find(t, "fchmod").unwrap().any_of.len(), 3);
            assert_eq!(find(t, "utimensat"), None);
            for n in ["fchownat", "setxattr", "setxattrat", "shmget", "mq_open"] {
                assert_eq!(find(t, n), Some(rule(n)), "{n}");
            }
            assert_eq!(t.enosys, vec![rule("clone3")]);
            for n in [
                "ptrace",
                "mount",
                "unshare",
                "bpf",
                "keyctl",
                "io_uring_setup",
            ] {
                assert_eq!(find(t, n), Some(rule(n)), "{n}");
            }
            assert_eq!(find(t, "clone").unwrap().any_of.len(), 7);
        }
        // Without the read-only view: no mode or time change at all.
        for n in [
            "chmod",
            "fchmod",
            "fchmodat",
            "fchmodat2",
            "utimensat",
            "utimes",
        ] {
            assert_eq!(find(&compensated, n), Some(rule(n)), "{n}");
        }
        assert_eq!(find(&none, "truncate"), None);
        assert_eq!(find(&egress, "truncate"), Some(rule("truncate")));
        // No syscall in two filters: equal-rank actions would make the order matter.
        for r in &none.eperm {
            assert!(!none.enosys.iter().any(|e| e.syscall == r.syscall));
        }
    }
}

//! The `mcpsum-launch` binary: mcpsum's sandbox launcher and guard, installed beside `mcpsum`.
//! It is the only file the AppArmor profile grants `userns` to, and whatever it executes runs
//! under a seccomp floor that forbids namespaces and mounts (see
//! [`mcpsum_sandbox::launcher_binary_main`]).
#![forbid(unsafe_code)]

fn main() {
    mcpsum_sandbox::launcher_binary_main()
}

//! The `mcpsum` binary: everything is in the library's [`mcpsum::main`].
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    mcpsum::main()
}

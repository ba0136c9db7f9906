//! mcpsum's own stdin and stdout as async streams, for the proxy's client side (the relay, and
//! the answers of a proxy that could not start).
//!
//! A pipe (what clients give) is read and written directly through the reactor: the proxy may
//! have made it non-blocking already (the flag is the pipe's, shared by every descriptor of
//! it), which tokio's blocking `stdin()` would take for an error. Anything else (a terminal, a
//! file) goes through tokio's blocking helper thread, which costs a thread hand-off per read.

use std::os::fd::AsFd;

/// Size asked for the pipes mcpsum writes to: a large answer goes out in fewer writes and
/// wake-ups.
pub const PIPE_SIZE: i32 = 256 << 10;

/// Our stdin as an async reader.
pub fn client_stdin() -> Box<dyn tokio::io::AsyncRead + Unpin + Send> {
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| tokio::net::unix::pipe::Receiver::from_owned_fd(fd).ok());
    match pipe {
        Some(p) => Box::new(p),
        None => Box::new(tokio::io::stdin()),
    }
}

/// Our stdout as an async writer, like [`client_stdin`]; a pipe is asked to hold
/// [`PIPE_SIZE`].
pub fn client_stdout() -> Box<dyn tokio::io::AsyncWrite + Unpin + Send> {
    let pipe = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| {
            let _ = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
            tokio::net::unix::pipe::Sender::from_owned_fd(fd).ok()
        });
    match pipe {
        Some(p) => Box::new(p),
        None => Box::new(tokio::io::stdout()),
    }
}

//! `mcpsum sign [--key PATH]`: sign the lockfile's exact bytes with an SSH key (SSHSIG, namespace
//! `mcpsum`) and write `mcp.lock.sig` beside it, so that an allowed-signers file can require it
//! (`crate::signing`), and `ssh-keygen -Y verify -n mcpsum` accepts it.

use std::path::{Path, PathBuf};

use crate::cli::SignArgs;
use crate::error::{Error, Exit, Result};
use crate::output::{self, paint, style};
use crate::signing::sign::{Key, Method};
use crate::signing::{self, State, Trust};
use crate::{fsutil, lockfile, paths};

/// Runs `sign`.
pub fn run(lockfile_flag: Option<&Path>, args: &SignArgs, trust: &Trust) -> Result<Exit> {
    let path = paths::require_lockfile(lockfile_flag)?;
    let key = match &args.key {
        Some(k) => Key::File(k.clone()),
        None => git_signing_key(&path)?,
    };
    // Under the lock `lock` holds while it rewrites the file: what is signed is what is there.
    let guard = lockfile::LockGuard::acquire(&path)?;
    let bytes = lockfile::read_bytes(&path)?;
    // Only a lockfile that every command would accept is worth a signature.
    lockfile::load_from_bytes(&path, &bytes)?;
    let signed = signing::sign::sign(&bytes, &key)?;
    let sig_file = signing::sig_path(&path);
    let opts = fsutil::Replace {
        new_mode: 0o644,
        ..fsutil::Replace::default()
    };
    fsutil::replace(&sig_file, signed.pem.as_bytes(), opts).map_err(|e| {
        Error::new(format!("cannot write `{}`", sig_file.display()))
            .cause(e)
            .hint("check that the directory is writable and the signature file is not a link")
    })?;
    drop(guard);
    let how = match &signed.method {
        Method::InProcess => String::new(),
        Method::KeyFile {
            private,
            not_agent: None,
        } => format!(
            ", through `ssh-keygen` with the private key `{}`",
            private.display()
        ),
        Method::KeyFile {
            private,
            not_agent: Some(why),
        } => format!(
            ", through `ssh-keygen` with the private key `{}` ({why})",
            private.display()
        ),
        Method::Agent(sock) => format!(", by `ssh-agent` (`{}`)", sock.display()),
    };
    output::info(&format!(
        "{} `{}` with {}{how}: wrote `{}`; commit it with the lockfile",
        paint(style::OK, "signed"),
        path.display(),
        signed.signer.describe(),
        sig_file.display()
    ));
    // The signer's own allowed-signers file, if any, says at once whether readers will accept it.
    match signing::inspect(&path, &bytes, trust) {
        Ok(status) => match (&status.anchor, &status.state) {
            (Some(a), State::Valid(s)) => output::info(&format!(
                "the allowed signers `{}` accept it: {}",
                a.path.display(),
                s.describe()
            )),
            (Some(a), State::Invalid { detail, .. }) => output::warn(&format!(
                "the allowed signers `{}` do not accept this signature: {detail}",
                a.path.display()
            )),
            (None, _) => {}
        },
        Err(e) => output::warn(&e.one_line()),
    }
    Ok(Exit::Ok)
}

/// git's `user.signingkey` when `gpg.format` is `ssh` (read in the lockfile's directory, so a
/// repository's own setting counts): a key file, or `key::` and a public key (the agent signs).
fn git_signing_key(lockfile: &Path) -> Result<Key> {
    let dir = fsutil::parent_dir(lockfile);
    let get = |name: &str| {
        std::process::Command::new("git")
            .args(["config", "--get", name])
            .current_dir(&dir)
            .stdin(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let hint = "pass `--key PATH` (a private key file, or a public key file whose key is in `ssh-agent`), or set git's `user.signingkey` with `gpg.format ssh`";
    let Some(key) = get("user.signingkey") else {
        return Err(Error::new(
            "no key to sign with: `--key` is not given and git has no `user.signingkey`",
        )
        .hint(hint));
    };
    if get("gpg.format").as_deref() != Some("ssh") {
        return Err(Error::new(format!(
            "git's `user.signingkey` (`{}`) is not an SSH key: `gpg.format` is not `ssh`",
            crate::text::sanitize_line(&key)
        ))
        .hint(hint));
    }
    if key.starts_with("key::") || key.starts_with("ssh-") || key.starts_with("ecdsa-") {
        return Ok(Key::Literal(key));
    }
    let file = match key.strip_prefix("~/") {
        Some(rest) => paths::home_dir()
            .ok_or_else(|| {
                Error::new("cannot expand `~` in git's `user.signingkey`: no home directory")
                    .hint(hint)
            })?
            .join(rest),
        None => PathBuf::from(&key),
    };
    Ok(Key::File(file))
}

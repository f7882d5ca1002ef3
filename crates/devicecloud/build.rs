//! Embeds the git commit the binary is built from, which `devicecloud --version` prints
//! (docs/operations.md, "Installing"): `git rev-parse --short HEAD`, or `unknown` without git
//! or outside a repository (a crates tarball).
//!
//! The script runs again only when the checked-out commit can have changed: when HEAD, the
//! branch it points to, or the packed refs change. Only files that exist are watched, since
//! Cargo runs a script watching a missing file on every build.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=DEVICECLOUD_GIT_COMMIT={commit}");
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        // `--git-path` names the file in the right directory for worktrees too.
        if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", &name]).map(PathBuf::from)
            && path.is_file()
        {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// One line of git's output, or `None` when git is missing or fails.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.trim();
    (out.status.success() && !line.is_empty()).then(|| line.to_owned())
}

//! What packagers install beside the binary (docs/operations.md, "Installing"): the version
//! line names the commit, and the shell completions and the man pages, generated from the
//! command line definition, cover every subcommand it has.

use std::process::Command;

use clap::CommandFactory;
use devicecloud::Cli;

const BIN: &str = env!("CARGO_BIN_EXE_devicecloud");

/// Runs the binary with `args` and returns its stdout; it must succeed.
fn stdout(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "devicecloud {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every subcommand of the definition, at any depth, as its path of names (`["admin",
/// "create-user"]`).
fn subcommands() -> Vec<Vec<String>> {
    fn walk(command: &clap::Command, path: &[String], all: &mut Vec<Vec<String>>) {
        for sub in command.get_subcommands() {
            let mut path = path.to_vec();
            path.push(sub.get_name().to_owned());
            all.push(path.clone());
            walk(sub, &path, all);
        }
    }
    let mut all = Vec::new();
    walk(&Cli::command(), &[], &mut all);
    all
}

#[test]
fn the_version_names_the_package_version_and_a_commit() {
    let line = stdout(&["--version"]);
    let expected = format!("devicecloud {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(line.starts_with(&expected), "{line}");
    let commit = line
        .trim_end()
        .strip_prefix(&expected)
        .and_then(|rest| rest.strip_suffix(')'));
    assert!(
        commit.is_some_and(|c| c == "unknown" || (c.len() >= 7 && c.chars().all(|c| c.is_ascii_hexdigit()))),
        "{line}"
    );
}

#[test]
fn completions_and_man_pages_cover_every_subcommand() {
    let all = subcommands();
    assert!(all.len() >= 8, "the definition has more subcommands than {all:?}");
    let bash = stdout(&["completions", "bash"]);
    let page = stdout(&["man"]);
    assert!(page.starts_with(".ie") && page.contains(".TH devicecloud 1"), "{page}");
    for path in &all {
        let name = path.last().unwrap();
        assert!(bash.contains(name.as_str()), "the bash completion lacks {path:?}");
        // The page of the program lists its commands as devicecloud-<command>(1), in roff, where
        // a hyphen is written `\-`.
        if path.len() == 1 {
            let reference = format!("devicecloud\\-{}(1)", name.replace('-', "\\-"));
            assert!(page.contains(&reference), "the man page lacks {reference}");
        }
    }

    // With a directory, one page per command: every reference of the program's page resolves.
    let dir = std::env::temp_dir().join(format!("dc-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    stdout(&["man", "--out-dir", dir.to_str().unwrap()]);
    for path in &all {
        let file = dir.join(format!("devicecloud-{}.1", path.join("-")));
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let title = format!(".TH devicecloud-{} 1", path.join("-"));
        assert!(text.contains(&title), "{}: {text}", file.display());
    }
    assert!(dir.join("devicecloud.1").is_file());
    let _ = std::fs::remove_dir_all(&dir);

    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&["completions", shell]);
        assert!(script.contains("serve"), "{shell}: {script}");
    }
}

#[test]
fn completions_and_man_need_no_settings() {
    // A setting that stops every other command does not stop these.
    for args in [&["completions", "zsh"][..], &["man"]] {
        let out = Command::new(BIN)
            .args(args)
            .env("DEVICECLOUD_HTTP_ADDR", "not an address")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

//! `docs/cli.md` is every command's `--help`, exactly as the built binary prints it, so the
//! reference cannot drift from the clap definitions. This test renders it again and fails when
//! the committed file differs; `PRECISE_TTL_BLESS=1` rewrites the file instead. The reference
//! documents `bench` too, so it is rendered by a binary built with the `bench` feature.

use std::path::PathBuf;

const BLESS_ENV: &str = "PRECISE_TTL_BLESS";

/// `precise-ttl <path> --help`, with no environment that could change what it shows (a set
/// `PRECISE_TTL_*` variable or a config file would show up as a default, `COLUMNS` as the width).
fn help(path: &[String]) -> String {
    let output = assert_cmd::Command::cargo_bin("precise-ttl")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(path)
        .arg("--help")
        .output()
        .expect("precise-ttl --help runs");
    assert!(
        output.status.success(),
        "precise-ttl {} --help failed: {}",
        path.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("help is UTF-8")
}

/// The subcommands a help text lists under `Commands:`, `help` left out.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| line.trim_end() != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        // A name starts two spaces in; deeper lines continue a wrapped description.
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

fn render_command(path: Vec<String>, out: &mut String) {
    let text = help(&path);
    let title = std::iter::once("precise-ttl".to_string())
        .chain(path.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    // Trailing blanks on a line say nothing and would only trouble editors and diffs.
    let lines: Vec<&str> = text.trim_end().lines().map(str::trim_end).collect();
    out.push_str(&format!(
        "\n## `{title}`\n\n```text\n{}\n```\n",
        lines.join("\n")
    ));
    for sub in subcommands(&text) {
        let mut deeper = path.clone();
        deeper.push(sub);
        render_command(deeper, out);
    }
}

/// The whole of `docs/cli.md`.
pub fn render() -> String {
    let mut out = String::from(
        "# CLI reference\n\n\
         Every command's `--help`, as `precise-ttl` prints it. Generated from the clap definitions \
         (`crates/flags/src/`, and `bench`'s in `crates/bench-driver/src/cli.rs`) by the test \
         `cli_reference::docs_cli_md_matches_the_binary`, which fails when this file is stale; do \
         not edit it by hand, regenerate it:\n\n\
         ```sh\n\
         PRECISE_TTL_BLESS=1 cargo test -p precise-ttl-cli --features bench --test it -- cli_reference\n\
         ```\n\n\
         `bench`, the test bench, is a command only of a binary built with the `bench` feature \
         (`cargo build --release -p precise-ttl-cli --features bench`); the installed `precise-ttl` \
         has the others.\n\n\
         How flags, `PRECISE_TTL_*` variables and the configuration file combine, and the exit \
         codes: [configuration.md](configuration.md).\n",
    );
    render_command(Vec::new(), &mut out);
    out
}

fn docs_cli_md() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md")
}

#[test]
#[cfg_attr(
    not(feature = "bench"),
    ignore = "docs/cli.md documents `bench`: run with --features bench"
)]
fn docs_cli_md_matches_the_binary() {
    let want = render();
    let path = docs_cli_md();
    if std::env::var(BLESS_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
        std::fs::write(&path, &want).expect("write docs/cli.md");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/cli.md is stale: run `PRECISE_TTL_BLESS=1 cargo test -p precise-ttl-cli --features bench --test it -- cli_reference` and commit docs/cli.md"
    );
}

#[test]
fn the_reference_covers_every_command() {
    let top = help(&[]);
    let commands = subcommands(&top);
    for expected in [
        "setup", "sweep", "run", "status", "archive", "backfill", "doctor", "demo",
    ] {
        assert!(
            commands.iter().any(|c| c == expected),
            "{expected} missing from {commands:?}"
        );
    }
    // The test bench is in the binary exactly when it is built with the `bench` feature.
    assert_eq!(
        commands.iter().any(|c| c == "bench"),
        cfg!(feature = "bench"),
        "{commands:?}"
    );
}

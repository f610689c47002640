//! The README's local quick start, run exactly as written: the block after the
//! `<!-- quickstart-local` marker, in an empty folder, with only the built `precise-ttl` added to
//! the PATH (the binary the test suite built, standing in for `cargo install`) and no endpoint
//! given, so it starts its own DynamoDB Local as a user's would.

use std::path::{Path, PathBuf};

const MARKER: &str = "<!-- quickstart-local";

/// The commands of the README's local quick-start block.
fn quick_start_block(readme: &str) -> String {
    let from = readme
        .find(MARKER)
        .expect("README.md has a <!-- quickstart-local --> marker");
    let rest = &readme[from..];
    let open = rest
        .find("```sh\n")
        .expect("a ```sh block after the marker");
    let body = &rest[open + "```sh\n".len()..];
    let close = body.find("\n```").expect("the block is closed");
    body[..close + 1].to_string()
}

#[test]
fn the_readme_local_quick_start_runs_as_written_in_an_empty_folder() {
    let checkout = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(checkout.join("README.md")).unwrap();
    let block = quick_start_block(&readme);
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            line.starts_with("precise-ttl "),
            "the local quick start must need nothing but the installed binary: {line:?}"
        );
    }

    let dir = std::env::temp_dir().join(format!("precise-ttl-quick-start-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_precise-ttl"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let install = precise_ttl_local::install_dir().unwrap();
    let mut command = assert_cmd::Command::new("bash");
    command
        .env_clear()
        .env("PATH", path)
        // Where the test bed installed DynamoDB Local (a user's cache folder by default).
        .env(precise_ttl_local::DIR_ENV, &install)
        .current_dir(&dir)
        .args(["-euo", "pipefail", "-c", &block])
        .timeout(std::time::Duration::from_secs(300));
    if let Some(home) = std::env::var_os("HOME") {
        command.env("HOME", home);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the README's quick start failed ({}):\n{block}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(concat!("precise-ttl ", env!("CARGO_PKG_VERSION"))),
        "{stdout}"
    );
    // What the README says it ends with.
    assert!(
        stdout.contains("deleted 200 of 200 expired items"),
        "{stdout}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(
        left.is_empty(),
        "the quick start left files behind: {left:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_block_is_found_whole() {
    let readme = "x\n<!-- quickstart-local: y -->\n```sh\na\nb\n```\nz\n";
    assert_eq!(quick_start_block(readme), "a\nb\n");
}

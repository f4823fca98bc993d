//! Shared by `wire/tests/fuzz_seeds.rs` and `storage/tests/fuzz_seeds.rs` (included with
//! `#[path]`): compare the seed files under `fuzz/seeds/<target>/` with the seeds a test
//! generates, or rewrite them when `RINGLEADER_BLESS=1`.

use std::collections::BTreeMap;
use std::path::Path;

/// Seed file name (`<target>/<file>`) → bytes.
pub type Seeds = BTreeMap<String, Vec<u8>>;

/// Check that the files of `targets` under `root` are exactly `want`; with `RINGLEADER_BLESS=1`
/// rewrite them instead. `package` names the cargo package in the hint printed on a mismatch.
pub fn check_or_bless(root: &Path, targets: &[&str], want: &Seeds, package: &str) {
    if std::env::var("RINGLEADER_BLESS").is_ok_and(|v| v == "1") {
        for t in targets {
            let dir = root.join(t);
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
        }
        for (name, bytes) in want {
            std::fs::write(root.join(name), bytes).unwrap();
        }
        return;
    }
    let mut have = Seeds::new();
    for t in targets {
        let dir = root.join(t);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let entry = entry.unwrap();
            let name = format!("{t}/{}", entry.file_name().into_string().unwrap());
            have.insert(name, std::fs::read(entry.path()).unwrap());
        }
    }
    let bless = format!("run RINGLEADER_BLESS=1 cargo test -p {package} --test fuzz_seeds");
    assert_eq!(
        have.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "seed files differ; {bless}"
    );
    for (name, bytes) in want {
        assert!(&have[name] == bytes, "{name} is stale; {bless}");
    }
}

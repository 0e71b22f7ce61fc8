//! Helpers shared by the integration tests (`mod common;` in a test file; not a test target itself). Each
//! test file uses some of them, hence `dead_code` allowed here.
#![allow(dead_code)]

use std::path::Path;
use std::process::Output;

/// A child's stdout then stderr, as text (lossy UTF-8), for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Copies the directory `from` into `to` (created), recursively: files and subdirectories. Panics on any
/// I/O error (a test fixture that cannot be copied is a broken test).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

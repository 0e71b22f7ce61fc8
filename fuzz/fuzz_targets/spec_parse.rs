//! The gate-spec loader (crates/core/src/spec/mod.rs `parse`) on arbitrary text: an error or a spec, never a panic; an error
//! always renders (file, line, column) without panicking either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let ctx = servegate_core::spec::Context { gate_dir: PathBuf::from("/g"), cache: PathBuf::from("/c"), home: Some(PathBuf::from("/h")) };
    match servegate_core::spec::parse(Path::new("fuzz.toml"), text, &ctx) {
        Ok(g) => {
            let _ = g.assertions.names();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});

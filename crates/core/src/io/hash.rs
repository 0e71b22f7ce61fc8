//! Streaming SHA-256 of files (model files, containers): the provenance hash a record carries. Reads in
//! 1 MiB blocks, so a multi-GB model file never sits in memory. Owns hashing only; it never decides what
//! to hash (that is the caller's: `record::from_run` hashes the gate's model file).
//!
//! Speed: the `sha2` crate is compiled with `opt-level = 3` even in dev and test builds (Cargo.toml
//! `[profile.dev.package.sha2]`); without it a 1 GiB file takes minutes in a debug build. The
//! `hashes_a_gib_in_seconds` test (ignored by default) measures the rate.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use sha2::{Digest, Sha256};

/// Read block size: 1 MiB.
pub const BLOCK_BYTES: usize = 1 << 20;

/// Lower-case hex SHA-256 of everything `reader` yields, read in [`BLOCK_BYTES`] blocks. Returns the hex
/// digest (64 characters) and the number of bytes hashed.
pub fn sha256_reader<R: Read>(mut reader: R) -> io::Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; BLOCK_BYTES];
    let mut total: u64 = 0;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((hex(&hasher.finalize()), total))
}

/// Lower-case hex SHA-256 of the file at `path` (streamed) and its length in bytes.
pub fn sha256_file(path: &Path) -> io::Result<(String, u64)> {
    sha256_reader(File::open(path)?)
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_bytes(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 0xf) as usize] as char);
    }
    s
}

/// True when `s` is a full SHA-256 digest: exactly 64 lower-case hex digits.
pub fn is_full_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn known_vectors_match_fips_180() {
        assert_eq!(
            sha256_bytes(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_bytes(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn streaming_across_blocks_equals_one_shot() {
        // 2.5 blocks, so the stream crosses block boundaries and ends on a partial block.
        let data: Vec<u8> = (0..(BLOCK_BYTES * 5 / 2))
            .map(|i| (i % 251) as u8)
            .collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&data).unwrap();
        f.flush().unwrap();
        let (digest, n) = sha256_file(f.path()).unwrap();
        assert_eq!(n, data.len() as u64);
        assert_eq!(digest, sha256_bytes(&data));
        assert!(is_full_hex(&digest));
    }

    #[test]
    fn full_hex_is_64_lower_case_digits() {
        assert!(is_full_hex(&"a".repeat(64)));
        assert!(!is_full_hex(&"A".repeat(64)));
        assert!(!is_full_hex(&"a".repeat(63)));
        assert!(!is_full_hex(&"g".repeat(64)));
    }

    /// `cargo test --lib hash -- --ignored --nocapture`: writes a 1 GiB temp file and prints the rate. The
    /// file was just written, so it is read from the page cache: this measures hashing, not the disk.
    #[test]
    #[ignore]
    fn hashes_a_gib_in_seconds() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let block: Vec<u8> = (0..BLOCK_BYTES).map(|i| (i * 7 % 256) as u8).collect();
        for _ in 0..1024 {
            f.write_all(&block).unwrap();
        }
        f.flush().unwrap();
        let t = std::time::Instant::now();
        let (_, n) = sha256_file(f.path()).unwrap();
        let s = t.elapsed().as_secs_f64();
        let mb_s = n as f64 / 1e6 / s;
        eprintln!(
            "sha256 of {n} bytes in {s:.2} s: {mb_s:.0} MB/s ({:.0} MiB/s)",
            n as f64 / (1u64 << 20) as f64 / s
        );
        assert_eq!(n, 1 << 30);
        assert!(s < 30.0, "1 GiB took {s:.1} s");
    }
}

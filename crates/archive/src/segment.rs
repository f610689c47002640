//! One file of JSON Lines on local disk, written in batches that are durable (written and
//! fsynced) when `append` returns, and held under an OS file lock while its process lives: a
//! file nobody holds belongs to a dead process, which is how the S3 spool finds segments to
//! upload for a process that was killed.

use crate::{Compression, Rotation, SinkError};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Names for this process's files: `precise-ttl-<start ms>-<pid>-<sequence>`. Start time and pid
/// keep two processes (or one restarted) apart; the sequence orders a process's files.
#[derive(Debug)]
pub(crate) struct Namer {
    prefix: String,
    sequence: u64,
}

impl Namer {
    pub(crate) fn new() -> Namer {
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        Namer {
            prefix: format!("precise-ttl-{start}-{}", std::process::id()),
            sequence: 0,
        }
    }

    pub(crate) fn next(&mut self) -> String {
        self.sequence += 1;
        format!("{}-{:06}", self.prefix, self.sequence)
    }
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    bytes: u64,
    opened: Instant,
    compression: Compression,
}

impl Segment {
    /// A new file `dir/name.jsonl` (`.jsonl.gz` when gzipped), locked, its name made durable.
    pub(crate) fn create(
        dir: &Path,
        name: &str,
        compression: Compression,
    ) -> Result<Segment, SinkError> {
        let path = dir.join(format!("{name}{}", compression.extension()));
        let io = |source| SinkError::Io {
            path: path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .create_new(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        file.try_lock().map_err(|e| SinkError::Io {
            path: path.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
        // The new name must survive a crash too: sync the folder once per file.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(Segment {
            path,
            file,
            bytes: 0,
            opened: Instant::now(),
            compression,
        })
    }

    /// Appends `lines` and fsyncs: when this returns, they survive a crash. Gzipped, a batch is
    /// one gzip member (a file of concatenated members is one valid gzip stream).
    pub(crate) fn append(&mut self, lines: &[String]) -> Result<(), SinkError> {
        let mut buffer = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for l in lines {
            buffer.extend_from_slice(l.as_bytes());
            buffer.push(b'\n');
        }
        let io = |source| SinkError::Io {
            path: self.path.clone(),
            source,
        };
        if self.compression == Compression::Gzip {
            buffer = gzip(&buffer).map_err(io)?;
        }
        self.file.write_all(&buffer).map_err(io)?;
        self.file.sync_data().map_err(io)?;
        self.bytes += buffer.len() as u64;
        Ok(())
    }

    pub(crate) fn is_due(&self, rotation: &Rotation) -> bool {
        self.bytes >= rotation.max_bytes || self.opened.elapsed() >= rotation.max_age
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}

pub(crate) fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4),
        flate2::Compression::fast(),
    );
    encoder.write_all(bytes)?;
    encoder.finish()
}

/// A segment left by a process that no longer holds it, locked by us now, cut after its last
/// whole line (a torn last line was never fsynced, so no delete counted on it).
#[derive(Debug)]
pub(crate) struct Orphan {
    pub(crate) path: PathBuf,
    pub(crate) file: File,
}

/// The unheld `.jsonl` segments in `dir`, oldest name first; empty ones are removed.
pub(crate) fn orphans(dir: &Path) -> Result<Vec<Orphan>, SinkError> {
    let io = |source| SinkError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let io = |source| SinkError::Io {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        if file.try_lock().is_err() {
            continue; // a live process writes or uploads it
        }
        let mut text = Vec::new();
        file.read_to_end(&mut text).map_err(io)?;
        let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if whole == 0 {
            std::fs::remove_file(&path).map_err(io)?;
            continue;
        }
        if whole < text.len() {
            file.set_len(whole as u64).map_err(io)?;
            file.sync_data().map_err(io)?;
        }
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        out.push(Orphan { path, file });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_segment_is_no_orphan_and_a_released_one_is_cut_after_its_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut held = Segment::create(dir.path(), "a", Compression::None).unwrap();
        held.append(&["{\"x\":1}".into()]).unwrap();
        assert!(orphans(dir.path()).unwrap().is_empty());

        let mut dead = Segment::create(dir.path(), "b", Compression::None).unwrap();
        dead.append(&["{\"x\":2}".into()]).unwrap();
        dead.file.write_all(b"{\"torn").unwrap();
        let path = dead.path.clone();
        drop(dead);
        let empty = Segment::create(dir.path(), "c", Compression::None).unwrap();
        let empty_path = empty.path.clone();
        drop(empty);

        let found = orphans(dir.path()).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].path, path);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"x\":2}\n");
        assert!(!empty_path.exists(), "an empty orphan is removed");
    }
}

//! The backfill's checkpoint: each Scan segment's position in a small JSON file, replaced
//! atomically and durably (written to a temporary file in the same folder, fsynced, renamed, and
//! the folder fsynced) so that a crash at any instant leaves the old or the new position, never a
//! torn file or a rename the disk forgot.

use super::BackfillError;
use crate::scan::{ScanCursor, decode_cursor, encode_cursor};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a run works on; a checkpoint written for anything else must not be resumed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BackfillTarget {
    pub table: String,
    pub ttl_attribute: String,
    pub shard_attribute: String,
    pub shards: u16,
    pub segments: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Saved {
    table: String,
    ttl_attribute: String,
    shard_attribute: String,
    shards: u16,
    segments: Vec<SegmentState>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct SegmentState {
    done: bool,
    /// `(name, type, text)` of the last evaluated key; empty at the start.
    cursor: Vec<(String, String, String)>,
}

/// Where each segment stands.
#[derive(Debug, Clone, PartialEq)]
pub enum SegmentPosition {
    Done,
    /// Continue after this key (`None`: from the start).
    At(Option<ScanCursor>),
}

#[derive(Debug)]
pub struct CheckpointFile {
    path: PathBuf,
    saved: Saved,
}

/// How a checkpoint was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    Fresh,
    Resumed { done: usize, segments: usize },
}

impl CheckpointFile {
    /// Resumes the checkpoint at `path` if it exists and was written for `target` (unless
    /// `restart`), otherwise starts afresh; either way the file exists afterwards.
    pub fn open(
        path: &Path,
        target: &BackfillTarget,
        restart: bool,
    ) -> Result<(Self, Opened), BackfillError> {
        let fresh = Saved {
            table: target.table.clone(),
            ttl_attribute: target.ttl_attribute.clone(),
            shard_attribute: target.shard_attribute.clone(),
            shards: target.shards,
            segments: vec![
                SegmentState {
                    done: false,
                    cursor: Vec::new(),
                };
                target.segments as usize
            ],
        };
        let io = |source| BackfillError::Checkpoint {
            path: path.to_path_buf(),
            source,
        };
        let (saved, opened) = if path.exists() && !restart {
            let text = std::fs::read(path).map_err(io)?;
            let saved: Saved = serde_json::from_slice(&text)
                .map_err(|_| BackfillError::NotACheckpoint(path.to_path_buf()))?;
            let theirs = BackfillTarget {
                table: saved.table.clone(),
                ttl_attribute: saved.ttl_attribute.clone(),
                shard_attribute: saved.shard_attribute.clone(),
                shards: saved.shards,
                segments: saved.segments.len() as u32,
            };
            if &theirs != target {
                return Err(BackfillError::OtherTarget {
                    path: path.to_path_buf(),
                    theirs: Box::new(theirs),
                });
            }
            for s in &saved.segments {
                if !s.cursor.is_empty() && decode_cursor(&s.cursor).is_none() {
                    return Err(BackfillError::Damaged(path.to_path_buf()));
                }
            }
            let opened = Opened::Resumed {
                done: saved.segments.iter().filter(|s| s.done).count(),
                segments: saved.segments.len(),
            };
            (saved, opened)
        } else {
            (fresh, Opened::Fresh)
        };
        let file = CheckpointFile {
            path: path.to_path_buf(),
            saved,
        };
        file.save()?;
        Ok((file, opened))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn positions(&self) -> Vec<SegmentPosition> {
        self.saved
            .segments
            .iter()
            .map(|s| {
                if s.done {
                    SegmentPosition::Done
                } else if s.cursor.is_empty() {
                    SegmentPosition::At(None)
                } else {
                    SegmentPosition::At(decode_cursor(&s.cursor))
                }
            })
            .collect()
    }

    pub fn complete(&self) -> bool {
        self.saved.segments.iter().all(|s| s.done)
    }

    /// Records that `segment` has settled every write before `next` and saves durably.
    pub fn advance(
        &mut self,
        segment: usize,
        next: Option<&ScanCursor>,
    ) -> Result<(), BackfillError> {
        let state = &mut self.saved.segments[segment];
        match next {
            Some(c) => state.cursor = encode_cursor(c),
            None => {
                state.done = true;
                state.cursor.clear();
            }
        }
        self.save()
    }

    /// Removes the file once every segment is done.
    pub fn remove(self) -> Result<(), BackfillError> {
        std::fs::remove_file(&self.path).map_err(|source| BackfillError::Checkpoint {
            path: self.path.clone(),
            source,
        })
    }

    fn save(&self) -> Result<(), BackfillError> {
        let io = |source| BackfillError::Checkpoint {
            path: self.path.clone(),
            source,
        };
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(io)?;
        let text = serde_json::to_vec_pretty(&self.saved).expect("a checkpoint serialises");
        tmp.write_all(&text).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(&self.path).map_err(|e| io(e.error))?;
        // The rename is durable only once the folder's entry is.
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(io)
    }
}

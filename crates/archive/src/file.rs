//! The `file://DIR` sink: JSON Lines files in one folder, a new file once the current one holds
//! `max_bytes` or is `max_age` old, each batch fsynced before it counts as written.

use crate::segment::{Namer, Segment};
use crate::{Compression, Rotation, SinkError};
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct FileSink {
    dir: PathBuf,
    rotation: Rotation,
    compression: Compression,
    names: Namer,
    current: Option<Segment>,
}

impl FileSink {
    pub fn open(
        dir: &Path,
        rotation: Rotation,
        compression: Compression,
    ) -> Result<FileSink, SinkError> {
        std::fs::create_dir_all(dir).map_err(|source| SinkError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(FileSink {
            dir: dir.to_path_buf(),
            rotation,
            compression,
            names: Namer::new(),
            current: None,
        })
    }

    /// Appends `lines` and fsyncs the file: when this returns, they survive a crash.
    pub fn append(&mut self, lines: &[String]) -> Result<(), SinkError> {
        if self
            .current
            .as_ref()
            .is_some_and(|c| c.is_due(&self.rotation))
        {
            self.current = None;
        }
        let current = match &mut self.current {
            Some(c) => c,
            None => self.current.insert(Segment::create(
                &self.dir,
                &self.names.next(),
                self.compression,
            )?),
        };
        current.append(lines)
    }
}

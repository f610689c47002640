//! Sinks for expiry records: each record is one JSON line, and a sink says a batch of lines is
//! written only once it is durable (a file: written and fsynced). A deleter waits for that, so a
//! slow sink slows deletes instead of growing memory, and a failing sink stops them with the
//! reason (a record is never dropped silently).
//!
//! `file://DIR`: JSON Lines files `precise-ttl-<start ms>-<sequence>.jsonl`, a new file once the
//! current one holds `max_bytes` or is `max_age` old. `-`: standard output (as durable as the
//! reader makes it).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use thiserror::Error;
use tokio::sync::Mutex;

#[derive(Debug, Error)]
pub enum SinkError {
    #[error("archive {url:?}: {message}")]
    BadUrl { url: String, message: String },
    #[error("writing the archive file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing expiry records to standard output: {0}")]
    Stdout(#[source] std::io::Error),
    #[error("the archive writer stopped: {0}")]
    Task(String),
}

/// Where records go, parsed from `--archive`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkUrl {
    File(PathBuf),
    Stdout,
}

impl SinkUrl {
    pub fn parse(url: &str) -> Result<SinkUrl, SinkError> {
        let bad = |message: &str| SinkError::BadUrl {
            url: url.to_string(),
            message: message.to_string(),
        };
        if url == "-" {
            return Ok(SinkUrl::Stdout);
        }
        if let Some(dir) = url.strip_prefix("file://") {
            if dir.is_empty() {
                return Err(bad(
                    "file:// needs a folder, as file:///var/lib/precise-ttl/archive or file://archive",
                ));
            }
            return Ok(SinkUrl::File(PathBuf::from(dir)));
        }
        if url.starts_with("s3://") {
            return Err(bad("the S3 sink is not built yet; use file://DIR or -"));
        }
        Err(bad("expected file://DIR or - (standard output)"))
    }
}

/// A place records are made durable.
#[derive(Debug, Clone)]
pub enum Sink {
    File(Arc<Mutex<FileSink>>),
    Stdout,
}

impl Sink {
    pub fn open(url: &SinkUrl, rotation: Rotation) -> Result<Sink, SinkError> {
        Ok(match url {
            SinkUrl::File(dir) => Sink::File(Arc::new(Mutex::new(FileSink::open(dir, rotation)?))),
            SinkUrl::Stdout => Sink::Stdout,
        })
    }

    /// Writes `lines` (one JSON record each, without newline); returns once they are durable.
    pub async fn write(&self, lines: Vec<String>) -> Result<(), SinkError> {
        if lines.is_empty() {
            return Ok(());
        }
        match self {
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                for l in &lines {
                    writeln!(out, "{l}").map_err(SinkError::Stdout)?;
                }
                out.flush().map_err(SinkError::Stdout)
            }
            Sink::File(file) => {
                // One writer at a time; the blocking write and fsync off the async threads.
                let mut guard = Arc::clone(file).lock_owned().await;
                tokio::task::spawn_blocking(move || guard.append(&lines))
                    .await
                    .map_err(|e| SinkError::Task(e.to_string()))?
            }
        }
    }
}

/// When a file is closed and the next begun.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    pub max_bytes: u64,
    pub max_age: Duration,
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation {
            max_bytes: 64 * 1024 * 1024,
            max_age: Duration::from_secs(300),
        }
    }
}

/// JSON Lines files in one folder.
#[derive(Debug)]
pub struct FileSink {
    dir: PathBuf,
    rotation: Rotation,
    /// This process's files share its start time; the sequence orders them.
    prefix: String,
    sequence: u64,
    current: Option<Current>,
}

#[derive(Debug)]
struct Current {
    path: PathBuf,
    file: std::fs::File,
    bytes: u64,
    opened: std::time::Instant,
}

impl FileSink {
    pub fn open(dir: &Path, rotation: Rotation) -> Result<FileSink, SinkError> {
        std::fs::create_dir_all(dir).map_err(|source| SinkError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        Ok(FileSink {
            dir: dir.to_path_buf(),
            rotation,
            prefix: format!("precise-ttl-{start}-{}", std::process::id()),
            sequence: 0,
            current: None,
        })
    }

    /// Appends `lines` and fsyncs the file: when this returns, they survive a crash.
    pub fn append(&mut self, lines: &[String]) -> Result<(), SinkError> {
        let rotate = self.current.as_ref().is_some_and(|c| {
            c.bytes >= self.rotation.max_bytes || c.opened.elapsed() >= self.rotation.max_age
        });
        if rotate {
            self.current = None;
        }
        if self.current.is_none() {
            self.sequence += 1;
            let path = self
                .dir
                .join(format!("{}-{:06}.jsonl", self.prefix, self.sequence));
            let file = std::fs::OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(&path)
                .map_err(|source| SinkError::Io {
                    path: path.clone(),
                    source,
                })?;
            // The new name must survive a crash too: sync the folder once per file.
            if let Ok(dir) = std::fs::File::open(&self.dir) {
                let _ = dir.sync_all();
            }
            self.current = Some(Current {
                path,
                file,
                bytes: 0,
                opened: std::time::Instant::now(),
            });
        }
        let current = self.current.as_mut().expect("opened above");
        let mut buffer = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for l in lines {
            buffer.push_str(l);
            buffer.push('\n');
        }
        let io = |source| SinkError::Io {
            path: current.path.clone(),
            source,
        };
        current.file.write_all(buffer.as_bytes()).map_err(io)?;
        current.file.sync_data().map_err(|source| SinkError::Io {
            path: current.path.clone(),
            source,
        })?;
        current.bytes += buffer.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_in(dir: &Path) -> Vec<(String, Vec<String>)> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
            .into_iter()
            .map(|p| {
                let text = std::fs::read_to_string(&p).unwrap();
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    text.lines().map(str::to_string).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn urls_are_parsed_or_refused_with_the_reason() {
        assert_eq!(SinkUrl::parse("-").unwrap(), SinkUrl::Stdout);
        assert_eq!(
            SinkUrl::parse("file:///var/a").unwrap(),
            SinkUrl::File("/var/a".into())
        );
        assert_eq!(
            SinkUrl::parse("file://a").unwrap(),
            SinkUrl::File("a".into())
        );
        for bad in ["file://", "http://x", "archive", "s3://b/p"] {
            assert!(SinkUrl::parse(bad).unwrap_err().to_string().contains(bad));
        }
    }

    #[tokio::test]
    async fn records_land_in_json_lines_files_rotated_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Sink::open(
            &SinkUrl::File(dir.path().to_path_buf()),
            Rotation {
                max_bytes: 10,
                max_age: Duration::from_secs(3600),
            },
        )
        .unwrap();
        sink.write(vec!["{\"a\":1}".into(), "{\"a\":2}".into()])
            .await
            .unwrap();
        sink.write(vec!["{\"a\":3}".into()]).await.unwrap();
        sink.write(vec![]).await.unwrap();
        let files = lines_in(dir.path());
        assert_eq!(files.len(), 2, "{files:?}");
        assert!(files.iter().all(|(name, _)| name.ends_with(".jsonl")));
        assert_eq!(files[0].1, ["{\"a\":1}", "{\"a\":2}"]);
        assert_eq!(files[1].1, ["{\"a\":3}"]);
    }

    #[tokio::test]
    async fn an_old_file_is_closed_and_a_new_one_begun() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Sink::open(
            &SinkUrl::File(dir.path().to_path_buf()),
            Rotation {
                max_bytes: u64::MAX,
                max_age: Duration::from_millis(10),
            },
        )
        .unwrap();
        sink.write(vec!["1".into()]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        sink.write(vec!["2".into()]).await.unwrap();
        assert_eq!(lines_in(dir.path()).len(), 2);
    }

    #[tokio::test]
    async fn a_folder_that_cannot_be_written_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("not-a-folder");
        std::fs::write(&blocker, "x").unwrap();
        let err = Sink::open(&SinkUrl::File(blocker.clone()), Rotation::default()).unwrap_err();
        assert!(err.to_string().contains("not-a-folder"), "{err}");
    }
}

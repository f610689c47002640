//! Sinks for expiry records: each record is one JSON line, and a sink says a batch of lines is
//! written only once it is durable. A deleter waits for that, so a slow sink slows deletes
//! instead of growing memory, and a failing sink stops them with the reason (a record is never
//! dropped silently).
//!
//! - `file://DIR`: JSON Lines files `precise-ttl-<start ms>-<pid>-<sequence>.jsonl` (`.jsonl.gz`
//!   gzipped, one gzip member per batch), a new file every `max_bytes` or `max_age`, each batch
//!   fsynced ([`file`]).
//! - `s3://bucket/prefix`: the same segments in a local spool, each closed one uploaded as one
//!   object ([`s3`]).
//! - `-`: standard output (as durable as its reader makes it).

pub mod aws;
pub mod file;
pub mod s3;
mod segment;
mod url;

pub use file::FileSink;
pub use s3::S3Sink;
pub use url::SinkUrl;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
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
    #[error("archive {url}: {message}")]
    S3 { url: String, message: String },
    #[error("writing expiry records to standard output: {0}")]
    Stdout(#[source] std::io::Error),
    #[error("the archive writer stopped: {0}")]
    Task(String),
}

/// When a file (or spooled segment) is closed and the next begun.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
}

impl Compression {
    pub fn parse(text: &str) -> Result<Compression, String> {
        match text {
            "none" => Ok(Compression::None),
            "gzip" => Ok(Compression::Gzip),
            other => Err(format!("{other:?}: expected gzip or none")),
        }
    }

    pub(crate) fn extension(self) -> &'static str {
        match self {
            Compression::None => ".jsonl",
            Compression::Gzip => ".jsonl.gz",
        }
    }

    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Compression::None => "application/x-ndjson",
            Compression::Gzip => "application/gzip",
        }
    }
}

/// How to open a sink; what a URL does not say.
#[derive(Debug, Clone)]
pub struct SinkOptions {
    pub rotation: Rotation,
    /// `None`: gzip for S3 objects, plain JSON Lines for files.
    pub compression: Option<Compression>,
    /// Where S3 segments wait for upload (one folder per destination inside); `None`:
    /// [`default_spool`].
    pub spool: Option<PathBuf>,
    /// An S3-compatible server instead of AWS's endpoint.
    pub s3_endpoint_url: Option<String>,
    pub region: Option<String>,
    /// A profile named explicitly (`--profile`); `None`: the standard chain.
    pub profile: Option<String>,
    /// How long uploads may fail before writes fail.
    pub give_up_after: Duration,
}

impl Default for SinkOptions {
    fn default() -> Self {
        SinkOptions {
            rotation: Rotation::default(),
            compression: None,
            spool: None,
            s3_endpoint_url: None,
            region: None,
            profile: None,
            give_up_after: Duration::from_secs(120),
        }
    }
}

/// `$STATE_DIRECTORY/spool` (systemd), else `~/.local/state/precise-ttl/spool`, else a folder in
/// the temporary directory. Records are durable once spooled, so it belongs on disk that
/// outlives the process (and, in a container, on a volume).
pub fn default_spool() -> PathBuf {
    if let Some(dir) = std::env::var_os("STATE_DIRECTORY").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("spool");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(home).join(".local/state/precise-ttl/spool");
    }
    std::env::temp_dir().join("precise-ttl-spool")
}

/// A place records are made durable.
#[derive(Debug, Clone)]
pub enum Sink {
    File(Arc<Mutex<FileSink>>),
    S3(Arc<S3Sink>),
    Stdout,
}

impl Sink {
    /// Opens the sink `url` names: a folder is created, a bucket is checked (one line saying why
    /// it cannot be used), a spool left by a stopped process is uploaded.
    pub async fn open(url: &SinkUrl, options: &SinkOptions) -> Result<Sink, SinkError> {
        Ok(match url {
            SinkUrl::File(dir) => Sink::File(Arc::new(Mutex::new(FileSink::open(
                dir,
                options.rotation,
                options.compression.unwrap_or(Compression::None),
            )?))),
            SinkUrl::S3 { bucket, prefix } => {
                let client = s3::client(&aws::AwsChoice {
                    endpoint_url: options.s3_endpoint_url.clone(),
                    region: options.region.clone(),
                    profile: options.profile.clone(),
                })
                .await;
                let s3_options = s3::S3Options {
                    rotation: options.rotation,
                    compression: options.compression.unwrap_or(Compression::Gzip),
                    spool: options.spool.clone().unwrap_or_else(default_spool),
                    give_up_after: options.give_up_after,
                };
                Sink::S3(Arc::new(
                    S3Sink::open(client, bucket, prefix, s3_options).await?,
                ))
            }
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
            Sink::S3(s3) => s3.write(lines).await,
        }
    }

    /// Hands everything written so far to its final place before the process stops (S3: the
    /// current segment closed and every segment uploaded, for at most `wait`). Files and
    /// standard output are final already.
    pub async fn flush(&self, wait: Duration) -> Result<(), SinkError> {
        match self {
            Sink::S3(s3) => s3.flush(wait).await,
            Sink::File(_) | Sink::Stdout => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn lines_in(dir: &Path) -> Vec<(String, Vec<String>)> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
            .into_iter()
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap();
                let text = if p.to_string_lossy().ends_with(".gz") {
                    let mut out = String::new();
                    std::io::Read::read_to_string(
                        &mut flate2::read::MultiGzDecoder::new(&bytes[..]),
                        &mut out,
                    )
                    .unwrap();
                    out
                } else {
                    String::from_utf8(bytes).unwrap()
                };
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    text.lines().map(str::to_string).collect(),
                )
            })
            .collect()
    }

    /// A file sink writing into `dir`, with these options and the rest at their defaults.
    async fn file_sink(dir: &Path, rotation: Rotation, compression: Option<Compression>) -> Sink {
        let options = SinkOptions {
            rotation,
            compression,
            ..SinkOptions::default()
        };
        Sink::open(&SinkUrl::File(dir.to_path_buf()), &options)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn records_land_in_json_lines_files_rotated_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let rotation = Rotation {
            max_bytes: 10,
            max_age: Duration::from_secs(3600),
        };
        let sink = file_sink(dir.path(), rotation, None).await;
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
    async fn gzipped_files_hold_one_member_per_batch_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let sink = file_sink(dir.path(), Rotation::default(), Some(Compression::Gzip)).await;
        sink.write(vec!["1".into(), "2".into()]).await.unwrap();
        sink.write(vec!["3".into()]).await.unwrap();
        let files = lines_in(dir.path());
        assert_eq!(files.len(), 1);
        assert!(files[0].0.ends_with(".jsonl.gz"), "{files:?}");
        assert_eq!(files[0].1, ["1", "2", "3"]);
    }

    #[tokio::test]
    async fn an_old_file_is_closed_and_a_new_one_begun() {
        let dir = tempfile::tempdir().unwrap();
        let rotation = Rotation {
            max_bytes: u64::MAX,
            max_age: Duration::from_millis(10),
        };
        let sink = file_sink(dir.path(), rotation, None).await;
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
        let err = Sink::open(&SinkUrl::File(blocker.clone()), &SinkOptions::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not-a-folder"), "{err}");
    }
}

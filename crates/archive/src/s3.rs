//! The `s3://bucket/prefix` sink. Records are made durable in a local spool first (a segment
//! file, fsynced per batch), so a delete waits for the local disk, never for S3; each closed
//! segment becomes one S3 object, named after the segment so that a retried upload overwrites
//! rather than duplicates. A segment leaves the spool only once its object is written; a new
//! process uploads the segments a killed one left (they are no longer locked).
//!
//! Back-pressure: at most [`MAX_WAITING`] closed segments wait for upload; a rotation beyond that
//! waits, and so do the deletes behind it. Uploads failing for [`S3Options::give_up_after`] turn
//! every write into an error with the reason: deleting stops, the records stay in the spool.

use crate::segment::{Namer, Orphan, Segment, gzip, orphans};
use crate::{Compression, Rotation, SinkError};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore, mpsc, watch};

/// Closed segments that may wait for upload before writers wait.
pub const MAX_WAITING: usize = 4;

#[derive(Debug, Clone)]
pub struct S3Options {
    pub rotation: Rotation,
    pub compression: Compression,
    /// Where segments wait; one folder per destination is made inside it.
    pub spool: PathBuf,
    pub give_up_after: Duration,
}

#[derive(Debug)]
pub struct S3Sink {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: aws_sdk_s3::Client,
    bucket: String,
    prefix: String,
    options: S3Options,
    spool: PathBuf,
    writer: Mutex<Writer>,
    slots: Arc<Semaphore>,
    queue: mpsc::UnboundedSender<Closed>,
    state: watch::Sender<State>,
}

#[derive(Debug)]
struct Writer {
    names: Namer,
    current: Option<Segment>,
}

/// A segment ready for upload, still locked by this process until its object is written.
#[derive(Debug)]
struct Closed {
    path: PathBuf,
    file: File,
    _slot: Option<OwnedSemaphorePermit>,
}

#[derive(Debug, Clone, Default)]
struct State {
    /// Closed segments not yet uploaded.
    pending: usize,
    /// Why uploads have been failing for longer than allowed, while they do.
    failed: Option<String>,
}

impl S3Sink {
    /// Checks the bucket can be used (one line saying why not), then starts uploading what a
    /// dead process left in this destination's spool.
    pub async fn open(
        client: aws_sdk_s3::Client,
        bucket: &str,
        prefix: &str,
        options: S3Options,
    ) -> Result<S3Sink, SinkError> {
        let url = describe(bucket, prefix);
        if let Err(e) = client.head_bucket().bucket(bucket).send().await {
            return Err(SinkError::S3 {
                url,
                message: format!(
                    "the bucket cannot be used ({}); check its name and region, and that this role may s3:ListBucket and s3:PutObject",
                    sdk_reason(&e)
                ),
            });
        }
        let spool = options.spool.join(spool_folder(bucket, prefix));
        std::fs::create_dir_all(&spool).map_err(|source| SinkError::Io {
            path: spool.clone(),
            source,
        })?;
        let left = orphans(&spool)?;
        let (queue, received) = mpsc::unbounded_channel();
        let (state, _) = watch::channel(State::default());
        let inner = Arc::new(Inner {
            client,
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            slots: Arc::new(Semaphore::new(MAX_WAITING)),
            writer: Mutex::new(Writer {
                names: Namer::new(),
                current: None,
            }),
            options,
            spool,
            queue,
            state,
        });
        if !left.is_empty() {
            tracing::info!(
                segments = left.len(),
                spool = %inner.spool.display(),
                "uploading segments a stopped process left in the spool"
            );
        }
        for Orphan { path, file } in left {
            inner.enqueue(Closed {
                path,
                file,
                _slot: None,
            });
        }
        tokio::spawn(upload_loop(Arc::clone(&inner), received));
        tokio::spawn(age_loop(Arc::downgrade(&inner)));
        Ok(S3Sink { inner })
    }

    /// The folder this destination's segments wait in.
    pub fn spool(&self) -> &Path {
        &self.inner.spool
    }

    /// Appends `lines` to the current segment; returns once they are fsynced there.
    pub async fn write(&self, lines: Vec<String>) -> Result<(), SinkError> {
        self.inner.check()?;
        let mut writer = self.inner.writer.lock().await;
        if writer
            .current
            .as_ref()
            .is_some_and(|c| c.is_due(&self.inner.options.rotation))
        {
            let slot = Arc::clone(&self.inner.slots)
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            self.inner.check()?;
            let segment = writer.current.take().expect("checked above");
            self.inner.enqueue(Closed {
                path: segment.path,
                file: segment.file,
                _slot: Some(slot),
            });
        }
        let mut segment = match writer.current.take() {
            Some(s) => s,
            None => {
                let name = writer.names.next();
                let spool = self.inner.spool.clone();
                blocking(move || Segment::create(&spool, &name, Compression::None)).await?
            }
        };
        let (segment, written) = tokio::task::spawn_blocking(move || {
            let written = segment.append(&lines);
            (segment, written)
        })
        .await
        .map_err(|e| SinkError::Task(e.to_string()))?;
        writer.current = Some(segment);
        written
    }

    /// Closes the current segment and waits until every segment is uploaded, or `wait` passed
    /// (an error saying how many wait in the spool for the next start).
    pub async fn flush(&self, wait: Duration) -> Result<(), SinkError> {
        {
            let mut writer = self.inner.writer.lock().await;
            if let Some(segment) = writer.current.take() {
                if segment.is_empty() {
                    let _ = std::fs::remove_file(&segment.path);
                } else {
                    self.inner.enqueue(Closed {
                        path: segment.path,
                        file: segment.file,
                        _slot: None,
                    });
                }
            }
        }
        let mut state = self.inner.state.subscribe();
        let drained = tokio::time::timeout(wait, state.wait_for(|s| s.pending == 0)).await;
        if matches!(drained, Ok(Ok(_))) {
            return Ok(());
        }
        let now = self.inner.state.borrow().clone();
        Err(SinkError::S3 {
            url: describe(&self.inner.bucket, &self.inner.prefix),
            message: format!(
                "{} segment(s) not uploaded after {:?}, kept in {} for the next start with this archive{}",
                now.pending,
                wait,
                self.inner.spool.display(),
                now.failed.map(|f| format!(": {f}")).unwrap_or_default()
            ),
        })
    }
}

impl Inner {
    fn check(&self) -> Result<(), SinkError> {
        match &self.state.borrow().failed {
            None => Ok(()),
            Some(reason) => Err(SinkError::S3 {
                url: describe(&self.bucket, &self.prefix),
                message: format!(
                    "{reason}; records are kept in {} and uploaded at the next start",
                    self.spool.display()
                ),
            }),
        }
    }

    fn enqueue(&self, closed: Closed) {
        self.state.send_modify(|s| s.pending += 1);
        // The receiver lives as long as `self`: the upload loop holds an Arc of it.
        let _ = self.queue.send(closed);
    }

    fn key(&self, segment: &Path) -> String {
        let stem = segment
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = format!("{stem}{}", self.options.compression.extension());
        if self.prefix.is_empty() {
            name
        } else {
            format!("{}/{name}", self.prefix)
        }
    }

    async fn upload(&self, closed: &mut Closed) -> Result<(), String> {
        let mut bytes = Vec::new();
        // From the start: a segment just written is positioned at its end, and so is a retry.
        std::io::Seek::rewind(&mut closed.file)
            .and_then(|_| closed.file.read_to_end(&mut bytes))
            .map_err(|e| format!("reading {}: {e}", closed.path.display()))?;
        let body = match self.options.compression {
            Compression::Gzip => tokio::task::spawn_blocking(move || gzip(&bytes))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("compressing {}: {e}", closed.path.display()))?,
            Compression::None => bytes,
        };
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(self.key(&closed.path))
            .content_type(self.options.compression.content_type())
            .body(body.into())
            .send()
            .await
            .map_err(|e| format!("uploading {}: {}", closed.path.display(), sdk_reason(&e)))?;
        Ok(())
    }
}

/// Uploads closed segments in order, each until it succeeds.
async fn upload_loop(inner: Arc<Inner>, mut received: mpsc::UnboundedReceiver<Closed>) {
    while let Some(mut closed) = received.recv().await {
        let mut failing_since: Option<Instant> = None;
        let mut pause = Duration::from_millis(200);
        loop {
            match inner.upload(&mut closed).await {
                Ok(()) => break,
                Err(reason) => {
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    tracing::warn!(error = %reason, "archive upload failed; retrying");
                    if since.elapsed() >= inner.options.give_up_after {
                        inner.state.send_modify(|s| {
                            s.failed = Some(format!(
                                "uploads have failed for {:?}: {reason}",
                                since.elapsed()
                            ))
                        });
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(10));
                }
            }
        }
        if let Err(e) = std::fs::remove_file(&closed.path) {
            // Uploading it again later overwrites the same object with the same records.
            tracing::warn!(path = %closed.path.display(), error = %e, "an uploaded segment could not be removed from the spool");
        }
        drop(closed);
        inner.state.send_modify(|s| {
            s.pending -= 1;
            s.failed = None;
        });
    }
}

/// Closes a segment once it is older than the rotation allows, even when no write comes.
async fn age_loop(inner: std::sync::Weak<Inner>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let mut writer = inner.writer.lock().await;
        if !writer
            .current
            .as_ref()
            .is_some_and(|c| !c.is_empty() && c.is_due(&inner.options.rotation))
        {
            continue;
        }
        // Never wait for a slot here: a full queue means uploads are behind, and the segment
        // may as well grow until the next write rotates it.
        let Ok(slot) = Arc::clone(&inner.slots).try_acquire_owned() else {
            continue;
        };
        let segment = writer.current.take().expect("checked above");
        inner.enqueue(Closed {
            path: segment.path,
            file: segment.file,
            _slot: Some(slot),
        });
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SinkError> + Send + 'static,
) -> Result<T, SinkError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| SinkError::Task(e.to_string()))?
}

fn describe(bucket: &str, prefix: &str) -> String {
    if prefix.is_empty() {
        format!("s3://{bucket}")
    } else {
        format!("s3://{bucket}/{prefix}")
    }
}

/// One spool folder per destination, readable: `bucket` or `bucket--prefix-with-dashes`.
fn spool_folder(bucket: &str, prefix: &str) -> String {
    let clean: String = prefix
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    if clean.is_empty() {
        bucket.to_string()
    } else {
        format!("{bucket}--{clean}")
    }
}

/// A failed call in one line: the service's code and message, or the transport's reason.
fn sdk_reason<E, R>(e: &aws_sdk_s3::error::SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let text = match (e.code(), e.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_string(),
        _ => match e {
            aws_sdk_s3::error::SdkError::ServiceError(s) => {
                format!("{}", DisplayErrorContext(s.err()))
            }
            other => format!("{}", DisplayErrorContext(other)),
        },
    };
    text.replace('\n', " ")
}

/// An S3 client for the archive: the standard AWS configuration with `choice` applied
/// ([`crate::aws::loader`], the chain every client uses); an endpoint URL (an S3-compatible
/// server) is addressed path-style, with fixed credentials when it is on loopback and none
/// were chosen.
pub async fn client(choice: &crate::aws::AwsChoice) -> aws_sdk_s3::Client {
    let local = aws_sdk_s3::config::Credentials::new(
        "precise-ttl-local",
        "precise-ttl-local",
        None,
        None,
        "precise-ttl-local",
    );
    let loader = crate::aws::loader(choice, local).await;
    let config = loader.load().await;
    let s3 = aws_sdk_s3::config::Builder::from(&config)
        .force_path_style(choice.endpoint_url.is_some())
        .build();
    aws_sdk_s3::Client::from_conf(s3)
}

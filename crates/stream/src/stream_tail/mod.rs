//! Tailing a table's DynamoDB Stream with checkpoints, for every consumer of its records (the
//! archive of expiry records, the expiry queue's indexer): every shard, a parent before its
//! children; each page handed to the consumer, and checkpointed past only once the consumer says
//! it is durable. Killed at any point, a tail starts again from the checkpoints: every record is
//! consumed at least once.

mod checkpoint;

use crate::stream::stream_call_error;
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use checkpoint::{Checkpoint, load_checkpoints, save_checkpoint};
use precise_ttl_core::ErrorClass;
use precise_ttl_dynamodb::connect::Dynamo;
use precise_ttl_dynamodb::error::AdapterError;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// A stream that keeps failing is logged at most every ten seconds.
const FAILURE_LOG_EVERY: Duration = Duration::from_secs(10);

/// How often the shard list is read again (DescribeStream allows 10 calls a second per account
/// and region, shared by every reader): at once after a shard ends, since its children take its
/// place then; otherwise new shards are rare (a stream's shards roll over every few hours), and
/// a fleet worker sees a parent another one finished, or a shard it gained, within this.
const SHARD_LIST_EVERY: Duration = Duration::from_secs(10);

/// What a tail hands each page of records to.
pub(crate) trait PageConsumer {
    /// Makes one page of records durable wherever they go (an empty page too: nothing to do).
    /// An error stops the tail before the page is checkpointed.
    fn consume(&mut self, records: &[Record]) -> impl Future<Output = Result<(), AdapterError>>;

    /// A pass read every shard it meant to, at `at`.
    fn passed(&mut self, _at: Instant) {}
}

/// Whether this process reads a stream shard (by its id) now: a fleet splits a stream by leases.
pub type ShardOwner = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// One consumer's position in one stream.
pub(crate) struct StreamTail {
    dynamo: Dynamo,
    arn: String,
    checkpoint_table: String,
    checkpoints: HashMap<String, Checkpoint>,
    iterators: HashMap<String, String>,
    /// The stream's shards (id, parent) as last listed, and when.
    shards: Vec<(String, Option<String>)>,
    listed: Option<Instant>,
    /// `None`: every shard is this tail's.
    owner: Option<ShardOwner>,
    /// The shards read in the last pass (with an owner): one gained since is read again from the
    /// checkpoint another process left, not from this tail's old iterator.
    owned: HashSet<String>,
    /// Shard reads that failed since the last clean pass, and when that was last logged: an
    /// expired iterator is renewed by the next pass, but a read refused for good (streams access
    /// denied) must neither flood the log nor leave `/healthz` green.
    read_failures: u32,
    read_warned: Option<Instant>,
}

impl std::fmt::Debug for StreamTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamTail")
            .field("arn", &self.arn)
            .field("checkpoint_table", &self.checkpoint_table)
            .field("shared", &self.owner.is_some())
            .finish_non_exhaustive()
    }
}

impl StreamTail {
    /// Creates `checkpoint_table` if missing (`what` names it in messages) and loads the
    /// checkpoints of the stream `arn`.
    pub(crate) async fn open(
        dynamo: &Dynamo,
        arn: &str,
        checkpoint_table: &str,
        what: &str,
    ) -> Result<StreamTail, AdapterError> {
        precise_ttl_dynamodb::control::ensure_table(
            dynamo,
            checkpoint_table,
            &[checkpoint::STREAM, checkpoint::SHARD],
            what,
        )
        .await?;
        Ok(StreamTail {
            dynamo: dynamo.clone(),
            arn: arn.to_string(),
            checkpoint_table: checkpoint_table.to_string(),
            checkpoints: load_checkpoints(dynamo, checkpoint_table, arn).await?,
            iterators: HashMap::new(),
            shards: Vec::new(),
            listed: None,
            owner: None,
            owned: HashSet::new(),
            read_failures: 0,
            read_warned: None,
        })
    }

    /// Reads only the shards `owner` grants, each pass from the checkpoints the fleet shares.
    pub(crate) fn with_owner(mut self, owner: ShardOwner) -> StreamTail {
        self.owner = Some(owner);
        self
    }

    pub(crate) fn arn(&self) -> &str {
        &self.arn
    }

    /// Passes over the stream until `stop` completes, pausing `poll_interval` after a pass that
    /// brought nothing. Transient failures are logged (at most every ten seconds) and tried
    /// again; a fatal one ends the tail.
    pub(crate) async fn run<C: PageConsumer>(
        &mut self,
        consumer: &mut C,
        poll_interval: Duration,
        stop: impl Future<Output = ()>,
    ) -> Result<(), AdapterError> {
        let mut failures = 0u32;
        let mut warned: Option<Instant> = None;
        tokio::pin!(stop);
        loop {
            let progressed = tokio::select! {
                _ = &mut stop => return Ok(()),
                r = self.pass(consumer) => match r {
                    Ok(p) => {
                        failures = 0;
                        p
                    }
                    Err(e) if e.class() == ErrorClass::Fatal => return Err(e),
                    Err(e) => {
                        failures = failures.saturating_add(1);
                        if warned.is_none_or(|t| t.elapsed() >= FAILURE_LOG_EVERY) {
                            tracing::warn!(error = %e, failures, "reading the stream failed; trying again");
                            warned = Some(Instant::now());
                        }
                        false
                    }
                },
            };
            if !progressed {
                tokio::select! {
                    _ = &mut stop => return Ok(()),
                    _ = tokio::time::sleep(poll_interval) => {}
                }
            }
        }
    }

    /// One pass over the shards; true if any records came.
    pub(crate) async fn pass<C: PageConsumer>(
        &mut self,
        consumer: &mut C,
    ) -> Result<bool, AdapterError> {
        let relist = self
            .listed
            .is_none_or(|at| at.elapsed() >= SHARD_LIST_EVERY);
        if relist {
            self.shards = list_shards(&self.dynamo, &self.arn).await?;
            self.listed = Some(Instant::now());
        }
        let shards = self.shards.clone();
        let owned: HashSet<String> = match &self.owner {
            Some(owns) => shards
                .iter()
                .filter(|(id, _)| owns(id))
                .map(|(id, _)| id.clone())
                .collect(),
            None => HashSet::new(),
        };
        if self.owner.is_some() && (relist || owned != self.owned) {
            // Other workers advance the shards they hold, and finish the parents of ours.
            self.checkpoints =
                load_checkpoints(&self.dynamo, &self.checkpoint_table, &self.arn).await?;
        }
        let ids: HashSet<&str> = shards.iter().map(|(id, _)| id.as_str()).collect();
        let mut progressed = false;
        let mut clean = true;
        let mut ended = false;
        for (id, parent) in &shards {
            if self.owner.is_some() {
                if !owned.contains(id) {
                    self.iterators.remove(id);
                    continue;
                }
                if !self.owned.contains(id) {
                    self.iterators.remove(id);
                }
            }
            let done = |s: &str| self.checkpoints.get(s).is_some_and(|c| c.finished);
            if done(id) {
                continue;
            }
            // Parent before child: a child's records come after its parent's.
            if let Some(p) = parent
                && ids.contains(p.as_str())
                && !done(p)
            {
                continue;
            }
            let iterator = match self.iterators.remove(id) {
                Some(it) => it,
                None => match self.iterator_from_checkpoint(id).await? {
                    Some(it) => it,
                    None => continue,
                },
            };
            let (came, read) = self.read_shard(id, iterator, consumer).await?;
            progressed |= came;
            clean &= read;
            ended |= self.checkpoints.get(id).is_some_and(|c| c.finished);
        }
        self.owned = owned;
        if ended {
            // Its children are listed by the next pass.
            self.listed = None;
        }
        // Only a pass that read every shard it meant to counts for `/healthz`.
        if clean {
            self.read_failures = 0;
            consumer.passed(Instant::now());
        }
        Ok(progressed)
    }

    /// A shard iterator after the shard's checkpoint (or at its trim horizon without one).
    async fn iterator_from_checkpoint(&self, id: &str) -> Result<Option<String>, AdapterError> {
        let cp = self.checkpoints.get(id).cloned().unwrap_or_default();
        let request = |kind: ShardIteratorType, sequence: Option<&String>| {
            self.dynamo
                .streams
                .get_shard_iterator()
                .stream_arn(&self.arn)
                .shard_id(id)
                .shard_iterator_type(kind)
                .set_sequence_number(sequence.cloned())
                .send()
        };
        let answer = match &cp.sequence {
            None => request(ShardIteratorType::TrimHorizon, None).await,
            Some(seq) => match request(ShardIteratorType::AfterSequenceNumber, Some(seq)).await {
                // The checkpoint is older than the stream keeps records (24 hours): what lay
                // between it and the trim horizon is gone from the stream. Waiting would not
                // bring it back and would archive nothing more, so the archive says so, loudly,
                // and goes on from the oldest record left.
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|se| se.is_trimmed_data_access_exception()) =>
                {
                    tracing::error!(
                        shard = %id,
                        checkpoint = %seq,
                        "the stream no longer holds the records after this shard's checkpoint (it keeps them 24 hours): the expiries among them cannot be archived; resuming at the oldest record it holds"
                    );
                    request(ShardIteratorType::TrimHorizon, None).await
                }
                other => other,
            },
        };
        match answer {
            Ok(out) => Ok(out.shard_iterator),
            Err(e) => Err(stream_call_error(
                "GetShardIterator",
                &self.dynamo.describe_endpoint(),
                e,
            )),
        }
    }

    /// Reads one shard from `iterator` until it has nothing new. Returns whether any records
    /// came, and whether the shard was read without a failed read.
    async fn read_shard<C: PageConsumer>(
        &mut self,
        id: &str,
        mut iterator: String,
        consumer: &mut C,
    ) -> Result<(bool, bool), AdapterError> {
        let mut progressed = false;
        loop {
            let out = match self
                .dynamo
                .streams
                .get_records()
                .shard_iterator(&iterator)
                .limit(1000)
                .send()
                .await
            {
                Ok(out) => out,
                // Refused access is for good: no later pass can read the stream; nor can one
                // without credentials.
                Err(e)
                    if precise_ttl_dynamodb::error::denial(&e).is_some()
                        || precise_ttl_dynamodb::error::is_credentials_failure(&e) =>
                {
                    return Err(stream_call_error(
                        "GetRecords",
                        &self.dynamo.describe_endpoint(),
                        e,
                    ));
                }
                // An expired or trimmed iterator is dropped: the next pass asks for a new one
                // from the checkpoint.
                Err(e) => {
                    self.read_failures = self.read_failures.saturating_add(1);
                    if self
                        .read_warned
                        .is_none_or(|t| t.elapsed() >= FAILURE_LOG_EVERY)
                    {
                        tracing::warn!(shard = %id, error = %aws_sdk_dynamodb::error::DisplayErrorContext(e), failures = self.read_failures, "stream read failed; resuming from the checkpoint");
                        self.read_warned = Some(Instant::now());
                    }
                    return Ok((progressed, false));
                }
            };
            let last = out
                .records()
                .iter()
                .rev()
                .find_map(|r| r.dynamodb().and_then(|d| d.sequence_number()))
                .map(str::to_string);
            progressed |= !out.records().is_empty();
            // Durable first, then the checkpoint: a crash between the two repeats records,
            // never loses them.
            consumer.consume(out.records()).await?;
            let next = out.next_shard_iterator().map(str::to_string);
            let cp = self.checkpoints.entry(id.to_string()).or_default();
            let moved = last.is_some();
            if moved {
                cp.sequence = last;
            }
            cp.finished = next.is_none();
            if moved || cp.finished {
                let cp = cp.clone();
                save_checkpoint(&self.dynamo, &self.checkpoint_table, &self.arn, id, &cp).await?;
            }
            match next {
                None => return Ok((progressed, true)),
                Some(n) if out.records().is_empty() => {
                    self.iterators.insert(id.to_string(), n);
                    return Ok((progressed, true));
                }
                Some(n) => iterator = n,
            }
        }
    }
}

/// How far a consumer is behind its stream, as `status` and `doctor` see it from outside.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StreamBacklog {
    /// Shards the stream lists.
    pub shards: usize,
    /// Shards with a record after the consumer's checkpoint.
    pub behind: usize,
    /// The creation time (epoch seconds, as the stream dates it: to the second on DynamoDB, to
    /// the minute on DynamoDB Local) of the oldest record not consumed yet.
    pub oldest_unconsumed: Option<f64>,
}

/// Reads, for every unfinished shard of the stream `arn`, the first record after the
/// checkpoint in `checkpoint_table` (two calls a shard; nothing is written).
pub(crate) async fn backlog(
    dynamo: &Dynamo,
    arn: &str,
    checkpoint_table: &str,
) -> Result<StreamBacklog, AdapterError> {
    let checkpoints =
        match precise_ttl_dynamodb::table::TableShape::describe(dynamo, checkpoint_table).await? {
            Some(_) => load_checkpoints(dynamo, checkpoint_table, arn).await?,
            None => HashMap::new(),
        };
    let shards = list_shards(dynamo, arn).await?;
    let mut backlog = StreamBacklog {
        shards: shards.len(),
        ..StreamBacklog::default()
    };
    for (id, _) in &shards {
        let cp = checkpoints.get(id).cloned().unwrap_or_default();
        if cp.finished {
            continue;
        }
        let (kind, sequence) = match &cp.sequence {
            Some(seq) => (ShardIteratorType::AfterSequenceNumber, Some(seq.clone())),
            None => (ShardIteratorType::TrimHorizon, None),
        };
        let iterator = dynamo
            .streams
            .get_shard_iterator()
            .stream_arn(arn)
            .shard_id(id)
            .shard_iterator_type(kind)
            .set_sequence_number(sequence)
            .send()
            .await
            .map_err(|e| stream_call_error("GetShardIterator", &dynamo.describe_endpoint(), e))?
            .shard_iterator;
        let Some(iterator) = iterator else {
            continue;
        };
        let out = dynamo
            .streams
            .get_records()
            .shard_iterator(iterator)
            .limit(1)
            .send()
            .await
            .map_err(|e| stream_call_error("GetRecords", &dynamo.describe_endpoint(), e))?;
        if let Some(first) = out.records().first() {
            backlog.behind += 1;
            let created = first
                .dynamodb()
                .and_then(|d| d.approximate_creation_date_time())
                .map(|t| t.as_secs_f64());
            backlog.oldest_unconsumed = match (backlog.oldest_unconsumed, created) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
    }
    Ok(backlog)
}

pub(crate) async fn list_shards(
    dynamo: &Dynamo,
    arn: &str,
) -> Result<Vec<(String, Option<String>)>, AdapterError> {
    let mut shards = Vec::new();
    let mut start: Option<String> = None;
    loop {
        let out = dynamo
            .streams
            .describe_stream()
            .stream_arn(arn)
            .set_exclusive_start_shard_id(start.clone())
            .send()
            .await
            .map_err(|e| stream_call_error("DescribeStream", &dynamo.describe_endpoint(), e))?;
        let Some(d) = out.stream_description else {
            return Ok(shards);
        };
        for s in d.shards() {
            if let Some(id) = s.shard_id() {
                shards.push((id.to_string(), s.parent_shard_id().map(str::to_string)));
            }
        }
        start = d.last_evaluated_shard_id().map(str::to_string);
        if start.is_none() {
            return Ok(shards);
        }
    }
}

//! A simulated DynamoDB for benchmarks: the JSON protocol of the calls precise-ttl and its bench
//! make, served from memory on a loopback port, with DynamoDB's partitions and throttling, a
//! latency model, capacity accounting, and a log of every delete's commit time.
//!
//! ```no_run
//! use precise_ttl_sim::{SimConfig, Simulator};
//! let sim = Simulator::start(SimConfig::default()).unwrap();
//! // Point an SDK client (or precise-ttl) at sim.endpoint(); read sim.stats() at the end.
//! println!("{}", sim.endpoint());
//! ```
//!
//! Calls: CreateTable, DescribeTable, DeleteTable, ListTables, UpdateTable (add or drop a
//! global secondary index, with backfill; billing; stream settings, recorded only),
//! DescribeTimeToLive and UpdateTimeToLive (recorded; nothing expires by itself), PutItem,
//! GetItem, UpdateItem, DeleteItem, Query (table or index), Scan (table, with segments),
//! BatchWriteItem, and PartiQL `DELETE ... WHERE <key equalities> AND <condition> [RETURNING ALL
//! OLD *]` through BatchExecuteStatement and ExecuteStatement. Expressions: see [`expr`]. Not
//! simulated: streams, transactions, local secondary indexes, BatchGetItem, PartiQL other than
//! DELETE, nested attribute paths, update arithmetic, DynamoDB's reserved-word check.
//!
//! Capacity: each table has `table_partitions` partitions (by hash of the partition key), each
//! index one partition per partition-key value; every partition has write and read buckets,
//! every table and index a table-wide pair. A write of an indexed item also writes its index
//! partition, and a full index partition throttles the base write (`IndexWrite...` reasons).
//! `GET /stats` and [`Simulator::stats`] report units and throttles; `GET /deletions` and
//! [`Simulator::deletions`] every delete's commit time.
//!
//! The server runs on its own thread (a single-threaded tokio runtime by default), so its CPU
//! time is its own and [`Stats::cpu_seconds`] reports it. Modules: [`value`] (attribute values),
//! [`codec`] (the wire format), [`expr`] (expressions and PartiQL), [`capacity`] (buckets and
//! units), [`latency`] (the delay model), [`table`] and [`db`] (the store and its operations),
//! [`deletions`] (the delete log), [`server`] (HTTP), [`defaults`] (every setting's default).

pub mod capacity;
pub mod codec;
pub mod db;
pub mod defaults;
pub mod deletions;
pub mod error;
pub mod expr;
pub mod latency;
pub mod server;
pub mod table;
pub mod value;

pub use capacity::{Billing, Limits, Usage};
pub use db::{CallCounts, IndexStats, TableStats};
pub use deletions::Deletion;
pub use error::{DbError, SimError};
pub use latency::Latency;
pub use value::{Item, KeyValue, Number, ScalarType, Value};

use db::Db;
use serde::Serialize;
use server::Shared;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use table::TableDefaults;

/// How the simulator behaves; [`Default`] gives [`defaults`]' settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Where to listen; port 0 picks a free one.
    pub bind: SocketAddr,
    pub latency: Latency,
    /// Where in a call's latency it takes effect (0.5: half way).
    pub commit_point: f64,
    /// Partitions of every table (each with `limits.partition_wcu` / `partition_rcu`).
    pub table_partitions: usize,
    /// Per-partition and per-table (and per-index) limits; on-demand tables use them as they
    /// are, provisioned tables cap the totals at their provisioned units.
    pub limits: Limits,
    /// Runtime threads serving requests (1: everything on one core).
    pub threads: usize,
    /// Seed of the latency draws.
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            bind: SocketAddr::new(defaults::HOST, 0),
            latency: Latency::default(),
            commit_point: defaults::COMMIT_POINT,
            table_partitions: defaults::TABLE_PARTITIONS,
            limits: Limits {
                partition_wcu: defaults::PARTITION_WCU,
                partition_rcu: defaults::PARTITION_RCU,
                total_wcu: defaults::TABLE_WCU,
                total_rcu: defaults::TABLE_RCU,
                burst_seconds: defaults::BURST_SECONDS,
            },
            threads: defaults::THREADS,
            seed: defaults::SEED,
        }
    }
}

impl SimConfig {
    /// No latency.
    pub fn without_latency(mut self) -> Self {
        self.latency = Latency::None;
        self
    }

    /// No capacity limits anywhere.
    pub fn unlimited(mut self) -> Self {
        self.limits = Limits::unlimited();
        self
    }
}

/// Everything the simulator counted.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    pub uptime_s: f64,
    /// CPU seconds the server's threads used (Linux; `None` elsewhere).
    pub cpu_seconds: Option<f64>,
    pub calls: CallCounts,
    pub deletions_logged: u64,
    pub deletion_log_bytes: u64,
    pub limits: Limits,
    pub tables: BTreeMap<String, TableStats>,
}

impl Stats {
    fn collect(shared: &Shared) -> Stats {
        let now = Instant::now();
        let threads = shared
            .threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let db = shared.db();
        Stats {
            uptime_s: now.duration_since(shared.started).as_secs_f64(),
            cpu_seconds: cpu_seconds(&threads),
            calls: db.counts.clone(),
            deletions_logged: db.log.len() as u64,
            deletion_log_bytes: db.log.bytes() as u64,
            limits: db.limits(),
            tables: db.stats(now),
        }
    }
}

/// The CPU time of the given threads (`PID/task/TID` paths under /proc), in seconds.
fn cpu_seconds(threads: &[String]) -> Option<f64> {
    if threads.is_empty() {
        return None;
    }
    let mut total = 0.0;
    for t in threads {
        // schedstat's first field: nanoseconds on the CPU.
        let text = std::fs::read_to_string(format!("/proc/{t}/schedstat")).ok()?;
        let ns: f64 = text.split_whitespace().next()?.parse().ok()?;
        total += ns / 1e9;
    }
    Some(total)
}

/// The calling thread's `/proc` path (`PID/task/TID`), on Linux.
fn this_thread() -> Option<String> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    Some(link.to_string_lossy().into_owned())
}

/// A key attribute for [`TableSpec`].
#[derive(Debug, Clone)]
pub struct KeySpec {
    pub name: String,
    pub kind: ScalarType,
}

impl KeySpec {
    pub fn new(name: &str, kind: ScalarType) -> Self {
        KeySpec {
            name: name.to_string(),
            kind,
        }
    }
}

/// A global secondary index for [`TableSpec`], KEYS_ONLY unless `all_attributes`.
#[derive(Debug, Clone)]
pub struct IndexSpec {
    pub name: String,
    pub partition_key: KeySpec,
    pub sort_key: Option<KeySpec>,
    pub all_attributes: bool,
}

/// An on-demand table to create directly (without a CreateTable call).
#[derive(Debug, Clone)]
pub struct TableSpec {
    pub name: String,
    pub partition_key: KeySpec,
    pub sort_key: Option<KeySpec>,
    pub indexes: Vec<IndexSpec>,
}

impl TableSpec {
    fn to_input(&self) -> Result<codec::CreateTableInput, DbError> {
        let mut definitions = BTreeMap::new();
        let mut keys = |p: &KeySpec, s: &Option<KeySpec>| {
            let mut schema = vec![serde_json::json!({"AttributeName": p.name, "KeyType": "HASH"})];
            definitions.insert(p.name.clone(), p.kind.as_str());
            if let Some(s) = s {
                schema.push(serde_json::json!({"AttributeName": s.name, "KeyType": "RANGE"}));
                definitions.insert(s.name.clone(), s.kind.as_str());
            }
            schema
        };
        let table_keys = keys(&self.partition_key, &self.sort_key);
        let indexes: Vec<serde_json::Value> = self
            .indexes
            .iter()
            .map(|i| {
                serde_json::json!({
                    "IndexName": i.name,
                    "KeySchema": keys(&i.partition_key, &i.sort_key),
                    "Projection": {"ProjectionType": if i.all_attributes { "ALL" } else { "KEYS_ONLY" }},
                })
            })
            .collect();
        let definitions: Vec<serde_json::Value> = definitions
            .iter()
            .map(|(n, t)| serde_json::json!({"AttributeName": n, "AttributeType": t}))
            .collect();
        let mut input = serde_json::json!({
            "TableName": self.name,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": table_keys,
            "AttributeDefinitions": definitions,
        });
        if !indexes.is_empty() {
            input["GlobalSecondaryIndexes"] = serde_json::Value::Array(indexes);
        }
        let bytes = serde_json::to_vec(&input).map_err(|e| DbError::Internal(e.to_string()))?;
        codec::decode(&bytes)
    }
}

/// Items planted per hold of the store's lock: requests keep being served while a bench plants
/// millions.
const PLANT_CHUNK: usize = 4096;

/// A running simulator; stops when dropped.
#[derive(Debug)]
pub struct Simulator {
    endpoint: String,
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Simulator {
    /// Binds the port and starts serving on a thread of its own; returns once it accepts.
    pub fn start(config: SimConfig) -> Result<Simulator, SimError> {
        if config.table_partitions == 0 || config.threads == 0 {
            return Err(SimError::Config(
                "table_partitions and threads must be at least 1".into(),
            ));
        }
        let listener =
            std::net::TcpListener::bind(config.bind).map_err(|source| SimError::Bind {
                addr: config.bind.to_string(),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind {
            addr: config.bind.to_string(),
            source,
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| SimError::Bind {
                addr: addr.to_string(),
                source,
            })?;
        let shared = Arc::new(Shared {
            db: Mutex::new(Db::new(TableDefaults {
                partitions: config.table_partitions,
                limits: config.limits,
            })),
            latency: config.latency,
            commit_point: config.commit_point,
            rng: Mutex::new(fastrand::Rng::with_seed(config.seed)),
            started: Instant::now(),
            threads: Mutex::new(Vec::new()),
            request_ids: AtomicU64::new(0),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), std::io::Error>>();
        let serving = Arc::clone(&shared);
        let threads = config.threads;
        let thread = std::thread::Builder::new()
            .name("precise-ttl-sim".into())
            .spawn(move || serve(serving, listener, threads, stopped, ready_tx))
            .map_err(SimError::Thread)?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(source)) => {
                let _ = thread.join();
                return Err(SimError::Bind {
                    addr: addr.to_string(),
                    source,
                });
            }
            Err(_) => {
                let _ = thread.join();
                return Err(SimError::NotStarted);
            }
        }
        Ok(Simulator {
            endpoint: format!("http://{addr}"),
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`, for an SDK client's endpoint URL.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Units consumed, throttles, calls and CPU so far.
    pub fn stats(&self) -> Stats {
        Stats::collect(&self.shared)
    }

    /// How many deletes the log holds.
    pub fn deletion_count(&self) -> usize {
        self.shared.db().log.len()
    }

    /// Deletes `from..from + limit` of the log, oldest first.
    pub fn deletions(&self, from: usize, limit: usize) -> Vec<Deletion> {
        self.shared.db().log.slice(from, limit)
    }

    /// Creates an on-demand table directly.
    pub fn create_table(&self, spec: &TableSpec) -> Result<(), SimError> {
        let input = spec.to_input()?;
        self.shared.db().create_table_direct(input)?;
        Ok(())
    }

    /// Stores items in `table` without capacity, latency or conditions, maintaining its
    /// indexes; returns how many. The store's lock is taken per few thousand items, so calls
    /// keep being served meanwhile.
    pub fn plant(
        &self,
        table: &str,
        items: impl IntoIterator<Item = Item>,
    ) -> Result<usize, SimError> {
        let mut items = items.into_iter();
        let mut total = 0;
        loop {
            let chunk: Vec<Item> = items.by_ref().take(PLANT_CHUNK).collect();
            if chunk.is_empty() {
                return Ok(total);
            }
            total += self.shared.db().plant(table, chunk)?;
        }
    }

    /// Stops serving and waits for the server's thread.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// The server thread: a tokio runtime serving until told to stop.
fn serve(
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    threads: usize,
    stopped: tokio::sync::oneshot::Receiver<()>,
    ready: std::sync::mpsc::Sender<Result<(), std::io::Error>>,
) {
    let register = {
        let shared = Arc::clone(&shared);
        move || {
            if let Some(t) = this_thread() {
                shared
                    .threads
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(t);
            }
        }
    };
    let runtime = if threads == 1 {
        register();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("precise-ttl-sim")
            .on_thread_start(register)
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        let app = server::router(shared);
        let (signal_tx, signal_rx) = tokio::sync::oneshot::channel::<()>();
        let server = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = signal_rx.await;
        });
        let mut server = std::pin::pin!(server.into_future());
        tokio::select! {
            _ = &mut server => {}
            _ = stopped => {
                let _ = signal_tx.send(());
                // Idle keep-alive connections close at once; a request still sleeping out its
                // latency gets a moment, no more.
                let _ = tokio::time::timeout(Duration::from_secs(2), &mut server).await;
            }
        }
    });
}

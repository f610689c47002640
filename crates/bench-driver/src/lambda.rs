//! A local Lambda service for the function binary `precise-ttl-lambda`: the Runtime API
//! (`/2018-06-01/runtime/invocation/next`, `…/{id}/response`, `…/{id}/error`, `…/init/error`)
//! served per execution environment, and a scheduler of invocations. An invocation that arrives
//! while every environment is busy starts a new one (a new process), as Lambda does; an idle
//! environment is reused (a warm start). A process that overruns its deadline is killed.
//!
//! Each process gets the environment a real Lambda gives a custom runtime (the `AWS_LAMBDA_*`
//! variables, `AWS_REGION`, credentials) plus the function's own variables, and nothing else.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::routing::{get, post};
use serde::Serialize;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// What came back from one invocation.
#[derive(Debug, Clone, Serialize)]
pub struct InvocationRecord {
    pub request_id: String,
    /// The execution environment (process) that served it, from 0.
    pub environment: usize,
    /// The first invocation of its environment.
    pub cold: bool,
    /// For a cold start: from spawning the process to its first call for an invocation (the
    /// init duration Lambda reports), as this service saw it.
    pub init_ms: Option<u64>,
    pub started_ms: i64,
    pub ended_ms: i64,
    /// The function's response (`Ok`) or error document (`Err`); `Err` with a note when it was
    /// killed at its deadline.
    pub result: Result<serde_json::Value, serde_json::Value>,
}

struct Invocation {
    id: String,
    payload: serde_json::Value,
    deadline_ms: i64,
}

#[derive(Default)]
struct ApiState {
    /// When the process first asked for an invocation.
    first_poll: Mutex<Option<std::time::Instant>>,
    next: Mutex<Option<mpsc::Receiver<Invocation>>>,
    waiting: Mutex<HashMap<String, oneshot::Sender<Result<serde_json::Value, serde_json::Value>>>>,
}

type Shared = Arc<ApiState>;

struct Environment {
    child: Child,
    invocations: mpsc::Sender<Invocation>,
    state: Shared,
    busy: Arc<Mutex<bool>>,
    served: usize,
    spawned: std::time::Instant,
    _server: tokio::task::JoinHandle<()>,
}

/// The function: its binary and its configuration (the variables a deploy template sets).
#[derive(Debug, Clone)]
pub struct Function {
    pub program: PathBuf,
    pub name: String,
    pub memory_mb: u32,
    /// The function's own variables (`PRECISE_TTL_*`), and the endpoint for a local store.
    pub variables: Vec<(String, String)>,
}

/// Execution environments of one function, and every invocation's record.
pub struct LocalLambda {
    function: Function,
    environments: Vec<Environment>,
    records: Arc<Mutex<Vec<InvocationRecord>>>,
    invoked: usize,
    /// Standard output of every environment, line by line (logs and EMF).
    pub output: Arc<Mutex<Vec<String>>>,
}

impl std::fmt::Debug for LocalLambda {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLambda")
            .field("function", &self.function)
            .field("environments", &self.environments.len())
            .finish_non_exhaustive()
    }
}

fn now_ms() -> i64 {
    use precise_ttl_engine::Clock;
    precise_ttl_engine::SystemClock.now().as_millis()
}

async fn next(State(shared): State<Shared>) -> (StatusCode, HeaderMap, String) {
    shared
        .first_poll
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(std::time::Instant::now);
    let receiver = shared.next.lock().unwrap_or_else(|p| p.into_inner()).take();
    let Some(mut receiver) = receiver else {
        return (
            StatusCode::CONFLICT,
            HeaderMap::new(),
            "one poller at a time".into(),
        );
    };
    let invocation = receiver.recv().await;
    *shared.next.lock().unwrap_or_else(|p| p.into_inner()) = Some(receiver);
    let Some(invocation) = invocation else {
        // The service is shutting down: this environment gets nothing more.
        std::future::pending::<()>().await;
        unreachable!();
    };
    let mut headers = HeaderMap::new();
    let header = |v: String| HeaderValue::from_str(&v).expect("a valid header value");
    headers.insert(
        "lambda-runtime-aws-request-id",
        header(invocation.id.clone()),
    );
    headers.insert(
        "lambda-runtime-deadline-ms",
        header(invocation.deadline_ms.to_string()),
    );
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        header("arn:aws:lambda:us-east-1:000000000000:function:local".into()),
    );
    headers.insert(
        "lambda-runtime-trace-id",
        header(format!("Root=1-{:08x}-local;Sampled=0", fastrand::u32(..))),
    );
    (StatusCode::OK, headers, invocation.payload.to_string())
}

fn answer(shared: &Shared, id: &str, result: Result<serde_json::Value, serde_json::Value>) {
    if let Some(tx) = shared
        .waiting
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(id)
    {
        let _ = tx.send(result);
    }
}

async fn response(
    State(shared): State<Shared>,
    Path(id): Path<String>,
    body: String,
) -> StatusCode {
    let value = serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body));
    answer(&shared, &id, Ok(value));
    StatusCode::ACCEPTED
}

async fn error(State(shared): State<Shared>, Path(id): Path<String>, body: String) -> StatusCode {
    let value = serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body));
    answer(&shared, &id, Err(value));
    StatusCode::ACCEPTED
}

async fn init_error(body: String) -> StatusCode {
    tracing::warn!(%body, "the function failed to initialize");
    StatusCode::ACCEPTED
}

impl LocalLambda {
    pub fn new(function: Function) -> LocalLambda {
        LocalLambda {
            function,
            environments: Vec::new(),
            records: Arc::new(Mutex::new(Vec::new())),
            invoked: 0,
            output: Arc::new(Mutex::new(Vec::new())),
        }
    }

    async fn start_environment(&mut self) -> std::io::Result<usize> {
        let index = self.environments.len();
        let (tx, rx) = mpsc::channel(1);
        let state: Shared = Arc::new(ApiState {
            first_poll: Mutex::new(None),
            next: Mutex::new(Some(rx)),
            waiting: Mutex::new(HashMap::new()),
        });
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let api = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let f = &self.function;
        let stream = format!("2026/11/25/[$LATEST]{:032x}", fastrand::u128(..));
        let mut cmd = Command::new(&f.program);
        cmd.env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", api.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", &f.name)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", f.memory_mb.to_string())
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env(
                "AWS_LAMBDA_LOG_GROUP_NAME",
                format!("/aws/lambda/{}", f.name),
            )
            .env("AWS_LAMBDA_LOG_STREAM_NAME", stream)
            .env("AWS_REGION", "us-east-1")
            // The execution role's temporary credentials, as Lambda sets them.
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env("AWS_SESSION_TOKEN", "local")
            .envs(f.variables.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let spawned = std::time::Instant::now();
        let mut child = cmd.spawn()?;
        for pipe in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let output = Arc::clone(&self.output);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    output.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                }
            });
        }
        self.environments.push(Environment {
            child,
            invocations: tx,
            state,
            busy: Arc::new(Mutex::new(false)),
            served: 0,
            spawned,
            _server: server,
        });
        Ok(index)
    }

    /// Invokes the function with `payload` and a deadline `timeout` from now, on an idle
    /// environment or a new one. Returns when the invocation has been handed over; its record
    /// appears in [`LocalLambda::records`] once it ends.
    pub async fn invoke(
        &mut self,
        payload: serde_json::Value,
        timeout: Duration,
    ) -> std::io::Result<()> {
        let idle = self.environments.iter_mut().position(|e| {
            !*e.busy.lock().unwrap_or_else(|p| p.into_inner())
                && matches!(e.child.try_wait(), Ok(None))
        });
        let index = match idle {
            Some(i) => i,
            None => self.start_environment().await?,
        };
        self.invoked += 1;
        let id = format!("{:08x}-local-{}", fastrand::u32(..), self.invoked);
        let env = &mut self.environments[index];
        let cold = env.served == 0;
        env.served += 1;
        *env.busy.lock().unwrap_or_else(|p| p.into_inner()) = true;
        let started_ms = now_ms();
        let deadline_ms = started_ms + timeout.as_millis() as i64;
        let (tx, rx) = oneshot::channel();
        env.state
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), tx);
        let _ = env
            .invocations
            .send(Invocation {
                id: id.clone(),
                payload,
                deadline_ms,
            })
            .await;
        let busy = Arc::clone(&env.busy);
        let records = Arc::clone(&self.records);
        let pid = env.child.id();
        let (state, spawned) = (Arc::clone(&env.state), env.spawned);
        tokio::spawn(async move {
            // Lambda ends an invocation at its deadline; a little grace for the answer in flight.
            let result = match tokio::time::timeout(timeout + Duration::from_millis(500), rx).await
            {
                Ok(Ok(result)) => result,
                _ => {
                    if let Ok(pid) = i32::try_from(pid) {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                    Err(
                        serde_json::json!({"errorType": "Sandbox.Timedout", "errorMessage": "killed at its deadline"}),
                    )
                }
            };
            records
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(InvocationRecord {
                    request_id: id,
                    environment: index,
                    cold,
                    init_ms: if cold {
                        state
                            .first_poll
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .map(|t| t.duration_since(spawned).as_millis() as u64)
                    } else {
                        None
                    },
                    started_ms,
                    ended_ms: now_ms(),
                    result,
                });
            *busy.lock().unwrap_or_else(|p| p.into_inner()) = false;
        });
        Ok(())
    }

    /// Invocations still running.
    pub fn running(&self) -> usize {
        self.environments
            .iter()
            .filter(|e| *e.busy.lock().unwrap_or_else(|p| p.into_inner()))
            .count()
    }

    /// Every finished invocation, in the order they ended.
    pub fn records(&self) -> Vec<InvocationRecord> {
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits for running invocations (at most `limit`), then stops every environment.
    pub async fn shut_down(mut self, limit: Duration) -> Vec<InvocationRecord> {
        let until = tokio::time::Instant::now() + limit;
        while self.running() > 0 && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for e in &mut self.environments {
            let _ = e.child.kill();
            let _ = e.child.wait();
        }
        self.records()
    }
}

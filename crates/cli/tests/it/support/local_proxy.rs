//! A proxy of the tests' own in front of DynamoDB Local or the local S3 server: the accept
//! loop, its port and its state, shared by the fault proxy (`crate::proxy`) and the recorder
//! (`crate::recorder`), which differ only in how they serve a connection.

/// A proxy of the tests' own on a free local port, in front of an upstream: each connection is
/// served by a task of its own with the proxy's `state`, and the accepting task ends when this
/// is dropped. The fault proxy and the recording proxy are two of these: they differ only in
/// their state and in how they serve a connection.
pub struct LocalProxy<S> {
    pub url: String,
    pub state: std::sync::Arc<S>,
    task: tokio::task::JoinHandle<()>,
}

impl<S> Drop for LocalProxy<S> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A proxy's state, and how the proxy serves one connection with it.
pub trait Serves: Default + Send + Sync + 'static {
    /// Serves `conn`, forwarding to `upstream` (`host:port`).
    fn serve(
        conn: tokio::net::TcpStream,
        upstream: String,
        state: std::sync::Arc<Self>,
    ) -> impl std::future::Future<Output = std::io::Result<()>> + Send + 'static;
}

impl<S: Serves> LocalProxy<S> {
    /// Listens in front of `upstream`, and serves each connection with the state.
    pub async fn start(upstream: &str) -> LocalProxy<S> {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = std::sync::Arc::new(S::default());
        let shared = std::sync::Arc::clone(&state);
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let served = S::serve(conn, upstream.clone(), std::sync::Arc::clone(&shared));
                // A connection that fails ends alone: the test sees what its client saw.
                tokio::spawn(async move {
                    let _ = served.await;
                });
            }
        });
        LocalProxy { url, state, task }
    }
}

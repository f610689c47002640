//! A small local HTTP server standing in for an AWS credential endpoint (the container
//! credentials endpoint, the instance metadata service, SSO's portal and OIDC): it answers each
//! request with what the test's function returns and records what it was asked, so a test can
//! tell that a credential source was really used. Plain HTTP/1.1 over std's `TcpListener`, one
//! thread per connection, each answer closing its connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// A request as the stand-in saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
    }
}

/// An answer: status, extra headers, body.
pub type Answer = (u16, Vec<(&'static str, String)>, String);

#[derive(Debug)]
pub struct StandIn {
    pub url: String,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl StandIn {
    /// Serves on a free loopback port until the test process ends.
    pub fn start(answer: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answer = Arc::new(answer);
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (answer, log) = (Arc::clone(&answer), Arc::clone(&log));
                std::thread::spawn(move || serve(stream, &*answer, &log));
            }
        });
        StandIn { url, seen }
    }

    /// The requests so far.
    pub fn seen(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, answer: &dyn Fn(&Request) -> Answer, log: &Mutex<Vec<Request>>) {
    let Some(request) = read(&stream) else { return };
    let (status, headers, body) = answer(&request);
    log.lock().unwrap().push(request);
    let mut text = format!(
        "HTTP/1.1 {status} {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        if status < 400 { "OK" } else { "Error" },
        body.len()
    );
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(&body);
    let mut stream = stream;
    let _ = stream.write_all(text.as_bytes());
    let _ = stream.flush();
}

fn read(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        target,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

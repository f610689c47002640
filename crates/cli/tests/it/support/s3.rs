//! The local S3 server (moto, `scripts/s3-local`) the `s3://` archive tests write to, and a
//! client of it.

use std::sync::OnceLock;

/// The endpoint of a local S3-compatible server (moto, `scripts/s3-local`), started once for this
/// test binary; it stops when our end of its stdin pipe closes at exit.
pub fn s3_endpoint() -> &'static str {
    static ENDPOINT: OnceLock<String> = OnceLock::new();
    static SERVER: OnceLock<std::sync::Mutex<std::process::Child>> = OnceLock::new();
    ENDPOINT.get_or_init(|| {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let script =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/s3-local");
        let child = std::process::Command::new(script)
            .args(["serve", &port.to_string()])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("scripts/s3-local starts");
        let server = SERVER.get_or_init(|| std::sync::Mutex::new(child));
        let url = format!("http://127.0.0.1:{port}");
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = server.lock().unwrap().try_wait() {
                panic!("scripts/s3-local serve exited ({status}) before serving");
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(120),
                "the local S3 server did not start on {url}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        url
    })
}

/// A client of the local S3 server, with fixed credentials (moto takes any) whatever the test
/// runner's environment chose: no AWS_PROFILE of the developer's may be read here.
pub async fn s3() -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::config::Builder::new()
        .behavior_version(precise_ttl_archive::aws::behavior_version())
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .endpoint_url(s3_endpoint())
        .force_path_style(true)
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            "precise-ttl-local",
            "precise-ttl-local",
            None,
            None,
            "precise-ttl-local",
        ))
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// Creates the bucket `name` on the local S3 server and gives its name back.
pub async fn create_bucket(name: String) -> String {
    s3().await
        .create_bucket()
        .bucket(&name)
        .send()
        .await
        .expect("create bucket");
    name
}

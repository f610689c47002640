//! Every credential source the AWS CLI v2 reads, each against a local stand-in: a
//! `credential_process` script, web identity against moto's STS, container credentials and the
//! instance metadata service from small local HTTP servers ([`crate::stand_in`]), an SSO session
//! whose cached token has expired, with SSO's OIDC and portal endpoints on a local server.
//!
//! A source that works gets the command as far as DynamoDB Local answering (a table that does
//! not exist: "was not found"), which proves credentials were loaded; one that fails must give a
//! credentials error in one line and a hint, never "cannot reach". Every child gets its own
//! HOME and AWS_* variables (`precise_ttl()` clears the rest), and the instance metadata service
//! is disabled wherever it is not the subject: nothing reaches outside this machine.

use crate::stand_in::{Answer, Request, StandIn};
use crate::support::{precise_ttl, s3_endpoint};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A temporary HOME, removed when the test ends.
struct Home(PathBuf);

impl Home {
    fn new() -> Home {
        let path = std::env::temp_dir().join(format!(
            "precise-ttl-credentials-{:016x}",
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&path).unwrap();
        Home(path)
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.0.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn script(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.write(name, &format!("#!/bin/sh\n{body}\n"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The binary with this HOME, a region, no instance metadata, and the endpoint of the shared
/// DynamoDB Local (a loopback endpoint: fixed local credentials unless a source is chosen).
fn bare(home: &Home) -> assert_cmd::Command {
    let mut cmd = precise_ttl();
    cmd.env("HOME", &home.0)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .timeout(Duration::from_secs(60));
    cmd
}

/// `status` on a table that does not exist: DynamoDB Local's "not found" proves the call was
/// signed with credentials the chain loaded.
fn status(cmd: &mut assert_cmd::Command) -> &mut assert_cmd::Command {
    cmd.args([
        "status",
        "--table",
        &format!("precise-ttl-credentials-{:016x}", fastrand::u64(..)),
    ])
}

fn stderr_of(cmd: &mut assert_cmd::Command) -> String {
    let out = cmd.assert().code(1).get_output().stderr.clone();
    String::from_utf8_lossy(&out).into_owned()
}

/// Credentials were loaded: the request reached DynamoDB Local.
fn reached_dynamodb(cmd: &mut assert_cmd::Command) {
    let text = stderr_of(cmd);
    assert!(text.contains("was not found"), "{text}");
}

/// A credentials failure: one error line that says so, then a hint; never "cannot reach".
fn credentials_failure(cmd: &mut assert_cmd::Command) -> String {
    let text = stderr_of(cmd);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    assert_eq!(lines.len(), 2, "one error line and a hint: {text}");
    assert!(lines[0].starts_with("error: "), "{text}");
    assert!(lines[1].starts_with("hint: "), "{text}");
    assert!(!text.contains("cannot reach"), "{text}");
    assert!(
        lines[0].contains("AWS credentials") || lines[0].contains("SSO session"),
        "{text}"
    );
    text
}

fn calls(marker: &Path) -> usize {
    std::fs::read_to_string(marker).map_or(0, |t| t.lines().count())
}

#[test]
fn a_credential_process_profile_is_honoured_for_a_loopback_endpoint() {
    let home = Home::new();
    let marker = home.0.join("called");
    let script = home.script(
        "creds.sh",
        &format!(
            "echo called >> '{}'\necho '{{\"Version\": 1, \"AccessKeyId\": \"AKIDPROCESS\", \"SecretAccessKey\": \"secret\"}}'",
            marker.display()
        ),
    );
    home.write(
        ".aws/config",
        &format!(
            "[default]\ncredential_process = {0}\n\n[profile proc]\ncredential_process = {0}\nregion = us-east-1\n",
            script.display()
        ),
    );
    // No choice made: the loopback endpoint gets the fixed local credentials, even with a
    // default profile on the machine.
    reached_dynamodb(status(&mut bare(&home)));
    assert_eq!(calls(&marker), 0);
    // AWS_PROFILE is a choice.
    reached_dynamodb(status(bare(&home).env("AWS_PROFILE", "proc")));
    assert_eq!(calls(&marker), 1);
    // --profile beats keys in the environment, as in the AWS CLI...
    reached_dynamodb(status(
        bare(&home)
            .env("AWS_ACCESS_KEY_ID", "AKIDENVIRONMENT")
            .env("AWS_SECRET_ACCESS_KEY", "secret")
            .args(["--profile", "proc"]),
    ));
    assert_eq!(calls(&marker), 2);
    // ...and keys in the environment beat AWS_PROFILE.
    reached_dynamodb(status(
        bare(&home)
            .env("AWS_PROFILE", "proc")
            .env("AWS_ACCESS_KEY_ID", "AKIDENVIRONMENT")
            .env("AWS_SECRET_ACCESS_KEY", "secret"),
    ));
    assert_eq!(calls(&marker), 2);
}

#[test]
fn a_failing_credential_process_or_a_missing_profile_is_a_credentials_error() {
    let home = Home::new();
    let script = home.script("creds.sh", "echo 'corporate sign-in expired' >&2\nexit 1");
    home.write(
        ".aws/config",
        &format!(
            "[profile proc]\ncredential_process = {}\n",
            script.display()
        ),
    );
    let text = credentials_failure(status(bare(&home).args(["--profile", "proc"])));
    assert!(text.contains("corporate sign-in expired"), "{text}");
    let text = credentials_failure(status(bare(&home).args(["--profile", "nowhere"])));
    assert!(text.contains("nowhere"), "{text}");
    // AWS_PROFILE naming no profile is said as such, not as "no credentials found".
    let text = credentials_failure(status(bare(&home).env("AWS_PROFILE", "nowhere")));
    assert!(text.contains("nowhere"), "{text}");
}

#[test]
fn web_identity_is_exchanged_at_sts_for_a_loopback_endpoint() {
    let home = Home::new();
    let token = home.write(
        "token",
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ0ZXN0In0.c2lnbmF0dXJl",
    );
    let web_identity = |cmd: &mut assert_cmd::Command, sts: &str| {
        cmd.env("AWS_WEB_IDENTITY_TOKEN_FILE", &token)
            .env(
                "AWS_ROLE_ARN",
                "arn:aws:iam::123456789012:role/precise-ttl-test",
            )
            .env("AWS_ROLE_SESSION_NAME", "precise-ttl-test")
            .env("AWS_ENDPOINT_URL_STS", sts);
    };
    // moto's server speaks STS: AssumeRoleWithWebIdentity gives temporary credentials.
    let mut cmd = bare(&home);
    web_identity(&mut cmd, s3_endpoint());
    reached_dynamodb(status(&mut cmd));
    // An STS that refuses the token: a credentials error naming STS's reason.
    let refusing = StandIn::start(|_| {
        (
            400,
            vec![("Content-Type", "text/xml".into())],
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>No OpenIDConnect provider found in your account</Message></Error><RequestId>1</RequestId></ErrorResponse>".into(),
        )
    });
    let mut cmd = bare(&home);
    web_identity(&mut cmd, &refusing.url);
    let text = credentials_failure(status(&mut cmd));
    assert!(text.contains("InvalidIdentityToken"), "{text}");
    assert!(!refusing.seen().is_empty());
}

const CONTAINER_CREDENTIALS: &str = "{\"AccessKeyId\": \"ASIACONTAINER\", \"SecretAccessKey\": \"secret\", \"Token\": \"token\", \"Expiration\": \"2099-01-01T00:00:00Z\"}";

#[test]
fn container_credentials_with_and_without_an_authorization_token() {
    let home = Home::new();
    let server = StandIn::start(|_| (200, vec![], CONTAINER_CREDENTIALS.into()));
    let uri = format!("{}/v2/credentials/test", server.url);
    // ECS with a full URI and no token.
    reached_dynamodb(status(
        bare(&home).env("AWS_CONTAINER_CREDENTIALS_FULL_URI", &uri),
    ));
    let seen = server.seen();
    let first = &seen[0];
    assert_eq!(first.target, "/v2/credentials/test");
    assert_eq!(first.header("authorization"), None);
    // EKS Pod Identity: the token in a file, sent as the Authorization header.
    let token = home.write("eks-token", "pod-identity-token");
    reached_dynamodb(status(
        bare(&home)
            .env("AWS_CONTAINER_CREDENTIALS_FULL_URI", &uri)
            .env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &token),
    ));
    let last = server.seen().pop().unwrap();
    assert_eq!(last.header("authorization"), Some("pod-identity-token"));
}

#[test]
fn a_container_endpoint_that_refuses_is_a_credentials_error_and_run_exits() {
    let home = Home::new();
    let server = StandIn::start(|_| {
        (
            403,
            vec![("Content-Type", "application/json".into())],
            "{\"code\": \"AccessDenied\", \"message\": \"not this task\"}".into(),
        )
    });
    let uri = format!("{}/v2/credentials/test", server.url);
    credentials_failure(status(
        bare(&home).env("AWS_CONTAINER_CREDENTIALS_FULL_URI", &uri),
    ));
    // The daemon does not wait for credentials that will not come: its supervisor sees it.
    credentials_failure(
        bare(&home)
            .env("AWS_CONTAINER_CREDENTIALS_FULL_URI", &uri)
            .args(["run", "--table", "precise-ttl-credentials-run"]),
    );
}

/// An IMDSv2 stand-in: a session token from `PUT /latest/api/token`, then the role's name and
/// its credentials by GETs that must carry the token; `refuse`: 403 to the token, as an
/// instance whose metadata service is off answers.
fn metadata_service(refuse: bool) -> StandIn {
    StandIn::start(move |r: &Request| -> Answer {
        const TOKEN: &str = "imds-session-token";
        match (r.method.as_str(), r.target.as_str()) {
            ("PUT", "/latest/api/token") if refuse => (403, vec![], String::new()),
            ("PUT", "/latest/api/token") => (
                200,
                vec![("x-aws-ec2-metadata-token-ttl-seconds", "21600".into())],
                TOKEN.into(),
            ),
            _ if r.header("x-aws-ec2-metadata-token") != Some(TOKEN) => {
                (401, vec![], String::new())
            }
            ("GET", "/latest/meta-data/iam/security-credentials/") => {
                (200, vec![], "precise-ttl-role".into())
            }
            ("GET", "/latest/meta-data/iam/security-credentials/precise-ttl-role") => (
                200,
                vec![],
                "{\"Code\": \"Success\", \"LastUpdated\": \"2026-01-01T00:00:00Z\", \"Type\": \"AWS-HMAC\", \"AccessKeyId\": \"ASIAINSTANCE\", \"SecretAccessKey\": \"secret\", \"Token\": \"token\", \"Expiration\": \"2099-01-01T00:00:00Z\"}".into(),
            ),
            _ => (404, vec![], String::new()),
        }
    })
}

#[test]
fn instance_metadata_v2_gives_credentials_and_a_refusal_is_a_credentials_error() {
    let home = Home::new();
    let imds = metadata_service(false);
    reached_dynamodb(status(
        bare(&home)
            .env_remove("AWS_EC2_METADATA_DISABLED")
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", &imds.url),
    ));
    let seen = imds.seen();
    assert_eq!(seen[0].method, "PUT", "IMDSv2: the token first: {seen:?}");
    assert!(
        seen.iter().any(|r| r.target.ends_with("/precise-ttl-role")),
        "{seen:?}"
    );
    let refusing = metadata_service(true);
    let text = credentials_failure(status(
        bare(&home)
            .env_remove("AWS_EC2_METADATA_DISABLED")
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", &refusing.url),
    ));
    assert!(text.contains("IMDS"), "{text}");
}

/// The name aws-config hashes (SHA-1) to find the session's token in ~/.aws/sso/cache.
const SSO_SESSION: &str = "precise-ttl-test";
const SSO_SESSION_SHA1: &str = "e15c823cffd722ec1b3344d9876bfe41385e260d";

/// A HOME with an SSO profile `dev` whose cached token has expired but may be refreshed.
fn sso_home() -> Home {
    let home = Home::new();
    home.write(
        ".aws/config",
        &format!(
            "[profile dev]\nsso_session = {SSO_SESSION}\nsso_account_id = 111122223333\nsso_role_name = Reader\nregion = us-east-1\n\n[sso-session {SSO_SESSION}]\nsso_start_url = https://example.invalid/start\nsso_region = us-east-1\nsso_registration_scopes = sso:account:access\n"
        ),
    );
    home.write(
        &format!(".aws/sso/cache/{SSO_SESSION_SHA1}.json"),
        "{\"accessToken\": \"expired-token\", \"expiresAt\": \"2020-01-01T00:00:00Z\", \"refreshToken\": \"refresh-token\", \"clientId\": \"client\", \"clientSecret\": \"client-secret\", \"registrationExpiresAt\": \"2099-01-01T00:00:00Z\", \"region\": \"us-east-1\", \"startUrl\": \"https://example.invalid/start\"}",
    );
    home
}

/// SSO's OIDC (`POST /token`, the refresh) and portal (`GET /federation/credentials`) on one
/// local server; `refresh`: whether the refresh token is still good.
fn sso_endpoints(refresh: bool) -> StandIn {
    StandIn::start(move |r: &Request| -> Answer {
        let error = |status, kind: &str, message: &str| -> Answer {
            (
                status,
                vec![("x-amzn-errortype", kind.to_string())],
                format!("{{\"error\": \"{kind}\", \"message\": \"{message}\"}}"),
            )
        };
        match r.method.as_str() {
            "POST" if r.target == "/token" && refresh => (
                200,
                vec![("Content-Type", "application/json".into())],
                "{\"accessToken\": \"fresh-token\", \"expiresIn\": 3600, \"tokenType\": \"Bearer\", \"refreshToken\": \"refresh-token-2\"}".into(),
            ),
            "POST" => error(400, "InvalidGrantException", "the refresh token has expired"),
            "GET" if r.header("x-amz-sso_bearer_token") == Some("fresh-token") => (
                200,
                vec![("Content-Type", "application/json".into())],
                "{\"roleCredentials\": {\"accessKeyId\": \"ASIASSO\", \"secretAccessKey\": \"secret\", \"sessionToken\": \"token\", \"expiration\": 4070908800000}}".into(),
            ),
            _ => error(401, "UnauthorizedException", "Session token not found or invalid"),
        }
    })
}

fn with_sso(cmd: &mut assert_cmd::Command, endpoints: &StandIn) {
    cmd.env("AWS_ENDPOINT_URL_SSO_OIDC", &endpoints.url)
        .env("AWS_ENDPOINT_URL_SSO", &endpoints.url);
}

/// A home with the SSO profile `dev`, the stand-in SSO endpoints (`refreshable`: whether they
/// refresh its token) and a bare command pointed at them.
fn sso_command(refreshable: bool) -> (Home, StandIn, assert_cmd::Command) {
    let home = sso_home();
    let sso = sso_endpoints(refreshable);
    let mut cmd = bare(&home);
    with_sso(&mut cmd, &sso);
    (home, sso, cmd)
}

#[test]
fn an_sso_profile_refreshes_its_expired_token() {
    let (home, sso, mut cmd) = sso_command(true);
    reached_dynamodb(status(cmd.args(["--profile", "dev"])));
    let seen = sso.seen();
    assert!(seen[0].body.contains("refresh-token"), "{seen:?}");
    let cache = std::fs::read_to_string(
        home.0
            .join(format!(".aws/sso/cache/{SSO_SESSION_SHA1}.json")),
    )
    .unwrap();
    assert!(
        cache.contains("fresh-token"),
        "the refreshed token is saved: {cache}"
    );
}

#[test]
fn an_sso_session_that_cannot_be_refreshed_says_to_sign_in_again() {
    let (_home, sso, mut cmd) = sso_command(false);
    let text = credentials_failure(status(cmd.env("AWS_PROFILE", "dev")));
    assert!(text.contains("SSO session"), "{text}");
    assert!(text.contains("aws sso login --profile dev"), "{text}");
    assert!(
        sso.seen().iter().any(|r| r.target == "/token"),
        "a refresh was tried first"
    );
}

#[test]
fn run_for_counts_from_the_start_even_when_the_store_never_answers() {
    let home = Home::new();
    let started = Instant::now();
    let text = stderr_of(
        bare(&home)
            .env("PRECISE_TTL_ENDPOINT_URL", "http://127.0.0.1:1")
            .args(["run", "--table", "t", "--for", "3s"]),
    );
    let took = started.elapsed();
    assert!(text.contains("--for deadline passed"), "{text}");
    // The margin is for starting the process on a loaded machine, not for retries.
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(10),
        "{took:?}"
    );
}

#[test]
fn daemons_without_credentials_exit_non_zero() {
    let home = Home::new();
    for command in [&["run"][..], &["archive", "--to", "-"]] {
        let text = stderr_of(
            bare(&home)
                .env_remove("PRECISE_TTL_ENDPOINT_URL")
                .args(command)
                .args(["--table", "t"]),
        );
        assert!(
            text.contains("no AWS credentials found"),
            "{command:?}: {text}"
        );
    }
}

//! Building the SDK clients once, with explicit timeouts and no SDK-level retries.
//!
//! The engine retries with its own backoff and error classification, so the SDK's retries are
//! off: one retry policy, visible and tested, instead of two multiplying each other. Queries and
//! deletes get separate clients (and so separate connection pools), so a storm of deletes cannot
//! queue the index reads that find the next due items. Stalled-stream protection is off: every
//! body is a small JSON document bounded by the attempt timeout, and the protection's throughput
//! watch runs on every request (it showed in a `perf` profile of the daemon at 40 000 deletes/s).

use aws_config::{Region, SdkConfig};
use aws_sdk_dynamodb::config::{
    Credentials, StalledStreamProtectionConfig, retry::RetryConfig, timeout::TimeoutConfig,
};
use precise_ttl_engine::SystemClock;
use precise_ttl_engine::skew::ServiceClock;
use std::sync::Arc;
use std::time::Duration;

/// Where and how to connect. Anything left `None` comes from the standard AWS configuration
/// (`AWS_REGION`, `AWS_PROFILE`, `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL`, ...), through
/// the one chain every client uses ([`precise_ttl_archive::aws`]).
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub endpoint_url: Option<String>,
    pub region: Option<String>,
    /// A profile named explicitly: its credentials alone, as the AWS CLI's `--profile`.
    pub profile: Option<String>,
    pub connect_timeout: Duration,
    /// Upper bound for one HTTP attempt; a slow attempt becomes a retryable timeout.
    pub attempt_timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            endpoint_url: None,
            region: None,
            profile: None,
            connect_timeout: Duration::from_secs(3),
            attempt_timeout: Duration::from_secs(10),
        }
    }
}

/// The SDK clients precise-ttl uses, built once per process and cloned cheaply.
#[derive(Debug, Clone)]
pub struct Dynamo {
    /// Control-plane calls and index queries.
    pub query: aws_sdk_dynamodb::Client,
    /// Deletes and other item writes.
    pub write: aws_sdk_dynamodb::Client,
    /// The table's stream (used by the benchmark to watch deletions from outside).
    pub streams: aws_sdk_dynamodbstreams::Client,
    /// The endpoint in use, for messages (`None`: the region's AWS endpoint).
    pub endpoint: Option<String>,
    /// This host's clock held back by its lead over the store's, learnt from the `Date` header
    /// of every answer of `query` and `write`: the clock deletes must go by.
    pub store_clock: Arc<ServiceClock<SystemClock>>,
}

impl Dynamo {
    /// Loads the standard AWS configuration with our overrides. Fails only when no region can
    /// be found: every request would fail later with a less helpful message.
    pub async fn connect(options: &ConnectOptions) -> Result<Dynamo, crate::AdapterError> {
        let choice = precise_ttl_archive::aws::AwsChoice {
            endpoint_url: options.endpoint_url.clone(),
            region: options.region.clone(),
            profile: options.profile.clone(),
        };
        // DynamoDB Local checks no signature but keeps data per access key and region: on a
        // loopback endpoint with no credentials chosen, a fixed key lets every local command see
        // the same tables.
        let loader = precise_ttl_archive::aws::loader(&choice, local_credentials())
            .await
            .retry_config(RetryConfig::disabled())
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(options.connect_timeout)
                    .operation_attempt_timeout(options.attempt_timeout)
                    .build(),
            );
        let config = loader.load().await;
        if config.region().is_none() {
            return Err(crate::AdapterError::NoRegion);
        }
        Ok(Self::from_sdk_config(&config))
    }

    pub fn from_sdk_config(config: &SdkConfig) -> Dynamo {
        let endpoint = config.endpoint_url().map(str::to_string);
        let store_clock = Arc::new(ServiceClock::new(Arc::new(SystemClock)));
        let client = || {
            aws_sdk_dynamodb::Client::from_conf(
                aws_sdk_dynamodb::config::Builder::from(config)
                    .interceptor(crate::store_clock::DateHeader::new(store_clock.clone()))
                    .build(),
            )
        };
        Dynamo {
            query: client(),
            write: client(),
            streams: aws_sdk_dynamodbstreams::Client::new(config),
            endpoint,
            store_clock,
        }
    }

    /// Clients for a DynamoDB Local instance at `endpoint_url`, with the fixed local credentials.
    pub fn local(endpoint_url: &str) -> Dynamo {
        let config = SdkConfig::builder()
            .behavior_version(precise_ttl_archive::aws::behavior_version())
            .region(Region::new("us-east-1"))
            .endpoint_url(endpoint_url)
            .credentials_provider(aws_sdk_dynamodb::config::SharedCredentialsProvider::new(
                local_credentials(),
            ))
            .retry_config(RetryConfig::disabled())
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(3))
                    .operation_attempt_timeout(Duration::from_secs(10))
                    .build(),
            )
            .build();
        Self::from_sdk_config(&config)
    }

    /// A short description of where requests go, for error messages.
    pub fn describe_endpoint(&self) -> String {
        match &self.endpoint {
            Some(url) => url.clone(),
            None => {
                let region = self.query.config().region().map(|r| r.to_string());
                format!(
                    "DynamoDB in region {}",
                    region.as_deref().unwrap_or("(none set)")
                )
            }
        }
    }
}

fn local_credentials() -> Credentials {
    Credentials::new("local", "local", None, None, "precise-ttl-local")
}

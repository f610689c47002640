//! The AWS configuration every client of precise-ttl loads (DynamoDB, DynamoDB Streams, S3):
//! one credential chain and one rule for local endpoints, so no client finds credentials another
//! would not. It lives in this crate because it is the lowest one that talks to AWS; the
//! DynamoDB adapter depends on it.
//!
//! Credentials come from aws-config's default chain, in the AWS CLI v2's order: the environment
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), the profile `AWS_PROFILE`
//! names in `~/.aws/config` and `~/.aws/credentials` (static keys, role assumption, SSO,
//! `credential_process`, `aws login`), web identity (`AWS_WEB_IDENTITY_TOKEN_FILE` and
//! `AWS_ROLE_ARN`, as EKS's IRSA sets them), container credentials (ECS, and EKS Pod Identity
//! through `AWS_CONTAINER_CREDENTIALS_FULL_URI`), then the instance metadata service (IMDSv2).
//!
//! A profile named explicitly (`--profile`) is used alone, environment keys or not: the AWS CLI
//! does the same (an explicit profile negates its environment provider), and someone who names a
//! profile means that one.

use aws_config::meta::region::RegionProviderChain;
use aws_config::profile::{ProfileFileCredentialsProvider, ProfileFileRegionProvider};
use aws_config::provider_config::ProviderConfig;
use aws_config::{BehaviorVersion, ConfigLoader, Region};
use aws_sdk_s3::config::Credentials;

/// The SDK behaviour every client is built with.
pub fn behavior_version() -> BehaviorVersion {
    BehaviorVersion::v2026_01_12()
}

/// What a caller chose; `None` leaves it to the standard AWS configuration.
#[derive(Debug, Clone, Default)]
pub struct AwsChoice {
    pub endpoint_url: Option<String>,
    pub region: Option<String>,
    /// A profile named explicitly; `AWS_PROFILE` is read by the chain itself.
    pub profile: Option<String>,
}

/// Environment variables whose presence is a choice of credentials. On a loopback endpoint
/// (DynamoDB Local, an S3 stand-in) they are honoured; without any, the fixed local credentials
/// are used instead, which spares a developer's machine a hunt that ends at the instance
/// metadata service. The container and metadata variables are set by the platform or by hand,
/// never by accident, so they count as a choice too.
const CHOICE_VARIABLES: &[&str] = &[
    "AWS_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
];

/// Whether credentials were chosen, by `profile` or by the environment `var` reads.
pub fn credentials_chosen(profile: Option<&str>, var: impl Fn(&str) -> Option<String>) -> bool {
    profile.is_some_and(|p| !p.is_empty())
        || CHOICE_VARIABLES
            .iter()
            .any(|name| var(name).is_some_and(|v| !v.is_empty()))
}

/// Whether `url` names this machine (`localhost`, `127.x.y.z`, `[::1]`).
pub fn is_loopback(url: &str) -> bool {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let host = rest.split('/').next().unwrap_or("");
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    host == "localhost" || host.starts_with("127.") || host == "::1"
}

/// The standard AWS configuration with `choice` applied; `local` are the credentials a loopback
/// endpoint gets when no credentials were chosen (and `us-east-1` when no region was). Callers
/// add their timeouts and retry settings.
pub async fn loader(choice: &AwsChoice, local: Credentials) -> ConfigLoader {
    let mut loader = aws_config::defaults(behavior_version());
    if let Some(region) = &choice.region {
        loader = loader.region(Region::new(region.clone()));
    }
    let profile = choice.profile.as_deref().filter(|p| !p.is_empty());
    if let Some(profile) = profile {
        loader = loader
            .profile_name(profile)
            .credentials_provider(profile_credentials(profile, choice.region.as_deref()).await);
    }
    if let Some(url) = &choice.endpoint_url {
        loader = loader.endpoint_url(url.clone());
        let var = |name: &str| std::env::var(name).ok();
        if is_loopback(url) && !credentials_chosen(profile, var) {
            loader = loader.credentials_provider(local);
            if choice.region.is_none() && var("AWS_REGION").is_none() {
                loader = loader.region(Region::new("us-east-1"));
            }
        }
    }
    loader
}

/// The credentials of `profile` alone. Its providers (STS for a role, SSO) need a region before
/// the loader has resolved one: the caller's, else `AWS_REGION`, else the profile's own.
async fn profile_credentials(
    profile: &str,
    region: Option<&str>,
) -> ProfileFileCredentialsProvider {
    let region = RegionProviderChain::first_try(region.map(|r| Region::new(r.to_string())))
        .or_else(aws_config::environment::EnvironmentVariableRegionProvider::new())
        .or_else(
            ProfileFileRegionProvider::builder()
                .profile_name(profile)
                .build(),
        )
        .region()
        .await;
    let config = ProviderConfig::default()
        .with_region(region)
        .with_behavior_version(Some(behavior_version()));
    ProfileFileCredentialsProvider::builder()
        .configure(&config)
        .profile_name(profile)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_urls() {
        for u in [
            "http://localhost:8000",
            "http://127.0.0.1:1",
            "http://[::1]:8000/",
            "http://127.3.4.5",
        ] {
            assert!(is_loopback(u), "{u}");
        }
        for u in [
            "https://dynamodb.us-east-1.amazonaws.com",
            "http://10.0.0.1:8000",
            "http://localhost.example.com",
        ] {
            assert!(!is_loopback(u), "{u}");
        }
    }

    #[test]
    fn a_profile_or_a_credential_variable_is_a_choice() {
        let none = |_: &str| None;
        assert!(!credentials_chosen(None, none));
        assert!(!credentials_chosen(Some(""), none));
        assert!(credentials_chosen(Some("dev"), none));
        for name in CHOICE_VARIABLES {
            let one = |n: &str| (n == *name).then(|| "x".to_string());
            assert!(credentials_chosen(None, one), "{name}");
        }
        let empty = |n: &str| (n == "AWS_PROFILE").then(String::new);
        assert!(
            !credentials_chosen(None, empty),
            "an empty variable is no choice"
        );
        let region = |n: &str| (n == "AWS_REGION").then(|| "eu-west-1".to_string());
        assert!(
            !credentials_chosen(None, region),
            "a region is no credential"
        );
    }
}

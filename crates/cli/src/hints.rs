//! What to do about an error, in the words of this command line: the libraries say what went
//! wrong; the binary, which knows its flags, adds one line on how to fix it.

use precise_ttl_core::access::Denial;
use precise_ttl_dynamodb::AdapterError;

/// The hint for the first adapter error in `error`'s chain, if it has one. `profile`: the
/// --profile given, if any (else AWS_PROFILE's), for the commands a hint suggests.
pub fn for_error(error: &anyhow::Error, profile: Option<&str>) -> Option<String> {
    let adapter = error
        .chain()
        .find_map(|e| e.downcast_ref::<AdapterError>())?;
    Some(match adapter {
        AdapterError::TableNotFound { .. } => {
            "check --table, --region and --endpoint-url; `precise-ttl setup --create-table --partition-key NAME` creates a table".into()
        }
        AdapterError::LeaseTableMissing { .. } => {
            "run `precise-ttl setup` (it creates the lease table), pass --lease-table, or run without leases with --no-leases".into()
        }
        AdapterError::IndexMissing { table, .. } => {
            format!("run `precise-ttl setup --table {table}` first")
        }
        AdapterError::IndexSchema { .. } => {
            "pick another --index-name, or set --ttl-attribute and --shard-attribute to the index's keys".into()
        }
        AdapterError::IndexNotActive { .. } => {
            "wait for it: `precise-ttl setup` waits until the index is ACTIVE".into()
        }
        AdapterError::NativeTtlOnOtherAttribute { enabled, .. } => {
            format!("use --ttl-attribute {enabled}, or pass --no-native-ttl")
        }
        AdapterError::NativeTtlBusy { .. } => "retry later, or pass --no-native-ttl".into(),
        AdapterError::IndexCapacityRequired {
            suggested_read,
            suggested_write,
            ..
        } => format!(
            "pass --index-read-capacity {suggested_read} --index-write-capacity {suggested_write} (or figures of your own; docs/configuration.md#provisioned-tables); nothing was changed"
        ),
        AdapterError::IndexCapacityOnDemand { .. } => {
            "leave out --index-read-capacity and --index-write-capacity; nothing was changed".into()
        }
        AdapterError::TableKeyMismatch { .. } => {
            "leave out --create-table to use the table as it is, or pick another --table".into()
        }
        AdapterError::NoCredentials { .. } => {
            "pass --profile NAME (or set AWS_PROFILE), or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (docs/aws.md); for DynamoDB Local pass --endpoint-url http://localhost:8000".into()
        }
        AdapterError::SsoSession { .. } => {
            let profile = profile
                .map(str::to_string)
                .or_else(|| std::env::var("AWS_PROFILE").ok())
                .filter(|p| !p.is_empty());
            match profile {
                Some(p) => format!("SSO session expired: run `aws sso login --profile {p}`, then retry"),
                None => "SSO session expired: run `aws sso login` (with the profile's --profile), then retry".into(),
            }
        }
        AdapterError::Credentials { .. } => {
            "fix the credential source named above (docs/aws.md lists where credentials are looked for), or pick another with --profile".into()
        }
        AdapterError::NoRegion => {
            "pass --region (or PRECISE_TTL_REGION), set AWS_REGION, or give the profile a region"
                .into()
        }
        _ => return None,
    })
}

/// The refused IAM action in `error`'s chain: the adapter's [`AdapterError::PermissionDenied`],
/// or any message in AWS's access-denied format (a store call's error carries the service's
/// sentence as it came).
pub fn denial(error: &anyhow::Error) -> Option<Denial> {
    error
        .chain()
        .find_map(|e| match e.downcast_ref::<AdapterError>() {
            Some(AdapterError::PermissionDenied { denial, .. }) => Some(denial.clone()),
            _ => Denial::parse(&e.to_string()),
        })
}

/// The commands that have a policy in deploy/iam/, each holding exactly the actions it calls.
const WITH_POLICY: &[&str] = &[
    "archive", "backfill", "doctor", "run", "setup", "status", "sweep",
];

/// The commands with a policy of their own for the stream-queue layout (`archive` reads no
/// queue).
const WITH_QUEUE_POLICY: &[&str] = &["backfill", "doctor", "run", "setup", "status", "sweep"];

/// Which policy to fix for `denial` in `command` (the subcommand's name); `stream_queue`: the
/// command ran on the stream-queue layout, whose commands have policies of their own.
pub fn for_denial(denial: &Denial, command: &str, stream_queue: bool) -> String {
    let action = &denial.action;
    let policy = if denial.service() == "s3" {
        "deploy/iam/s3-archive-policy.json".to_string()
    } else if stream_queue && WITH_QUEUE_POLICY.contains(&command) {
        format!("deploy/iam/{command}-stream-queue-policy.json")
    } else if WITH_POLICY.contains(&command) {
        format!("deploy/iam/{command}-policy.json")
    } else {
        return format!("allow {action} to these credentials (docs/iam.md)");
    };
    if denial.is_explicit() {
        // An Allow cannot override a Deny: the fix is with whoever owns the denying policy.
        format!(
            "a Deny refuses {action}, which no Allow overrides: remove it there ({policy} lists what `precise-ttl {command}` needs)"
        )
    } else {
        format!(
            "allow {action}: {policy} holds every action `precise-ttl {command}` calls (docs/iam.md)"
        )
    }
}

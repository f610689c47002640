//! Which REMOVE records of a table's stream are expiries, so an archive keeps exactly those: a
//! native TTL delete (the record's `userIdentity` is the DynamoDB service), or an ordinary delete
//! — ours, or any TTL sweeper's — whose old image holds a TTL that native TTL would have counted
//! as due when the record was made (a Number, due, not more than five years old). Anything else
//! (an application deleting an item that had not expired, or had no TTL) is not an expiry.
//!
//! Stream records date themselves in whole seconds by default, so "due when made" allows the
//! record's resolution: a delete at 12.9 s of an item due at 12.5 s is recorded at 12 s.
//!
//! That resolution is not the same everywhere: DynamoDB dates records to the second, DynamoDB
//! Local to the minute. Classified at a resolution finer than the stream's, a sweeper's delete
//! looks early and is left out; coarser, an application's delete of an item due within the
//! resolution counts as an expiry. [`ResolutionRule`] decides it (`auto`), and [`left_out`] says
//! why a REMOVE is not an expiry, so that an archive can count and report what it leaves out.

use crate::duration::{DurationError, parse_duration};
use crate::expiry::{TtlValue, Verdict};
use crate::time::Timestamp;
use std::fmt;
use std::time::Duration;

/// The principal DynamoDB's own TTL deletes carry in stream records.
pub const NATIVE_TTL_PRINCIPAL: &str = "dynamodb.amazonaws.com";

/// What a stream REMOVE record says, without AWS types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal<'a> {
    /// `userIdentity.principalId` when `userIdentity.type` is `Service`.
    pub service_principal: Option<&'a str>,
    /// The old image's TTL attribute.
    pub old_ttl: TtlValue<'a>,
    /// `ApproximateCreationDateTime`.
    pub created_at: Timestamp,
    /// How finely `created_at` is given (1 s unless the stream was set to milliseconds).
    pub resolution: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalKind {
    /// Deleted by DynamoDB's TTL.
    NativeTtl,
    /// Deleted by someone else after its TTL: a TTL sweeper's expiry.
    Expired,
    /// Not an expiry.
    Other,
}

pub fn classify(r: &Removal<'_>) -> RemovalKind {
    judge(r).unwrap_or(RemovalKind::Other)
}

/// As [`classify`], with the reason when `r` is no expiry: `Ok` holds
/// [`RemovalKind::NativeTtl`] or [`RemovalKind::Expired`].
pub fn judge(r: &Removal<'_>) -> Result<RemovalKind, LeftOut> {
    if r.service_principal == Some(NATIVE_TTL_PRINCIPAL) {
        return Ok(RemovalKind::NativeTtl);
    }
    match left_out(r) {
        None => Ok(RemovalKind::Expired),
        Some(why) => Err(why),
    }
}

/// Why a REMOVE record is left out of an archive of expiries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeftOut {
    /// The old image has no TTL attribute.
    NoTtl,
    /// The TTL attribute is not a Number of epoch seconds.
    TtlNotANumber,
    /// The TTL was later than the record's time plus its resolution: deleted before it expired.
    NotDue,
    /// The TTL lies more than five years before the record: native TTL ignores such items.
    TooOld,
    /// The record carries no creation time to judge by (an adapter's finding, never
    /// [`left_out`]'s).
    NoRecordTime,
}

impl LeftOut {
    pub const ALL: [LeftOut; 5] = [
        LeftOut::NoTtl,
        LeftOut::TtlNotANumber,
        LeftOut::NotDue,
        LeftOut::TooOld,
        LeftOut::NoRecordTime,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            LeftOut::NoTtl => "no_ttl",
            LeftOut::TtlNotANumber => "ttl_not_a_number",
            LeftOut::NotDue => "not_due",
            LeftOut::TooOld => "too_old",
            LeftOut::NoRecordTime => "no_record_time",
        }
    }
}

impl fmt::Display for LeftOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LeftOut::NoTtl => "its old image has no TTL attribute",
            LeftOut::TtlNotANumber => "its TTL is not a Number of epoch seconds",
            LeftOut::NotDue => "its TTL was not due by its record's time plus the resolution",
            LeftOut::TooOld => "its TTL is more than five years older than its record",
            LeftOut::NoRecordTime => "it has no creation time",
        })
    }
}

/// Why `r` is not an expiry by its old image's TTL (`None`: it is one). The service principal
/// is not looked at: [`classify`] takes native TTL's deletes first.
pub fn left_out(r: &Removal<'_>) -> Option<LeftOut> {
    let latest = r.created_at.saturating_add(r.resolution);
    match Verdict::of(&r.old_ttl, latest) {
        Verdict::Due(_) => None,
        Verdict::NotYetDue(_) => Some(LeftOut::NotDue),
        Verdict::TooOld(_) => Some(LeftOut::TooOld),
        Verdict::NotANumber => Some(LeftOut::TtlNotANumber),
        Verdict::Missing => Some(LeftOut::NoTtl),
    }
}

const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);

/// `--record-time-resolution` (and the Lambda's `PRECISE_TTL_RECORD_TIME_RESOLUTION`): a fixed
/// resolution, or `auto` (the default), which [`ResolutionRule`] decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResolutionSetting {
    #[default]
    Auto,
    Fixed(Duration),
}

impl ResolutionSetting {
    /// `auto`, or a duration (`1s`, `1m`, `500ms`).
    pub fn parse(text: &str) -> Result<ResolutionSetting, DurationError> {
        if text.trim() == "auto" {
            return Ok(ResolutionSetting::Auto);
        }
        parse_duration(text).map(ResolutionSetting::Fixed)
    }
}

impl fmt::Display for ResolutionSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolutionSetting::Auto => f.write_str("auto"),
            ResolutionSetting::Fixed(d) => f.write_str(&short(*d)),
        }
    }
}

/// `1m`, `1s`, `250ms`: a resolution as the flag takes it.
fn short(d: Duration) -> String {
    let ms = d.as_millis();
    if ms > 0 && ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// What is known of a stream before any of its records is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamSource {
    /// DynamoDB Local: its ARNs name the region `ddblocal` (measured on 3.x), and it dates
    /// stream records to the minute (measured).
    DynamoDbLocal,
    /// DynamoDB itself (no endpoint override, or an `amazonaws.com` / `api.aws` host): records
    /// dated to the second, rounded down (AWS's documentation).
    Aws,
    /// Another endpoint (an emulator, a proxy): nothing known until records come.
    Unknown,
}

impl StreamSource {
    /// From the stream's ARN and the endpoint the clients were pointed at (`None`: AWS's own).
    /// The ARN goes first: a proxy in front of DynamoDB Local still serves DynamoDB Local's
    /// stream.
    pub fn of(stream_arn: &str, endpoint: Option<&str>) -> StreamSource {
        if stream_arn.split(':').nth(3) == Some("ddblocal") {
            return StreamSource::DynamoDbLocal;
        }
        match endpoint {
            None => StreamSource::Aws,
            Some(url) => {
                let host = host_of(url);
                let aws = [".amazonaws.com", ".amazonaws.com.cn", ".api.aws"]
                    .iter()
                    .any(|suffix| host.ends_with(suffix));
                if aws {
                    StreamSource::Aws
                } else {
                    StreamSource::Unknown
                }
            }
        }
    }
}

/// The host of `url`, lower case, without scheme, port or path.
fn host_of(url: &str) -> String {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    host.to_ascii_lowercase()
}

/// The resolution a stream's records are classified with.
///
/// It is decided for each batch of records before any record of the batch is classified: an
/// archive writes a batch's expiries and then checkpoints past the whole batch, so a REMOVE
/// classified at too fine a resolution would be gone for good by the time anything noticed.
///
/// `auto`: 1 m for DynamoDB Local's stream, 1 s for DynamoDB's. For a stream from any other
/// endpoint, the record times decide: 1 m while every record time seen (of any event, in this
/// batch and before it) is a whole minute, 1 s from the first that is not, for good. The
/// unknown case errs towards the coarser resolution: too fine loses a sweeper's deletes
/// silently, too coarse archives an application's delete of an item due within the minute,
/// which a reader can still see by its `lagMs` and TTL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolutionRule {
    setting: ResolutionSetting,
    source: StreamSource,
    /// A record time that is not a whole minute was seen.
    finer_than_minutes: bool,
}

impl ResolutionRule {
    pub fn new(setting: ResolutionSetting, source: StreamSource) -> ResolutionRule {
        ResolutionRule {
            setting,
            source,
            finer_than_minutes: false,
        }
    }

    /// The resolution for a batch whose records are dated `times` (every record of the batch).
    pub fn for_batch(&mut self, times: impl IntoIterator<Item = Timestamp>) -> Duration {
        if self.setting == ResolutionSetting::Auto && self.source == StreamSource::Unknown {
            self.finer_than_minutes |= times
                .into_iter()
                .any(|t| t.as_millis().rem_euclid(60_000) != 0);
        }
        self.current()
    }

    /// The resolution in force now.
    pub fn current(&self) -> Duration {
        match (self.setting, self.source) {
            (ResolutionSetting::Fixed(d), _) => d,
            (ResolutionSetting::Auto, StreamSource::DynamoDbLocal) => MINUTE,
            (ResolutionSetting::Auto, StreamSource::Aws) => SECOND,
            (ResolutionSetting::Auto, StreamSource::Unknown) if self.finer_than_minutes => SECOND,
            (ResolutionSetting::Auto, StreamSource::Unknown) => MINUTE,
        }
    }

    pub fn source(&self) -> StreamSource {
        self.source
    }

    /// The resolution in force and why, for a start line.
    pub fn describe(&self) -> String {
        let now = short(self.current());
        match (self.setting, self.source) {
            (ResolutionSetting::Fixed(_), _) => format!("{now} (as given)"),
            (ResolutionSetting::Auto, StreamSource::DynamoDbLocal) => {
                format!("{now} (auto: DynamoDB Local dates stream records to the minute)")
            }
            (ResolutionSetting::Auto, StreamSource::Aws) => {
                format!("{now} (auto: DynamoDB dates stream records to the second)")
            }
            (ResolutionSetting::Auto, StreamSource::Unknown) => format!(
                "{now} (auto, for an endpoint that is neither DynamoDB nor DynamoDB Local: 1m while every record time is a whole minute, 1s from the first that is not)"
            ),
        }
    }

    /// A warning for a given resolution finer than the stream's: DynamoDB Local's stream read
    /// at less than a minute leaves out deletes made within the minute after their TTL.
    pub fn mismatch(&self) -> Option<String> {
        match (self.setting, self.source) {
            (ResolutionSetting::Fixed(d), StreamSource::DynamoDbLocal) if d < MINUTE => {
                Some(format!(
                    "this is DynamoDB Local's stream, which dates records to the minute: at the given resolution of {}, a delete in the same minute as its item's TTL looks early and is left out (auto uses 1m here)",
                    short(d)
                ))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn removal<'a>(principal: Option<&'a str>, ttl: TtlValue<'a>, at_s: i64) -> Removal<'a> {
        Removal {
            service_principal: principal,
            old_ttl: ttl,
            created_at: Timestamp::from_secs(at_s),
            resolution: Duration::from_secs(1),
        }
    }

    #[test]
    fn native_deletes_are_native_whatever_the_image() {
        let r = removal(Some(NATIVE_TTL_PRINCIPAL), TtlValue::Missing, 1_800_000_000);
        assert_eq!(classify(&r), RemovalKind::NativeTtl);
    }

    #[test]
    fn an_ordinary_delete_is_an_expiry_only_if_native_ttl_would_have_deleted_the_item() {
        let at = 1_800_000_000;
        for (ttl, kind) in [
            // Due before the record.
            (TtlValue::Number("1799999990"), RemovalKind::Expired),
            // Due within the record's second (deleted at 12.9 s, recorded at 12 s).
            (TtlValue::Number("1800000000.5"), RemovalKind::Expired),
            // Not yet due: an application deleted it.
            (TtlValue::Number("1800000005"), RemovalKind::Other),
            // More than five years old: native TTL ignores it, so it is no expiry.
            (TtlValue::Number("1600000000"), RemovalKind::Other),
            (TtlValue::Other("S"), RemovalKind::Other),
            (TtlValue::Missing, RemovalKind::Other),
            (TtlValue::Number("soon"), RemovalKind::Other),
        ] {
            assert_eq!(classify(&removal(None, ttl.clone(), at)), kind, "{ttl:?}");
        }
        // Another service's principal is not native TTL.
        let r = removal(
            Some("other.amazonaws.com"),
            TtlValue::Number("1800000005"),
            at,
        );
        assert_eq!(classify(&r), RemovalKind::Other);
    }

    #[test]
    fn a_left_out_remove_says_why() {
        let at = 1_800_000_000;
        for (ttl, why) in [
            (TtlValue::Number("1799999990"), None),
            (TtlValue::Number("1800000005"), Some(LeftOut::NotDue)),
            (TtlValue::Number("1600000000"), Some(LeftOut::TooOld)),
            (TtlValue::Other("S"), Some(LeftOut::TtlNotANumber)),
            (TtlValue::Number("soon"), Some(LeftOut::TtlNotANumber)),
            (TtlValue::Missing, Some(LeftOut::NoTtl)),
        ] {
            assert_eq!(left_out(&removal(None, ttl.clone(), at)), why, "{ttl:?}");
        }
        let labels: std::collections::HashSet<_> = LeftOut::ALL.iter().map(|l| l.label()).collect();
        assert_eq!(labels.len(), LeftOut::ALL.len());
    }

    #[test]
    fn the_setting_is_auto_or_a_duration() {
        assert_eq!(
            ResolutionSetting::parse("auto"),
            Ok(ResolutionSetting::Auto)
        );
        assert_eq!(
            ResolutionSetting::parse("1m"),
            Ok(ResolutionSetting::Fixed(MINUTE))
        );
        assert!(ResolutionSetting::parse("automatic").is_err());
        assert_eq!(ResolutionSetting::default(), ResolutionSetting::Auto);
        assert_eq!(ResolutionSetting::Fixed(MINUTE).to_string(), "1m");
        assert_eq!(ResolutionSetting::Fixed(SECOND).to_string(), "1s");
        assert_eq!(
            ResolutionSetting::Fixed(Duration::from_millis(250)).to_string(),
            "250ms"
        );
    }

    const LOCAL_ARN: &str =
        "arn:aws:dynamodb:ddblocal:000000000000:table/t/stream/2026-11-27T10:11:56.729";
    const AWS_ARN: &str =
        "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/2026-11-27T10:11:56.729";

    #[test]
    fn the_source_is_known_by_the_arn_then_by_the_endpoint() {
        use StreamSource::*;
        for (arn, endpoint, source) in [
            (LOCAL_ARN, Some("http://127.0.0.1:8000"), DynamoDbLocal),
            // A proxy's address or a container's name in front of DynamoDB Local.
            (LOCAL_ARN, Some("http://dynamodb-local:8000"), DynamoDbLocal),
            (AWS_ARN, None, Aws),
            (
                AWS_ARN,
                Some("https://dynamodb.eu-west-1.amazonaws.com"),
                Aws,
            ),
            (
                AWS_ARN,
                Some("https://dynamodb-fips.us-east-1.amazonaws.com:443/"),
                Aws,
            ),
            (AWS_ARN, Some("https://dynamodb.eu-west-1.api.aws"), Aws),
            (AWS_ARN, Some("http://localhost:4566"), Unknown),
            (AWS_ARN, Some("http://amazonaws.com.evil.example"), Unknown),
        ] {
            assert_eq!(
                StreamSource::of(arn, endpoint),
                source,
                "{arn} {endpoint:?}"
            );
        }
    }

    fn minute(m: i64) -> Timestamp {
        Timestamp::from_secs(1_800_000_000 / 60 * 60 + m * 60)
    }

    #[test]
    fn auto_is_a_minute_for_dynamodb_local_and_a_second_for_dynamodb() {
        let mut local = ResolutionRule::new(ResolutionSetting::Auto, StreamSource::DynamoDbLocal);
        assert_eq!(local.for_batch([minute(0)]), MINUTE);
        // Even a time that is not a whole minute does not move it: the ARN is DynamoDB Local's.
        assert_eq!(
            local.for_batch([Timestamp::from_secs(1_800_000_001)]),
            MINUTE
        );
        let mut aws = ResolutionRule::new(ResolutionSetting::Auto, StreamSource::Aws);
        assert_eq!(aws.for_batch([minute(0), minute(1)]), SECOND);
        assert!(
            local.describe().starts_with("1m (auto"),
            "{}",
            local.describe()
        );
        assert!(aws.describe().starts_with("1s (auto"), "{}", aws.describe());
        assert_eq!(local.mismatch(), None);
    }

    #[test]
    fn auto_on_another_endpoint_is_a_minute_until_a_record_time_says_otherwise() {
        let mut rule = ResolutionRule::new(ResolutionSetting::Auto, StreamSource::Unknown);
        assert_eq!(rule.current(), MINUTE);
        assert_eq!(rule.for_batch([]), MINUTE);
        assert_eq!(rule.for_batch([minute(0), minute(3)]), MINUTE);
        // The batch that shows a finer time is classified at the finer resolution itself.
        let finer = Timestamp::from_millis(minute(4).as_millis() + 17_000);
        assert_eq!(rule.for_batch([minute(4), finer]), SECOND);
        // For good.
        assert_eq!(rule.for_batch([minute(5)]), SECOND);
        // Times before 1970 are judged alike.
        let mut old = ResolutionRule::new(ResolutionSetting::Auto, StreamSource::Unknown);
        assert_eq!(old.for_batch([Timestamp::from_secs(-60)]), MINUTE);
        assert_eq!(old.for_batch([Timestamp::from_secs(-61)]), SECOND);
    }

    #[test]
    fn a_given_resolution_wins_and_a_finer_one_on_dynamodb_local_is_warned_of() {
        let given = ResolutionSetting::Fixed(SECOND);
        let mut rule = ResolutionRule::new(given, StreamSource::DynamoDbLocal);
        assert_eq!(rule.for_batch([minute(0)]), SECOND);
        assert!(rule.mismatch().is_some_and(|w| w.contains("minute")));
        assert_eq!(rule.describe(), "1s (as given)");
        let mut unknown =
            ResolutionRule::new(ResolutionSetting::Fixed(MINUTE), StreamSource::Unknown);
        assert_eq!(
            unknown.for_batch([Timestamp::from_secs(1_800_000_001)]),
            MINUTE
        );
        assert_eq!(unknown.mismatch(), None);
    }

    #[test]
    fn our_on_time_delete_on_dynamodb_local_is_an_expiry_only_at_its_resolution() {
        // Deleted at 12:00:45.2 of an item due at 12:00:45, dated 12:00:00 by DynamoDB Local.
        let made = minute(0);
        let due = (made.as_millis() + 45_000) / 1000;
        let due = due.to_string();
        let mut r = Removal {
            service_principal: None,
            old_ttl: TtlValue::Number(&due),
            created_at: made,
            resolution: SECOND,
        };
        assert_eq!(left_out(&r), Some(LeftOut::NotDue));
        r.resolution =
            ResolutionRule::new(ResolutionSetting::Auto, StreamSource::DynamoDbLocal).current();
        assert_eq!(classify(&r), RemovalKind::Expired);
    }
}

//! `--archive` URLs: which sink, and where. Parsing only; nothing is opened here.

use crate::SinkError;
use std::path::PathBuf;

/// Where records go, parsed from `--archive`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkUrl {
    File(PathBuf),
    S3 { bucket: String, prefix: String },
    Stdout,
}

impl SinkUrl {
    pub fn parse(url: &str) -> Result<SinkUrl, SinkError> {
        let bad = |message: &str| SinkError::BadUrl {
            url: url.to_string(),
            message: message.to_string(),
        };
        if url == "-" {
            return Ok(SinkUrl::Stdout);
        }
        if let Some(dir) = url.strip_prefix("file://") {
            if dir.is_empty() {
                return Err(bad(
                    "file:// needs a folder, as file:///var/lib/precise-ttl/archive or file://archive",
                ));
            }
            return Ok(SinkUrl::File(PathBuf::from(dir)));
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if !valid_bucket(bucket) {
                return Err(bad(
                    "s3:// needs a bucket name (3-63 characters: a-z, 0-9, '.', '-'), as s3://my-bucket/expired/sessions",
                ));
            }
            let prefix = prefix.trim_matches('/');
            if prefix.contains("//") {
                return Err(bad("the key prefix has an empty part ('//')"));
            }
            return Ok(SinkUrl::S3 {
                bucket: bucket.to_string(),
                prefix: prefix.to_string(),
            });
        }
        Err(bad(
            "expected file://DIR, s3://BUCKET/PREFIX or - (standard output)",
        ))
    }

    /// The URL again, for messages.
    pub fn describe(&self) -> String {
        match self {
            SinkUrl::File(dir) => format!("file://{}", dir.display()),
            SinkUrl::S3 { bucket, prefix } if prefix.is_empty() => format!("s3://{bucket}"),
            SinkUrl::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
            SinkUrl::Stdout => "-".to_string(),
        }
    }
}

/// S3's bucket naming rules, enough to catch a typo before the first request does.
fn valid_bucket(name: &str) -> bool {
    (3..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_parsed_or_refused_with_the_reason() {
        assert_eq!(SinkUrl::parse("-").unwrap(), SinkUrl::Stdout);
        assert_eq!(
            SinkUrl::parse("file:///var/a").unwrap(),
            SinkUrl::File("/var/a".into())
        );
        assert_eq!(
            SinkUrl::parse("file://a").unwrap(),
            SinkUrl::File("a".into())
        );
        assert_eq!(
            SinkUrl::parse("s3://my-bucket/expired/sessions/").unwrap(),
            SinkUrl::S3 {
                bucket: "my-bucket".into(),
                prefix: "expired/sessions".into()
            }
        );
        assert_eq!(
            SinkUrl::parse("s3://my-bucket").unwrap(),
            SinkUrl::S3 {
                bucket: "my-bucket".into(),
                prefix: String::new()
            }
        );
        for bad in [
            "file://",
            "http://x",
            "archive",
            "s3://",
            "s3://My_Bucket/p",
            "s3://ab",
            "s3://b-ok/a//b",
        ] {
            assert!(SinkUrl::parse(bad).unwrap_err().to_string().contains(bad));
        }
    }

    #[test]
    fn a_parsed_url_describes_itself_as_given() {
        for url in ["-", "file:///var/a", "s3://bkt", "s3://bkt/a/b"] {
            assert_eq!(SinkUrl::parse(url).unwrap().describe(), url);
        }
    }
}

//! What an AWS "access denied" message says: who was refused, which IAM action, on which
//! resource, and why. Pure text parsing, so the adapter and the binary can name the missing
//! action in one line instead of echoing the service's sentence.
//!
//! AWS documents the format ("Troubleshoot access denied error messages", IAM User Guide,
//! <https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_access-denied.html>):
//! `User: USER is not authorized to perform: ACTION on resource: RESOURCE because no TYPE
//! policy allows the ACTION action` for an implicit deny, and `... with an explicit deny in a
//! TYPE policy[: POLICY-ARN]` for an explicit one. DynamoDB answers in that format, e.g.
//! `User: arn:aws:sts::123456789012:assumed-role/r/s is not authorized to perform:
//! dynamodb:Query on resource: arn:aws:dynamodb:us-east-1:123456789012:table/t/index/i
//! because no identity-based policy allows the dynamodb:Query action`. The same page says some
//! services use other wordings, so a message that does not parse is left as it is.

use std::fmt;

/// One refused request, as the service described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The caller's ARN (`arn:aws:sts::123:assumed-role/role/session`), when named.
    pub principal: Option<String>,
    /// The IAM action, `service:Action` (`dynamodb:Query`).
    pub action: String,
    /// The resource's ARN, when named.
    pub resource: Option<String>,
    /// Why, in the service's words (`because no identity-based policy allows the
    /// dynamodb:Query action`, `with an explicit deny in a service control policy`), when given.
    pub reason: Option<String>,
}

const PERFORM: &str = "is not authorized to perform:";
const ON_RESOURCE: &str = " on resource:";
const PRINCIPAL: &str = "User:";

impl Denial {
    /// The denial `message` describes, if it is in AWS's documented format.
    pub fn parse(message: &str) -> Option<Denial> {
        let at = message.find(PERFORM)?;
        let principal = message[..at]
            .rfind(PRINCIPAL)
            .map(|p| message[p + PRINCIPAL.len()..at].trim().to_string())
            .filter(|p| !p.is_empty());
        let rest = message[at + PERFORM.len()..].trim_start();
        let action_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let action = rest[..action_end].trim_end_matches(['.', ',', ';']);
        if !is_action(action) {
            return None;
        }
        let rest = &rest[action_end..];
        let (resource, rest) = match rest.strip_prefix(ON_RESOURCE) {
            Some(after) => {
                let after = after.trim_start();
                let end = after.find(char::is_whitespace).unwrap_or(after.len());
                let resource = after[..end].trim_end_matches(['.', ',', ';']);
                (
                    (!resource.is_empty()).then(|| resource.to_string()),
                    &after[end..],
                )
            }
            None => (None, rest),
        };
        let reason = rest.trim().trim_end_matches('.').trim();
        Some(Denial {
            principal,
            action: action.to_string(),
            resource,
            reason: (!reason.is_empty()).then(|| reason.to_string()),
        })
    }

    /// Whether a policy refuses the action outright: adding an Allow cannot fix that, only
    /// removing the Deny (in the policy type the reason names) can.
    pub fn is_explicit(&self) -> bool {
        self.reason
            .as_deref()
            .is_some_and(|r| r.contains("explicit deny"))
    }

    /// The service part of the action (`dynamodb`, `s3`).
    pub fn service(&self) -> &str {
        self.action.split(':').next().unwrap_or_default()
    }
}

/// `service:Action`: a lowercase service prefix, a colon, then letters (IAM action names).
fn is_action(s: &str) -> bool {
    let Some((service, name)) = s.split_once(':') else {
        return false;
    };
    !service.is_empty()
        && service
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric())
}

/// One line that leads with the action: `access denied: dynamodb:Query on ARN for PRINCIPAL,
/// because ...`.
impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "access denied: {}", self.action)?;
        if let Some(resource) = &self.resource {
            write!(f, " on {resource}")?;
        }
        if let Some(principal) = &self.principal {
            write!(f, " for {principal}")?;
        }
        if let Some(reason) = &self.reason {
            write!(f, ", {reason}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLE: &str = "arn:aws:sts::123456789012:assumed-role/precise-ttl/i-0abc";
    const INDEX: &str = "arn:aws:dynamodb:us-east-1:123456789012:table/orders/index/precise-ttl";

    #[test]
    fn an_implicit_deny_names_principal_action_resource_and_reason() {
        let message = format!(
            "User: {ROLE} is not authorized to perform: dynamodb:Query on resource: {INDEX} because no identity-based policy allows the dynamodb:Query action"
        );
        let d = Denial::parse(&message).unwrap();
        assert_eq!(d.principal.as_deref(), Some(ROLE));
        assert_eq!(d.action, "dynamodb:Query");
        assert_eq!(d.resource.as_deref(), Some(INDEX));
        assert_eq!(
            d.reason.as_deref(),
            Some("because no identity-based policy allows the dynamodb:Query action")
        );
        assert!(!d.is_explicit());
        assert_eq!(d.service(), "dynamodb");
        let line = d.to_string();
        assert!(
            line.starts_with("access denied: dynamodb:Query on arn:"),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn an_explicit_deny_with_a_policy_arn_is_explicit() {
        let message = format!(
            "User: {ROLE} is not authorized to perform: dynamodb:DeleteItem on resource: arn:aws:dynamodb:us-east-1:123456789012:table/orders with an explicit deny in a service control policy: arn:aws:organizations::1:policy/o-1/service_control_policy/p-1"
        );
        let d = Denial::parse(&message).unwrap();
        assert_eq!(d.action, "dynamodb:DeleteItem");
        assert!(d.is_explicit());
        assert!(d.reason.unwrap().ends_with("p-1"));
    }

    #[test]
    fn the_older_format_without_reason_or_resource_still_names_the_action() {
        let d = Denial::parse(&format!(
            "User: {ROLE} is not authorized to perform: dynamodb:PutItem on resource: arn:aws:dynamodb:eu-west-1:1:table/t"
        ))
        .unwrap();
        assert_eq!(d.action, "dynamodb:PutItem");
        assert_eq!(d.reason, None);
        let d = Denial::parse("is not authorized to perform: s3:PutObject.").unwrap();
        assert_eq!(
            (d.action.as_str(), d.principal, d.resource),
            ("s3:PutObject", None, None)
        );
    }

    #[test]
    fn other_wordings_are_left_alone() {
        for message in [
            "Access Denied",
            "",
            "User: x is not authorized to perform: on resource: y",
            "User: x is not authorized to perform: everything",
            "The security token included in the request is invalid.",
        ] {
            assert_eq!(Denial::parse(message), None, "{message}");
        }
    }
}

//! `network_allow` and `network_deny`: lists of `HOST` or `HOST:PORT`.
//!
//! - `HOST` is a name (`example.com`), an IPv4 address or an IPv6 address
//!   in brackets (`[2001:db8::1]:8443`; a bare IPv6 address without a port
//!   is accepted too).
//! - `*.example.org` matches every subdomain of `example.org` at any depth,
//!   not `example.org` itself (list both to allow both).
//! - Without a port, a rule means ports 80 and 443 (plain web).
//! - Names compare without case and without a trailing dot; addresses
//!   compare as addresses (`127.0.0.1` is `127.0.0.1`, however written).
//!
//! A deny rule beats an allow rule for the same host and port.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// Where a request goes: a host as the URL names it and a port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// Lower case, without brackets or a trailing dot.
    pub host: String,
    pub port: u16,
}

impl Target {
    pub fn new(host: &str, port: u16) -> Target {
        Target {
            host: normalise_host(host),
            port,
        }
    }

    /// The host as an address, when it is one (an IP literal).
    pub fn ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }

    /// As a `network_allow` entry would name it: without the port for 80
    /// and 443, which a bare host means.
    pub fn listed(&self) -> String {
        match (self.ip(), self.port) {
            (Some(IpAddr::V6(ip)), 80 | 443) => format!("[{ip}]"),
            (_, 80 | 443) => self.host.clone(),
            _ => self.to_string(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip() {
            Some(IpAddr::V6(_)) => write!(f, "[{}]:{}", self.host, self.port),
            _ => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// Which hosts a rule names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Name(String),
    Address(IpAddr),
    /// `*.SUFFIX`: strict subdomains of SUFFIX.
    Subdomains(String),
}

/// Which ports a rule names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ports {
    /// No port given: 80 and 443.
    Web,
    Exact(u16),
}

/// One entry of `network_allow` or `network_deny`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    host: HostPattern,
    ports: Ports,
}

impl HostRule {
    pub fn matches(&self, target: &Target) -> bool {
        let port_matches = match self.ports {
            Ports::Web => target.port == 80 || target.port == 443,
            Ports::Exact(port) => target.port == port,
        };
        port_matches && self.matches_host(target)
    }

    fn matches_host(&self, target: &Target) -> bool {
        match (&self.host, target.ip()) {
            (HostPattern::Address(rule), Some(ip)) => *rule == ip,
            (HostPattern::Name(name), None) => *name == target.host,
            (HostPattern::Subdomains(suffix), None) => target
                .host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| !head.is_empty()),
            (HostPattern::Address(_), None)
            | (HostPattern::Name(_), Some(_))
            | (HostPattern::Subdomains(_), Some(_)) => false,
        }
    }
}

/// Why the text of a rule is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not HOST or HOST:PORT: {why}")]
pub struct HostRuleError {
    /// The rule as written (trimmed).
    pub text: String,
    pub why: BadRule,
}

/// What is wrong with a rule's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadRule {
    #[error("an unclosed `[`")]
    UnclosedBracket,
    #[error("text after `]` that is not `:PORT`")]
    AfterBracket,
    #[error("the port must be a number from 1 to 65535")]
    Port,
    #[error("`*.` must be followed by a domain name")]
    Subdomains,
    #[error("a host is a name, `*.` and a name, or an IP address")]
    Host,
}

impl FromStr for HostRule {
    type Err = HostRuleError;

    fn from_str(text: &str) -> Result<HostRule, HostRuleError> {
        let text = text.trim();
        let bad = |why| {
            Err(HostRuleError {
                text: text.to_string(),
                why,
            })
        };
        let (host, port) = match split_port(text) {
            Ok(parts) => parts,
            Err(why) => return bad(why),
        };
        let ports = match port {
            None => Ports::Web,
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port > 0 => Ports::Exact(port),
                _ => return bad(BadRule::Port),
            },
        };
        let host = normalise_host(host);
        let pattern = if let Ok(ip) = host.parse::<IpAddr>() {
            HostPattern::Address(ip)
        } else if let Some(suffix) = host.strip_prefix("*.") {
            if !is_name(suffix) || suffix.parse::<IpAddr>().is_ok() {
                return bad(BadRule::Subdomains);
            }
            HostPattern::Subdomains(format!(".{suffix}"))
        } else if is_name(&host) {
            HostPattern::Name(host)
        } else {
            return bad(BadRule::Host);
        };
        Ok(HostRule {
            host: pattern,
            ports,
        })
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Name(name) => f.write_str(name)?,
            HostPattern::Address(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
            HostPattern::Address(ip) => write!(f, "{ip}")?,
            HostPattern::Subdomains(suffix) => write!(f, "*{suffix}")?,
        }
        match self.ports {
            Ports::Web => Ok(()),
            Ports::Exact(port) => write!(f, ":{port}"),
        }
    }
}

/// `HOST` and the optional `PORT` of a rule's text.
fn split_port(text: &str) -> Result<(&str, Option<&str>), BadRule> {
    if let Some(rest) = text.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(BadRule::UnclosedBracket);
        };
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err(BadRule::AfterBracket),
            },
        };
    }
    match text.matches(':').count() {
        0 => Ok((text, None)),
        // A bare IPv6 address: no port.
        2.. => Ok((text, None)),
        1 => Ok(text
            .split_once(':')
            .map_or((text, None), |(h, p)| (h, Some(p)))),
    }
}

fn normalise_host(host: &str) -> String {
    let host = host.trim().trim_start_matches('[').trim_end_matches(']');
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// A DNS name: dot-separated labels of letters, digits, `-` and `_`.
fn is_name(host: &str) -> bool {
    !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Whether a target is listed, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// In `network_deny` (whatever `network_allow` says).
    Denied,
    /// In `network_allow` and not denied.
    Allowed,
    /// In neither list: the approval policy decides.
    Unlisted,
}

/// The session's `network_allow` and `network_deny`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetRules {
    pub allow: Vec<HostRule>,
    pub deny: Vec<HostRule>,
}

impl NetRules {
    pub fn listing(&self, target: &Target) -> Listing {
        if self.deny.iter().any(|rule| rule.matches(target)) {
            Listing::Denied
        } else if self.allow.iter().any(|rule| rule.matches(target)) {
            Listing::Allowed
        } else {
            Listing::Unlisted
        }
    }
}

/// A list's text: rules separated by commas or white space.
pub fn parse_list(text: &str) -> Result<Vec<HostRule>, HostRuleError> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|part| !part.is_empty())
        .map(str::parse)
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn rule(text: &str) -> HostRule {
        text.parse().unwrap()
    }

    fn target(host: &str, port: u16) -> Target {
        Target::new(host, port)
    }

    #[test]
    fn a_bare_host_means_ports_80_and_443() {
        let example = rule("Example.COM.");
        assert!(example.matches(&target("example.com", 443)));
        assert!(example.matches(&target("EXAMPLE.com.", 80)));
        assert!(!example.matches(&target("example.com", 8080)));
        assert!(!example.matches(&target("www.example.com", 443)));
        let port = rule("example.com:8080");
        assert!(port.matches(&target("example.com", 8080)));
        assert!(!port.matches(&target("example.com", 443)));
    }

    #[test]
    fn a_wildcard_matches_subdomains_not_the_bare_domain() {
        let wildcard = rule("*.example.org");
        assert!(wildcard.matches(&target("docs.example.org", 443)));
        assert!(wildcard.matches(&target("a.b.example.org", 80)));
        assert!(!wildcard.matches(&target("example.org", 443)));
        assert!(!wildcard.matches(&target("badexample.org", 443)));
        assert!(!wildcard.matches(&target("example.org.evil.com", 443)));
    }

    #[test]
    fn addresses_compare_as_addresses() {
        assert!(rule("127.0.0.1:8080").matches(&target("127.0.0.1", 8080)));
        assert!(rule("[::1]:8080").matches(&target("[0:0::1]", 8080)));
        assert!(rule("::1").matches(&target("::1", 443)));
        assert!(!rule("127.0.0.1").matches(&target("localhost", 80)));
        assert!(!rule("localhost:80").matches(&target("127.0.0.1", 80)));
    }

    #[test]
    fn deny_beats_allow() {
        let rules = NetRules {
            allow: parse_list("*.example.org, example.com").unwrap(),
            deny: parse_list("secret.example.org").unwrap(),
        };
        assert_eq!(
            rules.listing(&target("docs.example.org", 443)),
            Listing::Allowed
        );
        assert_eq!(
            rules.listing(&target("secret.example.org", 443)),
            Listing::Denied
        );
        assert_eq!(
            rules.listing(&target("example.org", 443)),
            Listing::Unlisted
        );
    }

    #[test]
    fn malformed_rules_are_refused_with_the_text() {
        for text in [
            "",
            "example.com:0",
            "example.com:http",
            "example.com:70000",
            "*.",
            "*.1.2.3.4",
            "exa mple.com",
            "user@example.com",
            "example.com/path",
            "[::1",
            "[::1]8080",
            "*example.com",
        ] {
            assert!(text.parse::<HostRule>().is_err(), "{text:?} was accepted");
        }
        let err = "a/b".parse::<HostRule>().unwrap_err();
        assert_eq!(err.why, BadRule::Host);
        assert_eq!(
            err.to_string(),
            "`a/b` is not HOST or HOST:PORT: a host is a name, `*.` and a name, or an IP address"
        );
        let err = "[::1]8080".parse::<HostRule>().unwrap_err();
        assert_eq!(err.why, BadRule::AfterBracket);
    }

    #[test]
    fn rules_print_as_they_parse() {
        for text in [
            "example.com",
            "*.example.org:8443",
            "127.0.0.1:8080",
            "[::1]:9",
        ] {
            assert_eq!(rule(text).to_string(), text);
        }
    }

    proptest! {
        /// A wildcard never matches its bare domain and always matches a
        /// subdomain name, never an address that happens to end in it
        /// (`*.0.0.0` and `0.0.0.0`); deny wins over allow for any target.
        #[test]
        fn wildcards_and_deny_hold_for_any_name(
            labels in proptest::collection::vec("[a-z0-9]{1,8}", 1..4),
            sub in "[a-z0-9]{1,8}",
            port in 1u16..,
        ) {
            let domain = labels.join(".");
            let wildcard = rule(&format!("*.{domain}:{port}"));
            prop_assert!(!wildcard.matches(&target(&domain, port)));
            let subdomain = format!("{sub}.{domain}");
            let address = subdomain.parse::<std::net::IpAddr>().is_ok();
            prop_assert_eq!(wildcard.matches(&target(&subdomain, port)), !address);
            let both = NetRules {
                allow: vec![rule(&format!("{domain}:{port}"))],
                deny: vec![rule(&format!("{domain}:{port}"))],
            };
            prop_assert_eq!(both.listing(&target(&domain, port)), Listing::Denied);
        }
    }
}

//! Which git runs, asked once: write delegation's hardening needs a git
//! that honours `GIT_ATTR_SOURCE` (2.42 and later); an older one would
//! silently read the worktree's `.gitattributes`, so below it write
//! delegation is refused ([`required`]).

use std::path::Path;
use std::sync::OnceLock;

use super::Git;

/// A git version, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// The oldest git whose hardening write delegation relies on: attributes
/// read from a given tree (`GIT_ATTR_SOURCE`).
pub const MINIMUM: Version = Version(2, 42, 0);

/// Why git cannot serve write delegation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error(
        "git {found} is too old for write delegation: Fido needs git {MINIMUM} or later, whose GIT_ATTR_SOURCE keeps a write subagent's .gitattributes from choosing a filter the parent's git would run"
    )]
    TooOld { found: Version },
    #[error("cannot tell which git runs ({0}); write delegation needs git {MINIMUM} or later")]
    Unknown(String),
}

/// `git version 2.47.3` (and vendor suffixes such as
/// `2.39.3 (Apple Git-146)` or `2.45.0.windows.1`) as a version.
pub fn parse(output: &str) -> Option<Version> {
    let number = output.trim().strip_prefix("git version ")?;
    let number = number.split_whitespace().next()?;
    let mut parts = number.split('.').map(|part| {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    let major = parts.next()??;
    let minor = parts.next()??;
    let patch = parts.next().flatten().unwrap_or(0);
    Some(Version(major, minor, patch))
}

/// The version of the git on `PATH`, asked once per process.
pub fn installed() -> Result<Version, VersionError> {
    static FOUND: OnceLock<Result<Version, VersionError>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let out = Git::new(Path::new("/"))
                .with_timeout(std::time::Duration::from_secs(10))
                .line(["--version"])
                .map_err(|e| VersionError::Unknown(e.to_string()))?;
            parse(&out).ok_or_else(|| {
                VersionError::Unknown(format!(
                    "`git --version` said {:?}",
                    crate::text::summary(&out, 80)
                ))
            })
        })
        .clone()
}

/// `Ok` when the installed git has what write delegation's hardening
/// needs, else why not, naming the version found and the one needed.
pub fn required() -> Result<Version, VersionError> {
    check(installed()?)
}

/// `found`, if it is at least [`MINIMUM`].
pub fn check(found: Version) -> Result<Version, VersionError> {
    if found < MINIMUM {
        return Err(VersionError::TooOld { found });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_git_prints() {
        assert_eq!(parse("git version 2.47.3\n"), Some(Version(2, 47, 3)));
        assert_eq!(
            parse("git version 2.39.3 (Apple Git-146)"),
            Some(Version(2, 39, 3))
        );
        assert_eq!(
            parse("git version 2.45.0.windows.1"),
            Some(Version(2, 45, 0))
        );
        assert_eq!(parse("git version 2.42"), Some(Version(2, 42, 0)));
        assert_eq!(parse("git version 2.43.0-rc1"), Some(Version(2, 43, 0)));
        assert_eq!(parse("hub version 2.14"), None);
        assert_eq!(parse("git version x.y"), None);
    }

    #[test]
    fn below_the_minimum_is_refused_naming_both_versions() {
        assert!(check(Version(2, 42, 0)).is_ok());
        assert!(check(Version(3, 0, 0)).is_ok());
        let err = check(Version(2, 41, 9)).unwrap_err().to_string();
        assert!(err.contains("git 2.41.9 is too old"), "{err}");
        assert!(err.contains("git 2.42.0 or later"), "{err}");
        // The git of this machine is asked once, and answers.
        assert!(installed().is_ok());
    }
}

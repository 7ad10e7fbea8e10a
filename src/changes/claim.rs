//! A write delegation's claim (`scope.paths`): the workspace-relative files
//! and folders its change set may touch, and the registry that keeps two
//! live write subagents off the same paths.

use std::sync::{Arc, Mutex, PoisonError};

/// Normalised claim paths: relative, `/`-separated, no `.`/`..`
/// components, no trailing `/`; `""` is the whole workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    paths: Vec<String>,
}

/// Why `scope.paths` is not a claim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error(
        "a write delegation needs scope.paths: the workspace-relative files and folders it may change"
    )]
    Empty,
    #[error("claim path {0:?} must be relative to the workspace, without `..`")]
    Outside(String),
    #[error(
        "claim path {0:?} names Fido's state or the repository's .git, which no subagent may change"
    )]
    Reserved(String),
}

impl Claim {
    pub fn parse(paths: &[String]) -> Result<Claim, ClaimError> {
        let mut normal = Vec::new();
        for raw in paths {
            let path = normalise(raw)?;
            if !normal.contains(&path) {
                normal.push(path);
            }
        }
        if normal.is_empty() {
            return Err(ClaimError::Empty);
        }
        Ok(Claim { paths: normal })
    }

    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// Whether the workspace path `path` lies inside the claim.
    pub fn covers(&self, path: &str) -> bool {
        self.paths.iter().any(|claimed| within(path, claimed))
    }

    /// The claimed paths that overlap `other`'s.
    pub fn overlap(&self, other: &Claim) -> Vec<String> {
        self.paths
            .iter()
            .filter(|a| other.paths.iter().any(|b| within(a, b) || within(b, a)))
            .cloned()
            .collect()
    }

    /// The conflict with `held`, a live claim of the subagent `other`, when
    /// the two overlap (the whole workspace named `.`).
    pub fn conflict_with(&self, other: String, held: &Claim) -> Option<ClaimConflict> {
        let paths = self.overlap(held);
        (!paths.is_empty()).then(|| ClaimConflict {
            other,
            paths: paths
                .into_iter()
                .map(|p| if p.is_empty() { ".".into() } else { p })
                .collect(),
        })
    }

    /// For messages: `src/a.rs, docs/` (the whole workspace is `.`).
    pub fn display(&self) -> String {
        self.paths
            .iter()
            .map(|p| if p.is_empty() { "." } else { p.as_str() })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `path` equals `folder` or lies below it (`""` holds everything).
fn within(path: &str, folder: &str) -> bool {
    folder.is_empty()
        || path == folder
        || (path.starts_with(folder) && path.as_bytes().get(folder.len()) == Some(&b'/'))
}

fn normalise(raw: &str) -> Result<String, ClaimError> {
    let outside = || ClaimError::Outside(raw.to_string());
    if raw.starts_with('/') || raw.contains('\0') {
        return Err(outside());
    }
    let mut parts = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(outside()),
            part => parts.push(part),
        }
    }
    if parts
        .first()
        .is_some_and(|first| *first == ".git" || first.starts_with(crate::workspace::STATE_PREFIX))
        || parts.contains(&".git")
    {
        return Err(ClaimError::Reserved(raw.to_string()));
    }
    Ok(parts.join("/"))
}

/// The claims of the live write subagents of one session.
#[derive(Debug, Clone, Default)]
pub struct Claims {
    live: Arc<Mutex<Vec<(String, Claim)>>>,
}

/// A claim refused because a live write subagent holds part of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{other} is writing {}, which overlaps this claim; wait for it to finish (its change set is then pending review), or claim other paths",
    paths.join(", ")
)]
pub struct ClaimConflict {
    pub other: String,
    pub paths: Vec<String>,
}

/// A held claim; dropping it releases the paths.
#[derive(Debug)]
pub struct HeldClaim {
    claims: Claims,
    agent_id: String,
}

impl Claims {
    /// Holds `claim` for `agent_id`, unless a live one overlaps it.
    pub fn hold(&self, agent_id: &str, claim: &Claim) -> Result<HeldClaim, ClaimConflict> {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        for (other, held) in live.iter() {
            if let Some(conflict) = claim.conflict_with(other.clone(), held) {
                return Err(conflict);
            }
        }
        live.push((agent_id.to_string(), claim.clone()));
        Ok(HeldClaim {
            claims: self.clone(),
            agent_id: agent_id.to_string(),
        })
    }
}

impl Drop for HeldClaim {
    fn drop(&mut self) {
        let mut live = self
            .claims
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        live.retain(|(id, _)| id != &self.agent_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(paths: &[&str]) -> Claim {
        Claim::parse(&paths.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn claims_are_normalised_and_confined() {
        assert_eq!(
            claim(&["./src//a.rs", "docs/"]).paths(),
            ["src/a.rs", "docs"]
        );
        assert_eq!(claim(&["."]).display(), ".");
        let err = |p: &str| Claim::parse(&[p.to_string()]).unwrap_err();
        assert!(matches!(err("/etc/passwd"), ClaimError::Outside(_)));
        assert!(matches!(err("src/../../x"), ClaimError::Outside(_)));
        assert!(matches!(err(".git/config"), ClaimError::Reserved(_)));
        assert!(matches!(err("sub/.git"), ClaimError::Reserved(_)));
        assert!(matches!(err(".fido-state/x"), ClaimError::Reserved(_)));
        assert_eq!(Claim::parse(&[]).unwrap_err(), ClaimError::Empty);
    }

    #[test]
    fn coverage_follows_path_components() {
        let c = claim(&["src/a", "README.md"]);
        assert!(c.covers("src/a"));
        assert!(c.covers("src/a/b.rs"));
        assert!(!c.covers("src/ab.rs"));
        assert!(c.covers("README.md"));
        assert!(!c.covers("README.md.orig"));
        assert!(claim(&["."]).covers("anything/at/all"));
    }

    #[test]
    fn overlapping_claims_cannot_both_be_held() {
        let claims = Claims::default();
        let first = claims.hold("a", &claim(&["src"])).unwrap();
        let refused = claims.hold("b", &claim(&["docs", "src/x.rs"])).unwrap_err();
        assert_eq!(refused.other, "a");
        assert_eq!(refused.paths, ["src/x.rs"]);
        assert!(refused.to_string().contains("a is writing src/x.rs"));
        let disjoint = claims.hold("c", &claim(&["docs"])).unwrap();
        drop(first);
        let after = claims.hold("b", &claim(&["src/x.rs"])).unwrap();
        assert!(claims.hold("d", &claim(&["."])).is_err());
        drop((disjoint, after));
        assert!(claims.hold("d", &claim(&["."])).is_ok());
    }
}

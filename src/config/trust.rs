//! Workspace trust: the folders whose `fido.toml` is read in full.
//!
//! A cloned repository is untrusted input: its `fido.toml` could point the
//! provider at a host of its choosing (and so receive the user's key) or
//! weaken the sandbox. Until the user runs `fido trust DIR`, only the keys
//! that can do neither are read from it (see `config::keys::KEYS`).
//!
//! The record is `trust.json` in the user's config directory
//! (`$XDG_CONFIG_HOME/fido`, else `~/.config/fido`): `{"trusted": [PATH…]}`
//! with canonical paths, written atomically. Trust is per folder, exactly:
//! a subfolder is a different workspace with a different `fido.toml`. The
//! sandbox keeps this file unreadable for commands, so a command cannot
//! learn which folders are trusted, and cannot write it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::store::atomic::write_atomic;

/// The file name of the record, inside the config directory.
pub const TRUST_FILE: &str = "trust.json";

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("no config directory: set HOME or XDG_CONFIG_HOME")]
    NoConfigDir,
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid trust record ({message}); fix or delete it")]
    Corrupt { path: String, message: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Folder {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    trusted: Vec<PathBuf>,
}

/// The trust record of one user.
#[derive(Debug, Clone)]
pub struct TrustStore {
    file: PathBuf,
}

impl TrustStore {
    /// The store in `config_dir`.
    pub fn in_dir(config_dir: &Path) -> TrustStore {
        TrustStore {
            file: config_dir.join(TRUST_FILE),
        }
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Whether `workspace` (canonical) is trusted. A missing record trusts
    /// nothing; a corrupt one is an error, never "trusted".
    pub fn is_trusted(&self, workspace: &Path) -> Result<bool, TrustError> {
        Ok(self.load()?.trusted.iter().any(|p| p == workspace))
    }

    /// Records `folder` as trusted; returns its canonical path.
    pub fn trust(&self, folder: &Path) -> Result<PathBuf, TrustError> {
        let canonical = canonical_folder(folder)?;
        let mut record = self.load()?;
        if !record.trusted.contains(&canonical) {
            record.trusted.push(canonical.clone());
            record.trusted.sort();
            self.save(&record)?;
        }
        Ok(canonical)
    }

    /// Removes `folder` from the record; returns its canonical path and
    /// whether it was there.
    pub fn revoke(&self, folder: &Path) -> Result<(PathBuf, bool), TrustError> {
        // A folder that is gone can still be revoked by the path recorded.
        let canonical = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
        let mut record = self.load()?;
        let before = record.trusted.len();
        record.trusted.retain(|p| p != &canonical);
        let removed = record.trusted.len() != before;
        if removed {
            self.save(&record)?;
        }
        Ok((canonical, removed))
    }

    fn load(&self) -> Result<Record, TrustError> {
        let shown = self.file.display().to_string();
        let bytes = match std::fs::read(&self.file) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Record::default());
            }
            Err(source) => {
                return Err(TrustError::Read {
                    path: shown,
                    source,
                });
            }
        };
        serde_json::from_slice(&bytes).map_err(|err| TrustError::Corrupt {
            path: shown,
            message: err.to_string(),
        })
    }

    fn save(&self, record: &Record) -> Result<(), TrustError> {
        let shown = self.file.display().to_string();
        let write = |source| TrustError::Write {
            path: shown.clone(),
            source,
        };
        if let Some(dir) = self.file.parent() {
            std::fs::create_dir_all(dir).map_err(write)?;
        }
        let mut bytes = serde_json::to_vec_pretty(record)
            .map_err(|err| write(std::io::Error::other(err.to_string())))?;
        bytes.push(b'\n');
        write_atomic(&self.file, &bytes, Some(0o600)).map_err(write)
    }
}

fn canonical_folder(folder: &Path) -> Result<PathBuf, TrustError> {
    let shown = folder.display().to_string();
    let canonical = std::fs::canonicalize(folder).map_err(|source| TrustError::Folder {
        path: shown.clone(),
        source,
    })?;
    if !canonical.is_dir() {
        return Err(TrustError::Folder {
            path: shown,
            source: std::io::Error::other("not a directory"),
        });
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_and_revoke_round_trip_by_canonical_path() {
        let config = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let store = TrustStore::in_dir(&config.path().join("fido"));
        let canonical = std::fs::canonicalize(ws.path()).unwrap();
        assert!(!store.is_trusted(&canonical).unwrap());

        // A non-canonical spelling of the same folder.
        let spelled = ws.path().join(".");
        assert_eq!(store.trust(&spelled).unwrap(), canonical);
        assert!(store.is_trusted(&canonical).unwrap());
        store.trust(ws.path()).unwrap();
        let text = std::fs::read_to_string(store.file()).unwrap();
        assert_eq!(text.matches(&*canonical.to_string_lossy()).count(), 1);

        let sub = canonical.join("sub");
        std::fs::create_dir(&sub).unwrap();
        assert!(!store.is_trusted(&sub).unwrap(), "trust is per folder");

        assert_eq!(store.revoke(ws.path()).unwrap(), (canonical.clone(), true));
        assert!(!store.is_trusted(&canonical).unwrap());
        assert!(!store.revoke(ws.path()).unwrap().1);
    }

    #[test]
    fn a_corrupt_record_is_an_error_not_trust() {
        let config = tempfile::tempdir().unwrap();
        let store = TrustStore::in_dir(config.path());
        std::fs::write(store.file(), b"{not json").unwrap();
        let err = store.is_trusted(Path::new("/")).unwrap_err();
        assert!(matches!(err, TrustError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("fix or delete it"));
    }

    #[test]
    fn trusting_a_missing_folder_is_refused() {
        let config = tempfile::tempdir().unwrap();
        let store = TrustStore::in_dir(config.path());
        let err = store.trust(Path::new("/no/such/folder")).unwrap_err();
        assert!(err.to_string().contains("/no/such/folder"), "{err}");
        assert!(!store.file().exists());
    }
}

//! Workspace trust: the folders whose `fido.toml` is read in full, and
//! what they said when they were trusted.
//!
//! A cloned repository is untrusted input: its `fido.toml` could point the
//! provider at a host of its choosing (and so receive the user's key),
//! weaken the sandbox or run hooks. Until the user runs `fido trust DIR`,
//! only the keys that can do none of that are read from it (see
//! `config::keys::KEYS`), and `.fido/` not at all.
//!
//! Trust follows content: `fido trust` records the folder with the
//! [`Fingerprint`] of its `fido.toml` and `.fido/` (every part that can run
//! a program or loosen the sandbox). When any of those parts changes (a
//! command or an applied change set can edit them), the folder is
//! untrusted again until `fido trust` is run again ([`Trust::Changed`]).
//!
//! The record is `trust.json` in the user's config directory
//! (`$XDG_CONFIG_HOME/fido`, else `~/.config/fido`), written atomically:
//! `{"trusted": [], "workspaces": [{"path": PATH, "fingerprint": {PART:
//! SHA256}}]}` with canonical paths. `trusted` is where an older Fido
//! recorded folders by path alone; such an entry no longer trusts anything
//! ([`Trust::Legacy`]: what the folder says now was never reviewed), and an
//! older Fido reading this record trusts nothing new. Trust is per folder,
//! exactly: a subfolder is a different workspace with a different
//! `fido.toml`. The sandbox keeps this file unreadable for commands, so a
//! command cannot learn which folders are trusted, and cannot write it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::fingerprint::Fingerprint;
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
    #[error("cannot trust {path}: {message}; fix it first")]
    Unreadable { path: String, message: String },
    #[error("{path}: {source}")]
    Folder {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    /// Folders an older Fido trusted by path alone (always written, so an
    /// older Fido still reads the record).
    #[serde(default)]
    trusted: Vec<PathBuf>,
    /// Folders trusted with what they said then, sorted by path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    workspaces: Vec<TrustedWorkspace>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct TrustedWorkspace {
    path: PathBuf,
    fingerprint: Fingerprint,
}

/// Whether a workspace is trusted as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Trusted, and every sensitive part is as it was then.
    Trusted,
    /// Never trusted, or trust was revoked.
    Untrusted,
    /// Trusted once, but these parts changed since (see
    /// [`Fingerprint::changes`]): untrusted until trusted again.
    Changed(Vec<String>),
    /// Trusted by an older Fido, which recorded the path and not what it
    /// trusted: untrusted until trusted again.
    Legacy,
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

    /// Whether `workspace` (canonical), whose sensitive parts are `now`,
    /// is trusted. A missing record trusts nothing; a corrupt one is an
    /// error, never "trusted".
    pub fn trust_of(&self, workspace: &Path, now: &Fingerprint) -> Result<Trust, TrustError> {
        let record = self.load()?;
        let entry = record.workspaces.iter().find(|w| w.path == workspace);
        Ok(match entry {
            Some(trusted) if trusted.fingerprint == *now => Trust::Trusted,
            Some(trusted) => Trust::Changed(trusted.fingerprint.changes(now)),
            None if record.trusted.iter().any(|p| p == workspace) => Trust::Legacy,
            None => Trust::Untrusted,
        })
    }

    /// Whether `workspace` (canonical) is trusted as it is on disk now.
    pub fn is_trusted(&self, workspace: &Path) -> Result<bool, TrustError> {
        let now = Fingerprint::read(workspace).map_err(|err| unreadable(workspace, &err))?;
        Ok(self.trust_of(workspace, &now)? == Trust::Trusted)
    }

    /// Records `folder` as trusted with what it says now; returns its
    /// canonical path.
    pub fn trust(&self, folder: &Path) -> Result<PathBuf, TrustError> {
        self.trust_recording(folder).map(|(path, _)| path)
    }

    /// Records `folder` as trusted with what it says now; returns its
    /// canonical path and the fingerprint recorded. Refused when its
    /// `fido.toml` does not read: what it says cannot be recorded.
    pub fn trust_recording(&self, folder: &Path) -> Result<(PathBuf, Fingerprint), TrustError> {
        let canonical = canonical_folder(folder)?;
        let fingerprint =
            Fingerprint::read(&canonical).map_err(|err| unreadable(&canonical, &err))?;
        let mut record = self.load()?;
        record.trusted.retain(|p| p != &canonical);
        record.workspaces.retain(|w| w.path != canonical);
        record.workspaces.push(TrustedWorkspace {
            path: canonical.clone(),
            fingerprint: fingerprint.clone(),
        });
        record.workspaces.sort_by(|a, b| a.path.cmp(&b.path));
        self.save(&record)?;
        Ok((canonical, fingerprint))
    }

    /// Removes `folder` from the record; returns its canonical path and
    /// whether it was there.
    pub fn revoke(&self, folder: &Path) -> Result<(PathBuf, bool), TrustError> {
        // A folder that is gone can still be revoked by the path recorded.
        let canonical = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
        let mut record = self.load()?;
        let before = record.trusted.len() + record.workspaces.len();
        record.trusted.retain(|p| p != &canonical);
        record.workspaces.retain(|w| w.path != canonical);
        let removed = record.trusted.len() + record.workspaces.len() != before;
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

fn unreadable(workspace: &Path, err: &super::ConfigError) -> TrustError {
    TrustError::Unreadable {
        path: workspace.display().to_string(),
        message: err.to_string(),
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
    fn a_change_of_a_sensitive_part_untrusts_until_trusted_again() {
        let config = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        let file = root.join("fido.toml");
        std::fs::write(&file, "model = \"a\"\nsandbox_mode = \"read-only\"\n").unwrap();
        let store = TrustStore::in_dir(config.path());
        let (_, recorded) = store.trust_recording(&root).unwrap();
        assert_eq!(recorded.names(), ["fido.toml", "sandbox_mode"]);
        let now = || Fingerprint::read(&root).unwrap();
        assert_eq!(store.trust_of(&root, &now()).unwrap(), Trust::Trusted);

        // A key an untrusted file may set anyway keeps trust.
        std::fs::write(&file, "model = \"b\"\nsandbox_mode = \"read-only\"\n").unwrap();
        assert_eq!(store.trust_of(&root, &now()).unwrap(), Trust::Trusted);
        std::fs::write(
            &file,
            "model = \"b\"\nsandbox_mode = \"danger-full-access\"\n",
        )
        .unwrap();
        assert_eq!(
            store.trust_of(&root, &now()).unwrap(),
            Trust::Changed(vec!["sandbox_mode (changed)".into()])
        );
        assert!(!store.is_trusted(&root).unwrap());
        store.trust(&root).unwrap();
        assert!(store.is_trusted(&root).unwrap());
        // Removing the file is a change as well: it is no longer what was
        // reviewed, and one that appears later must be reviewed again.
        std::fs::remove_file(&file).unwrap();
        assert_eq!(
            store.trust_of(&root, &now()).unwrap(),
            Trust::Changed(vec![
                "fido.toml (removed)".into(),
                "sandbox_mode (removed)".into()
            ])
        );
    }

    /// A `fido.toml` that is a symlink or a hard link counts by what it
    /// reads as: an edit of the file it links to (one a change set may
    /// touch under another name) untrusts, and so does a link that starts
    /// to point elsewhere or dangles.
    #[test]
    fn links_count_by_what_fido_toml_reads_as() {
        let config = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        std::fs::create_dir(root.join("conf")).unwrap();
        let real = root.join("conf/real.toml");
        let hook = "[[hooks.Stop]]\ncommand = \"true\"\n";
        std::fs::write(&real, hook).unwrap();
        std::os::unix::fs::symlink("conf/real.toml", root.join("fido.toml")).unwrap();
        let store = TrustStore::in_dir(config.path());
        store.trust(&root).unwrap();
        let changed = || match store.trust_of(&root, &Fingerprint::read(&root).unwrap()) {
            Ok(Trust::Changed(changes)) => changes,
            other => panic!("{other:?}"),
        };
        std::fs::write(&real, hook.replace("true", "touch x")).unwrap();
        assert_eq!(changed(), ["hooks.Stop (changed)"]);
        std::fs::remove_file(&real).unwrap();
        assert!(changed().contains(&"fido.toml (removed)".to_string()));

        std::fs::remove_file(root.join("fido.toml")).unwrap();
        std::fs::write(&real, hook).unwrap();
        std::fs::hard_link(&real, root.join("fido.toml")).unwrap();
        store.trust(&root).unwrap();
        std::fs::write(&real, hook.replace("true", "false")).unwrap();
        assert_eq!(changed(), ["hooks.Stop (changed)"]);
    }

    /// What an older Fido wrote (a path, no fingerprint) trusts nothing
    /// now; trusting again moves the folder to the new list, and an older
    /// Fido still reads the record (and trusts nothing new from it).
    #[test]
    fn an_older_fidos_record_trusts_nothing_and_still_reads_as_one() {
        #[derive(Deserialize)]
        struct OlderRecord {
            trusted: Vec<PathBuf>,
        }
        let config = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        let store = TrustStore::in_dir(config.path());
        let old = serde_json::json!({ "trusted": [root] });
        std::fs::write(store.file(), old.to_string()).unwrap();
        let now = Fingerprint::read(&root).unwrap();
        assert_eq!(store.trust_of(&root, &now).unwrap(), Trust::Legacy);
        assert!(!store.is_trusted(&root).unwrap());

        store.trust(&root).unwrap();
        assert_eq!(store.trust_of(&root, &now).unwrap(), Trust::Trusted);
        let text = std::fs::read_to_string(store.file()).unwrap();
        let older: OlderRecord = serde_json::from_str(&text).unwrap();
        assert!(older.trusted.is_empty(), "{text}");

        std::fs::write(store.file(), old.to_string()).unwrap();
        assert_eq!(store.revoke(&root).unwrap(), (root.clone(), true));
        assert_eq!(store.trust_of(&root, &now).unwrap(), Trust::Untrusted);
    }

    #[test]
    fn trusting_a_folder_whose_fido_toml_does_not_read_is_refused() {
        let config = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("fido.toml"), "hooks = [").unwrap();
        let store = TrustStore::in_dir(config.path());
        let err = store.trust(ws.path()).unwrap_err();
        assert!(matches!(err, TrustError::Unreadable { .. }), "{err}");
        assert!(err.to_string().contains("fix it first"), "{err}");
        assert!(!store.file().exists());
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

//! What `fido trust` records of a workspace: a SHA-256 digest of each part
//! of its `fido.toml` and `.fido/` that can run a program or loosen the
//! sandbox (README: "Safety of the main agent"). When one of them is no
//! longer what was trusted, the workspace is untrusted again (as direnv
//! does with `.envrc`).
//!
//! The parts:
//! - every top-level key of `fido.toml` that an untrusted file may not set
//!   (every key but the `Scope::Anywhere` ones of `config::keys`, unknown
//!   ones included), one part per key;
//! - `[hooks.EVENT]` and `[mcp_servers.NAME]`, one part per event and per
//!   server;
//! - each subagent profile Fido reads, `.fido/agents/*.md`, by its bytes;
//! - whether `fido.toml` and `.fido` exist at all, so one that appears
//!   later (a command can create it) is a change too.
//!
//! `fido.toml` parts are digests of the parsed values (TOML types, tables
//! in key order), not of the text: a comment, spacing, quoting or the
//! order of keys does not count; a changed byte of a value does. Keys
//! compare as Fido reads them (`FIDO_SANDBOX_MODE` is `sandbox_mode`).

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::keys::{KEYS, Scope};
use super::layer::normalise_key;
use super::mcp;
use crate::hooks::config as hook_config;

/// The workspace's config file.
pub const WORKSPACE_FILE: &str = "fido.toml";
/// The workspace's folder of profiles.
const FIDO_DIR: &str = ".fido";
/// Bytes of one profile that are hashed: Fido refuses a profile far
/// shorter than this, so a change past it changes nothing it reads (the
/// length is hashed too).
const MAX_HASHED_BYTES: u64 = 1 << 20;

/// The digest of each sensitive part of a workspace, by name
/// (`sandbox_mode`, `hooks.PreToolUse`, `.fido/agents/x.md`, …).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(BTreeMap<String, String>);

impl Fingerprint {
    /// The fingerprint of `workspace` with its `fido.toml` as `table`
    /// (`None`: there is none). Reads `.fido/`; blocking.
    pub(super) fn of(workspace: &Path, table: Option<&toml::Table>) -> Fingerprint {
        let mut parts: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        if let Some(table) = table {
            parts.insert(WORKSPACE_FILE.into(), b"present".to_vec());
            toml_parts(table, &mut parts);
        }
        fido_dir_parts(&workspace.join(FIDO_DIR), &mut parts);
        Fingerprint(
            parts
                .into_iter()
                .map(|(name, bytes)| (name, hex(&Sha256::digest(&bytes))))
                .collect(),
        )
    }

    /// The fingerprint of `workspace` as it is on disk now; an error if
    /// its `fido.toml` cannot be read as TOML.
    pub fn read(workspace: &Path) -> Result<Fingerprint, super::ConfigError> {
        let table = workspace_table(workspace)?;
        Ok(Fingerprint::of(workspace, table.as_ref()))
    }

    /// The parts' names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }

    /// Whether it has no part at all (no `fido.toml`, no `.fido`).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// What differs in `now` from `self`, one phrase per part, sorted:
    /// `hooks.Stop (changed)`, `sandbox_mode (new)`, `.fido/agents/x.md
    /// (removed)`.
    pub fn changes(&self, now: &Fingerprint) -> Vec<String> {
        let mut names: Vec<&String> = self.0.keys().chain(now.0.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .filter_map(|name| match (self.0.get(name), now.0.get(name)) {
                (Some(was), Some(is)) if was == is => None,
                (Some(_), Some(_)) => Some(format!("{name} (changed)")),
                (None, _) => Some(format!("{name} (new)")),
                (Some(_), None) => Some(format!("{name} (removed)")),
            })
            .collect()
    }
}

/// Whether an untrusted file may set `key` (then it is no part).
fn settable_untrusted(key: &str) -> bool {
    KEYS.iter()
        .any(|(known, _, scope)| *known == key && *scope == Scope::Anywhere)
}

/// The parts of a `fido.toml` table: each key an untrusted file may not
/// set, split per entry for the sections (`hooks`, `mcp_servers`).
fn toml_parts(table: &toml::Table, parts: &mut BTreeMap<String, Vec<u8>>) {
    for (raw_key, value) in sorted(table) {
        let key = normalise_key(raw_key);
        if settable_untrusted(&key) {
            continue;
        }
        let section = key == hook_config::KEY || key == mcp::KEY;
        match value {
            toml::Value::Table(entries) if section => {
                for (name, entry) in sorted(entries) {
                    let part = parts.entry(format!("{key}.{name}")).or_default();
                    encode(entry, part);
                }
            }
            // Two spellings of one key (`FIDO_HOOKS`, `hooks`) add up.
            other => encode(other, parts.entry(key).or_default()),
        }
    }
}

/// A table's entries in key order, whatever order the map keeps.
fn sorted(table: &toml::Table) -> Vec<(&String, &toml::Value)> {
    let mut entries: Vec<(&String, &toml::Value)> = table.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

/// A TOML value as bytes that differ exactly when the values do: each
/// value tagged with its type, strings and lists with their length.
fn encode(value: &toml::Value, out: &mut Vec<u8>) {
    let text = |out: &mut Vec<u8>, text: &str| {
        out.extend_from_slice(&(text.len() as u64).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
    };
    match value {
        toml::Value::String(s) => {
            out.push(b's');
            text(out, s);
        }
        toml::Value::Integer(n) => {
            out.push(b'i');
            out.extend_from_slice(&n.to_le_bytes());
        }
        toml::Value::Float(f) => {
            out.push(b'f');
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        toml::Value::Boolean(b) => out.extend_from_slice(&[b'b', u8::from(*b)]),
        toml::Value::Datetime(d) => {
            out.push(b'd');
            text(out, &d.to_string());
        }
        toml::Value::Array(items) => {
            out.push(b'a');
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            items.iter().for_each(|item| encode(item, out));
        }
        toml::Value::Table(table) => {
            out.push(b't');
            out.extend_from_slice(&(table.len() as u64).to_le_bytes());
            for (key, item) in sorted(table) {
                text(out, key);
                encode(item, out);
            }
        }
    }
}

/// The parts of `.fido/`: that it exists, and each profile as the loader
/// finds it (`subagent::profiles`: `agents/*.md`, through symlinks).
fn fido_dir_parts(dir: &Path, parts: &mut BTreeMap<String, Vec<u8>>) {
    if std::fs::symlink_metadata(dir).is_err() {
        return;
    }
    parts.insert(format!("{FIDO_DIR}/"), b"present".to_vec());
    let Ok(entries) = std::fs::read_dir(dir.join("agents")) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.extension().is_none_or(|ext| ext != "md") {
            continue;
        }
        let name = entry.file_name();
        let part = format!("{FIDO_DIR}/agents/{}", name.to_string_lossy());
        // Names that read alike add up, so neither goes unnoticed.
        let bytes = parts.entry(part).or_default();
        bytes.extend_from_slice(name.as_encoded_bytes());
        bytes.extend_from_slice(&file_bytes(&path));
    }
}

/// What a profile file holds, as far as it counts: its length and first
/// [`MAX_HASHED_BYTES`], or why it cannot be read. A FIFO is never waited
/// on.
fn file_bytes(path: &Path) -> Vec<u8> {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
    let read = opened.and_then(|file| {
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Ok(b"not a regular file".to_vec());
        }
        let mut bytes = meta.len().to_le_bytes().to_vec();
        file.take(MAX_HASHED_BYTES).read_to_end(&mut bytes)?;
        Ok(bytes)
    });
    read.unwrap_or_else(|err| format!("unreadable: {:?}", err.kind()).into_bytes())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The workspace's `fido.toml` as a table, `None` when there is none.
pub(super) fn workspace_table(workspace: &Path) -> Result<Option<toml::Table>, super::ConfigError> {
    let file = workspace.join(WORKSPACE_FILE);
    if !file.exists() {
        return Ok(None);
    }
    super::layer::read_table(&file, &file.display().to_string()).map(Some)
}

#[cfg(test)]
#[path = "fingerprint_tests.rs"]
mod tests;

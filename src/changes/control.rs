//! Control files: the paths of a change set that configure Fido or git
//! rather than hold the project's code (README: "Write-capable
//! delegation"). A change set that touches one is never applied by
//! `delegate_merge = "auto"` nor by an earlier "apply later ones" answer:
//! it stays pending until a person has read it.
//!
//! What counts, by file name at any depth of the change set:
//! - `fido.toml`, and anything under a `.fido` folder (or `.fido` itself):
//!   Fido reads the workspace root's (`config::files`,
//!   `subagent::profiles`), and the workspace is whatever folder Fido is
//!   started in (`-C`), so a nested copy is the root copy of another
//!   workspace of the same repository;
//! - `AGENTS.md`: the workspace root's joins the system prompt
//!   (`agent::instructions`), nested ones for the same reason as above;
//! - `.gitattributes`: git reads one in every folder, and it selects
//!   filter, diff and merge drivers that run programs;
//! - `.gitmodules`: git reads the top-level one, and a submodule's URL and
//!   update command come from it; a nested one is the top-level one of a
//!   workspace that is a repository of its own.
//!
//! Names compare without regard to ASCII case: on a case-insensitive file
//! system (macOS, Windows) `FIDO.TOML` is `fido.toml`. A rename counts by
//! both its old and its new path. A file that a control file of the
//! workspace is a symlink to (`fido.toml` → `conf/main.toml`) counts too
//! ([`touched`]): the file Fido reads is the one the change set edits.

use std::path::{Path, PathBuf};

use crate::protocol::changes::FileChange;

/// The file names that are control files wherever they are.
const CONTROL_NAMES: &[&str] = &["fido.toml", "AGENTS.md", ".gitattributes", ".gitmodules"];

/// The folder name whose whole content is control files.
const CONTROL_FOLDER: &str = ".fido";

/// Whether the workspace-relative `path` (with `/`) is a control file.
pub fn is_control_path(path: &str) -> bool {
    let mut parts = path.split('/').filter(|part| !part.is_empty());
    let Some(last) = parts.next_back() else {
        return false;
    };
    let folder = |part: &str| part.eq_ignore_ascii_case(CONTROL_FOLDER);
    folder(last)
        || parts.any(folder)
        || CONTROL_NAMES
            .iter()
            .any(|name| last.eq_ignore_ascii_case(name))
}

/// The control files `files` touch, each once, in the order of `files`
/// (a rename's old path right before its new one).
pub fn control_files(files: &[FileChange]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let paths = files
        .iter()
        .flat_map(|file| file.from.iter().chain(std::iter::once(&file.path)));
    for path in paths {
        if is_control_path(path) && !found.contains(path) {
            found.push(path.clone());
        }
    }
    found
}

/// Most entries of `.fido/agents/` looked at for symlinks (the loader
/// reads at most 32 profiles).
const MAX_LINKED_PROFILES: usize = 256;

/// The control files `files` touch by name ([`control_files`]), then those
/// that a control file of `workspace` reaches through a symlink. Reads the
/// workspace: blocking.
pub fn touched(workspace: &Path, files: &[FileChange]) -> Vec<String> {
    let mut found = control_files(files);
    let Ok(root) = std::fs::canonicalize(workspace) else {
        return found;
    };
    let targets = link_targets(&root);
    let paths = files
        .iter()
        .flat_map(|file| file.from.iter().chain(std::iter::once(&file.path)));
    for path in paths {
        let reached = targets.iter().any(|target| {
            path == target
                || (path.starts_with(target.as_str())
                    && path.as_bytes().get(target.len()) == Some(&b'/'))
        });
        if reached && !found.contains(path) {
            found.push(path.clone());
        }
    }
    found
}

/// Where the workspace's control files lead through symlinks, as
/// workspace-relative paths (those that lead outside it are no file of a
/// change set).
fn link_targets(root: &Path) -> Vec<String> {
    let mut candidates: Vec<PathBuf> = CONTROL_NAMES
        .iter()
        .chain(std::iter::once(&CONTROL_FOLDER))
        .map(|name| PathBuf::from(*name))
        .collect();
    let agents = Path::new(CONTROL_FOLDER).join("agents");
    if let Ok(entries) = std::fs::read_dir(root.join(&agents)) {
        let names = entries.filter_map(Result::ok).take(MAX_LINKED_PROFILES);
        candidates.extend(names.map(|entry| agents.join(entry.file_name())));
    }
    candidates.push(agents);
    candidates
        .iter()
        .filter_map(|relative| {
            let real = std::fs::canonicalize(root.join(relative)).ok()?;
            let inside = real.strip_prefix(root).ok()?;
            (inside != relative && !inside.as_os_str().is_empty())
                .then(|| inside.to_string_lossy().into_owned())
        })
        .collect()
}

/// `files` with those that touch one of `control` (a change set's
/// `control_files`) first, the order kept otherwise: what a review shows.
pub fn control_first<'a>(files: &'a [FileChange], control: &[String]) -> Vec<&'a FileChange> {
    let (first, rest): (Vec<&FileChange>, Vec<&FileChange>) =
        files.iter().partition(|file| touches(file, control));
    first.into_iter().chain(rest).collect()
}

/// Whether `file` (by its path or a rename's old one) is one of `control`.
pub fn touches(file: &FileChange, control: &[String]) -> bool {
    control.contains(&file.path)
        || file
            .from
            .as_ref()
            .is_some_and(|from| control.contains(from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::changes::{FileKind, FileStatus};

    fn change(path: &str, from: Option<&str>) -> FileChange {
        FileChange {
            path: path.into(),
            status: if from.is_some() {
                FileStatus::Renamed
            } else {
                FileStatus::Modified
            },
            from: from.map(str::to_string),
            kind: FileKind::Text,
            added: 1,
            removed: 0,
        }
    }

    #[test]
    fn control_paths_are_the_named_files_and_the_fido_folder_at_any_depth() {
        for path in [
            "fido.toml",
            "FIDO.TOML",
            "sub/deep/fido.toml",
            ".fido",
            ".fido/agents/x.md",
            ".FIDO/agents/x.md",
            "pkg/.fido/agents/x.md",
            "AGENTS.md",
            "agents.md",
            "docs/AGENTS.md",
            ".gitattributes",
            "vendor/lib/.gitattributes",
            ".GitAttributes",
            ".gitmodules",
            "sub/.gitmodules",
        ] {
            assert!(is_control_path(path), "{path}");
        }
        for path in [
            "",
            "/",
            "src/main.rs",
            "fido.toml.bak",
            "my-fido.toml",
            ".fido-state/x",
            ".fidos/x",
            "fido/x",
            "AGENTS.md.orig",
            "docs/agents/readme.md",
            ".gitignore",
        ] {
            assert!(!is_control_path(path), "{path}");
        }
    }

    /// A control file that is a symlink makes its target one: a change
    /// set that edits `conf/main.toml` edits the `fido.toml` Fido reads.
    #[test]
    fn the_targets_of_symlinked_control_files_count_too() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for folder in ["conf", "cfg/fido/agents", "docs", "prompts"] {
            std::fs::create_dir_all(root.join(folder)).unwrap();
        }
        std::fs::write(root.join("conf/main.toml"), "").unwrap();
        symlink("conf/main.toml", root.join("fido.toml")).unwrap();
        symlink("cfg/fido", root.join(".fido")).unwrap();
        std::fs::write(root.join("prompts/p.md"), "").unwrap();
        symlink("../../../prompts/p.md", root.join("cfg/fido/agents/p.md")).unwrap();
        symlink("/etc/hostname", root.join("AGENTS.md")).unwrap();
        let files = vec![
            change("src/a.rs", None),
            change("conf/main.toml", None),
            change("cfg/fido/agents/x.md", None),
            change("prompts/p.md", None),
            change("etc/hostname", None),
            change("conf/main.toml.bak", None),
        ];
        assert!(control_files(&files).is_empty(), "no name is a control one");
        assert_eq!(
            touched(root, &files),
            ["conf/main.toml", "cfg/fido/agents/x.md", "prompts/p.md"]
        );
        assert_eq!(touched(root, &files[..1]), Vec::<String>::new());
    }

    #[test]
    fn a_rename_counts_by_both_names_and_each_path_is_named_once() {
        let files = vec![
            change("src/a.rs", None),
            change("notes.txt", Some("fido.toml")),
            change("sub/fido.toml", Some("tmp/x.toml")),
            change(".gitattributes", None),
            change(".gitattributes", None),
        ];
        assert_eq!(
            control_files(&files),
            ["fido.toml", "sub/fido.toml", ".gitattributes"]
        );
        let order: Vec<&str> = control_first(&files, &control_files(&files))
            .iter()
            .map(|f| f.path.as_str())
            .collect();
        assert_eq!(
            order,
            [
                "notes.txt",
                "sub/fido.toml",
                ".gitattributes",
                ".gitattributes",
                "src/a.rs"
            ]
        );
        assert!(control_files(&files[..1]).is_empty());
    }
}

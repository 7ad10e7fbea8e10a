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
//! both its old and its new path.

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

/// `files` with those that touch a control file first, the order kept
/// otherwise: what a review shows.
pub fn control_first(files: &[FileChange]) -> Vec<&FileChange> {
    let touches = |file: &FileChange| {
        is_control_path(&file.path) || file.from.as_deref().is_some_and(is_control_path)
    };
    let (control, rest): (Vec<&FileChange>, Vec<&FileChange>) =
        files.iter().partition(|file| touches(file));
    control.into_iter().chain(rest).collect()
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
        let order: Vec<&str> = control_first(&files)
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

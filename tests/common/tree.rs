//! A folder taken byte for byte, to compare before and after: what a test
//! observes itself, independent of anything Fido reports.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// One entry of a folder: its kind, permission bits and content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir(u32),
    File(u32, Vec<u8>),
    Link(PathBuf),
    /// A FIFO, socket or device: its file type bits and permissions.
    Other(u32),
}

/// Every path under `root` (relative to it) with its [`Node`]; folders
/// whose relative path is in `skip` are left out, with all they hold.
pub fn tree_bytes(root: &Path, skip: &[&str]) -> BTreeMap<PathBuf, Node> {
    let mut seen = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(folder) = todo.pop() {
        let entries = std::fs::read_dir(&folder)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", folder.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            let relative = path.strip_prefix(root).unwrap().to_path_buf();
            if skip.iter().any(|s| relative == Path::new(s)) {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode();
            let node = if meta.file_type().is_symlink() {
                Node::Link(std::fs::read_link(&path).unwrap())
            } else if meta.is_dir() {
                todo.push(path.clone());
                Node::Dir(mode)
            } else if meta.is_file() {
                Node::File(mode, std::fs::read(&path).unwrap())
            } else {
                Node::Other(mode)
            };
            seen.insert(relative, node);
        }
    }
    seen
}

/// The paths whose entries differ between `before` and `after` (added,
/// removed or changed), for a readable failure.
pub fn changed_paths(
    before: &BTreeMap<PathBuf, Node>,
    after: &BTreeMap<PathBuf, Node>,
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = before
        .keys()
        .chain(after.keys())
        .filter(|p| before.get(*p) != after.get(*p))
        .cloned()
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// Asserts `root` holds exactly what `before` recorded.
pub fn assert_tree_unchanged(root: &Path, skip: &[&str], before: &BTreeMap<PathBuf, Node>) {
    let after = tree_bytes(root, skip);
    let changed = changed_paths(before, &after);
    assert!(
        changed.is_empty(),
        "changed under {}: {changed:?}",
        root.display()
    );
}

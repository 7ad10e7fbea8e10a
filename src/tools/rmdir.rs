//! `rmdir`: remove an empty directory (undoable).

use std::borrow::Cow;
use std::io;

use super::capability::{Capability, Writes};
use super::file_work::FileEnv;
use super::{Call, PathArgs, ToolFuture, ToolOutput, TypedTool, approved_file_change};
use crate::store::undo::UndoEntry;
use crate::workspace::beneath::{self, Kind};
use crate::workspace::{FinalLink, is_missing};

pub struct Rmdir;

impl TypedTool for Rmdir {
    const NAME: &'static str = "rmdir";
    const CAPABILITY: Capability = Capability {
        writes: Some(Writes::Removes),
        ..Capability::NONE
    };
    type Args = PathArgs;

    fn description(&self) -> Cow<'static, str> {
        "Remove an empty directory (hidden entries count). Undoable.".into()
    }

    fn run<'a>(&'a self, args: PathArgs, call: Call<'a>) -> ToolFuture<'a> {
        let describe = format!("remove the empty directory {}", args.path);
        let asked = (args.path.clone(), describe);
        approved_file_change(Self::NAME, asked, args, call, |env, args| {
            run(env, &args.path)
        })
    }
}

/// Removes the folder through the handle of its parent (see
/// `workspace::beneath`).
fn run(files: &FileEnv, path: &str) -> ToolOutput {
    let place = match files.workspace.locate_for_change(path, FinalLink::Keep) {
        Ok(place) => place,
        Err(err) => return ToolOutput::error(err.to_string()),
    };
    let shown = &place.shown;
    if place.is_root() {
        return ToolOutput::error("refusing to remove the workspace root");
    }
    let missing = || ToolOutput::error(format!("`{shown}` does not exist"));
    let Some(entry) = place.entry() else {
        return missing();
    };
    let stat = match beneath::stat_at(entry.dir, entry.name) {
        Ok(stat) => stat,
        Err(err) if is_missing(&err) => return missing(),
        Err(err) => return ToolOutput::error(format!("cannot remove `{shown}`: {err}")),
    };
    if stat.kind != Kind::Dir {
        return ToolOutput::error(format!(
            "`{shown}` is not a directory; use rm to remove a file or symlink"
        ));
    }
    let entries = match beneath::list_at(entry.dir, entry.name) {
        Ok(names) => names.len(),
        Err(err) => return ToolOutput::error(format!("cannot read `{shown}`: {err}")),
    };
    if entries > 0 {
        return ToolOutput::error(not_empty(shown, entries));
    }
    if let Err(cancelled) = files.commit(Rmdir::NAME) {
        return ToolOutput::error(cancelled.to_string());
    }
    if let Err(err) = files.undo.record(UndoEntry::rmdir(place.rel(), stat.mode)) {
        return ToolOutput::error(format!(
            "could not record the undo entry ({err}), so `{shown}` was not removed"
        ));
    }
    match beneath::unlink_at(entry.dir, entry.name, true) {
        Ok(()) => ToolOutput::ok(format!("Removed empty directory {shown}/")),
        Err(err) => {
            let _ = files.undo.discard_last();
            if err.kind() == io::ErrorKind::DirectoryNotEmpty {
                ToolOutput::error(not_empty(shown, 1))
            } else {
                ToolOutput::error(format!("cannot remove `{shown}`: {err}"))
            }
        }
    }
}

fn not_empty(shown: &str, entries: usize) -> String {
    format!(
        "`{shown}` is not empty ({entries} entr{}, hidden and ignored ones included); use rm with recursive: true to remove it with its contents",
        if entries == 1 { "y" } else { "ies" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{call, env};
    use serde_json::json;
    use std::fs;

    #[tokio::test]
    async fn removes_empty_dirs_undoably() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        fs::create_dir(dir.path().join("e")).unwrap();
        let out = call(&Rmdir, &env, json!({"path": "e"})).await;
        assert!(out.ok, "{}", out.content);
        assert!(!dir.path().join("e").exists());
        env.undo.undo_last(&env.workspace).unwrap().unwrap();
        assert!(dir.path().join("e").is_dir());
    }

    #[tokio::test]
    async fn errors() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        fs::create_dir(dir.path().join("full")).unwrap();
        fs::write(dir.path().join("full/.hidden"), "").unwrap();
        fs::write(dir.path().join("f"), "").unwrap();
        for (args, expected) in [
            (json!({"path": "full"}), "rm with recursive: true"),
            (json!({"path": "f"}), "not a directory"),
            (json!({"path": "gone"}), "does not exist"),
            (json!({"path": "."}), "workspace root"),
            (json!({"path": ".fido-state"}), "Fido's own state"),
        ] {
            let out = call(&Rmdir, &env, args.clone()).await;
            assert!(!out.ok, "{args}");
            assert!(out.content.contains(expected), "{args}: {}", out.content);
        }
        assert!(dir.path().join("full/.hidden").exists());
    }
}

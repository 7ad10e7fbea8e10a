//! `rm`: remove a file, a symlink, or (with `recursive`) a directory tree.
//!
//! The removed thing is moved into the undo journal rather than deleted (see
//! `store::undo`), so undo restores it exactly. A symlink is removed
//! itself, never its target. The workspace root is never removed.

use std::borrow::Cow;

use super::capability::{Capability, Writes};
use super::file_work::FileEnv;
use super::{Call, ToolFuture, ToolOutput, TypedTool, approved_file_change};
use crate::protocol::schema::tool_args;
use crate::workspace::beneath::{self, Kind};
use crate::workspace::{FinalLink, is_missing};

pub struct Rm;

tool_args! {
    #[derive(Debug)]
    pub struct Args {
        path: String,
        #[serde(default)]
        recursive: bool,
    }
}

impl TypedTool for Rm {
    const NAME: &'static str = "rm";
    const CAPABILITY: Capability = Capability {
        writes: Some(Writes::Removes),
        ..Capability::NONE
    };
    type Args = Args;

    fn description(&self) -> Cow<'static, str> {
        "Remove a file or symlink (not its target), or a directory with its contents when recursive is true. Undoable.".into()
    }

    fn run<'a>(&'a self, args: Args, call: Call<'a>) -> ToolFuture<'a> {
        let what = if args.recursive {
            " and everything in it"
        } else {
            ""
        };
        let asked = (args.path.clone(), format!("remove {}{what}", args.path));
        approved_file_change(Self::NAME, asked, args, call, run)
    }
}

/// Removes the entry through the handle of its folder (see
/// `workspace::beneath`): a folder swapped for a symlink meanwhile cannot
/// send the removal outside.
fn run(files: &FileEnv, args: &Args) -> ToolOutput {
    let place = match files
        .workspace
        .locate_for_change(&args.path, FinalLink::Keep)
    {
        Ok(place) => place,
        Err(err) => return ToolOutput::error(err.to_string()),
    };
    let shown = &place.shown;
    if place.is_root() {
        return ToolOutput::error(
            "refusing to remove the workspace root; name a file or directory inside it",
        );
    }
    let missing = || ToolOutput::error(format!("`{shown}` does not exist; nothing was removed"));
    let Some(entry) = place.entry() else {
        return missing();
    };
    let stat = match beneath::stat_at(entry.dir, entry.name) {
        Ok(stat) => stat,
        Err(err) if is_missing(&err) => return missing(),
        Err(err) => return ToolOutput::error(format!("cannot remove `{shown}`: {err}")),
    };
    let what = match stat.kind {
        Kind::Dir if !args.recursive => {
            return ToolOutput::error(format!(
                "`{shown}` is a directory; pass recursive: true to remove it and everything in it (or use rmdir if it is empty)"
            ));
        }
        Kind::Dir => "directory",
        Kind::Symlink => "symlink",
        _ => "file",
    };
    if let Err(cancelled) = files.commit(Rm::NAME) {
        return ToolOutput::error(cancelled.to_string());
    }
    match files.undo.remove_at(&place.rel(), entry.dir, entry.name) {
        Ok(()) if stat.kind == Kind::Dir => {
            ToolOutput::ok(format!("Removed directory {shown}/ and its contents."))
        }
        Ok(()) => ToolOutput::ok(format!("Removed {what} {shown}.")),
        Err(err) => ToolOutput::error(format!(
            "could not remove `{shown}` ({err}); nothing was removed"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{call, env};
    use serde_json::json;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[tokio::test]
    async fn removes_files_links_and_trees_undoably() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        fs::write(dir.path().join("f.txt"), "keep me").unwrap();
        fs::create_dir_all(dir.path().join("d/e")).unwrap();
        fs::write(dir.path().join("d/e/g"), "x").unwrap();
        fs::write(outside.path().join("target"), "outside").unwrap();
        symlink(outside.path().join("target"), dir.path().join("link")).unwrap();

        let out = call(&Rm, &env, json!({"path": "f.txt"})).await;
        assert_eq!(out.content, "Removed file f.txt.");
        assert!(!dir.path().join("f.txt").exists());

        let out = call(&Rm, &env, json!({"path": "link"})).await;
        assert_eq!(out.content, "Removed symlink link.");
        assert!(outside.path().join("target").exists());

        let out = call(&Rm, &env, json!({"path": "d"})).await;
        assert!(!out.ok);
        assert!(out.content.contains("recursive: true"), "{}", out.content);
        let out = call(&Rm, &env, json!({"path": "d", "recursive": true})).await;
        assert!(out.ok, "{}", out.content);
        assert!(!dir.path().join("d").exists());

        env.undo.undo_last(&env.workspace).unwrap();
        assert_eq!(fs::read_to_string(dir.path().join("d/e/g")).unwrap(), "x");
        env.undo.undo_last(&env.workspace).unwrap();
        env.undo.undo_last(&env.workspace).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("f.txt")).unwrap(),
            "keep me"
        );
    }

    #[tokio::test]
    async fn errors() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        for (args, expected) in [
            (json!({"path": "."}), "workspace root"),
            (json!({"path": "sub/.."}), "workspace root"),
            (json!({"path": "nope"}), "does not exist"),
            (json!({"path": "../x"}), "outside the workspace"),
            (json!({"path": ".fido-plan.json"}), "Fido's own state"),
            (json!({"path": "x", "force": true}), "invalid arguments"),
        ] {
            let out = call(&Rm, &env, args.clone()).await;
            assert!(!out.ok, "{args}");
            assert!(out.content.contains(expected), "{args}: {}", out.content);
        }
    }
}

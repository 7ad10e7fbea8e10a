//! `mkdir`: create a directory and any missing parents (undoable).

use std::borrow::Cow;
use std::os::fd::AsFd;

use super::capability::{Capability, Writes};
use super::file_work::FileEnv;
use super::patch::in_the_way;
use super::{Call, PathArgs, ToolFuture, ToolOutput, TypedTool, approved_file_change};
use crate::store::undo::UndoEntry;
use crate::workspace::beneath::{self, Kind};
use crate::workspace::{FinalLink, is_missing};

pub struct Mkdir;

impl TypedTool for Mkdir {
    const NAME: &'static str = "mkdir";
    const CAPABILITY: Capability = Capability {
        writes: Some(Writes::Files),
        ..Capability::NONE
    };
    type Args = PathArgs;

    fn description(&self) -> Cow<'static, str> {
        "Create a directory and any missing parents, like `mkdir -p`. Undoable.".into()
    }

    fn run<'a>(&'a self, args: PathArgs, call: Call<'a>) -> ToolFuture<'a> {
        let describe = format!("create the directory {} (and missing parents)", args.path);
        let asked = (args.path.clone(), describe);
        approved_file_change(Self::NAME, asked, args, call, |env, args| {
            run(env, &args.path)
        })
    }
}

/// Creates the folders one at a time through the handle of each parent
/// (see `workspace::beneath`).
fn run(files: &FileEnv, path: &str) -> ToolOutput {
    let place = match files.workspace.locate_for_change(path, FinalLink::Follow) {
        Ok(place) => place,
        Err(err) => return ToolOutput::error(err.to_string()),
    };
    let shown = &place.shown;
    let exists = || ToolOutput::ok(format!("{shown}/ already exists."));
    if place.is_root() {
        return exists();
    }
    if let Some(entry) = place.entry() {
        match beneath::stat_at(entry.dir, entry.name) {
            Ok(stat) if stat.kind == Kind::Dir => return exists(),
            Ok(_) => {
                return ToolOutput::error(format!(
                    "a file already exists at `{shown}`; choose another name or remove the file first"
                ));
            }
            Err(err) if is_missing(&err) => {}
            Err(err) => return ToolOutput::error(format!("cannot create `{shown}`: {err}")),
        }
    }
    let parents = match place.missing_dirs() {
        Ok(parents) => parents,
        Err(file) => return ToolOutput::error(in_the_way(&file.0, &place.rel())),
    };
    if let Err(cancelled) = files.commit(Mkdir::NAME) {
        return ToolOutput::error(cancelled.to_string());
    }
    if let Err(err) = files.undo.record(UndoEntry::mkdir(place.rel(), parents)) {
        return ToolOutput::error(format!(
            "could not record the undo entry ({err}), so `{shown}` was not created"
        ));
    }
    let made = place
        .create_dirs()
        .and_then(|dir| beneath::make_dir_at(dir.as_fd(), place.name()));
    if let Err(err) = made {
        let _ = files.undo.discard_last();
        return ToolOutput::error(format!("cannot create `{shown}`: {err}"));
    }
    ToolOutput::ok(format!("Created directory {shown}/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{call, env};
    use serde_json::json;
    use std::fs;

    #[tokio::test]
    async fn creates_parents_and_undo_removes_them() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let out = call(&Mkdir, &env, json!({"path": "a/b/c"})).await;
        assert!(out.ok, "{}", out.content);
        assert_eq!(out.content, "Created directory a/b/c/");
        assert!(dir.path().join("a/b/c").is_dir());
        let out = call(&Mkdir, &env, json!({"path": "a/b"})).await;
        assert!(out.ok);
        assert!(out.content.contains("already exists"));
        env.undo.undo_last(&env.workspace).unwrap().unwrap();
        assert!(!dir.path().join("a").exists());
    }

    #[tokio::test]
    async fn errors() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        fs::write(dir.path().join("f"), "x").unwrap();
        for (args, expected) in [
            (json!({"path": "f"}), "a file already exists"),
            (json!({"path": "f/sub"}), "is a file"),
            (json!({"path": "../out"}), "outside the workspace"),
            (json!({"path": ".fido-state/x"}), "Fido's own state"),
            (json!({"dir": "x"}), "invalid arguments"),
        ] {
            let out = call(&Mkdir, &env, args.clone()).await;
            assert!(!out.ok, "{args}");
            assert!(out.content.contains(expected), "{args}: {}", out.content);
        }
    }
}

//! The fingerprint on real folders: what counts, what does not, and how a
//! change is named.

use super::*;

fn table(text: &str) -> toml::Table {
    text.parse().unwrap()
}

/// The fingerprint of a folder holding `fido.toml` = `text`.
fn of_text(text: &str) -> Fingerprint {
    let dir = tempfile::tempdir().unwrap();
    Fingerprint::of(dir.path(), Some(&table(text)))
}

const HOOK: &str = "[[hooks.PreToolUse]]\ncommand = \"echo hi\"\n";

#[test]
fn comments_spacing_quoting_order_and_key_spelling_do_not_count() {
    let plain = of_text(&format!(
        "sandbox_mode = \"read-only\"\nwritable_roots = [\"/a\", \"/b\"]\n{HOOK}"
    ));
    let reformatted = of_text(
        "# a comment\nhooks = { PreToolUse = [ { command = 'echo hi' } ] }\n\
         WRITABLE_ROOTS = [ '/a',\n  '/b', ]   # trailing comma\n\n\
         FIDO_SANDBOX_MODE   =   \"read-only\"\n",
    );
    assert_eq!(plain, reformatted, "{:?}", plain.changes(&reformatted));
    assert_eq!(
        plain.names(),
        [
            "fido.toml",
            "hooks.PreToolUse",
            "sandbox_mode",
            "writable_roots"
        ]
    );
}

#[test]
fn a_one_byte_change_to_a_hook_command_is_a_change_of_that_event() {
    let before = of_text(&format!(
        "model = \"m\"\n{HOOK}[[hooks.Stop]]\ncommand = \"true\"\n"
    ));
    let after = of_text(&format!(
        "model = \"m\"\n{}[[hooks.Stop]]\ncommand = \"true\"\n",
        HOOK.replace("echo hi", "echo hI")
    ));
    assert_eq!(before.changes(&after), ["hooks.PreToolUse (changed)"]);
    let more = of_text(&format!(
        "model = \"m\"\n{HOOK}[[hooks.Stop]]\ncommand = \"true\"\n[[hooks.SessionStart]]\ncommand = \"x\"\n"
    ));
    assert_eq!(before.changes(&more), ["hooks.SessionStart (new)"]);
    assert_eq!(more.changes(&before), ["hooks.SessionStart (removed)"]);
    // A second hook on the same event, or a matcher, is a change too.
    let matcher = of_text(&format!(
        "model = \"m\"\n{HOOK}matcher = \"rm\"\n[[hooks.Stop]]\ncommand = \"true\"\n"
    ));
    assert_eq!(before.changes(&matcher), ["hooks.PreToolUse (changed)"]);
}

#[test]
fn every_key_an_untrusted_file_may_not_set_counts_and_no_other() {
    for (key, _, scope) in KEYS {
        let before = of_text(&format!("{key} = \"one\"\n"));
        let after = of_text(&format!("{key} = \"onE\"\n"));
        let changes = before.changes(&after);
        if *scope == Scope::Anywhere {
            assert!(changes.is_empty(), "{key}: {changes:?}");
            assert_eq!(before.names(), ["fido.toml"], "{key}");
        } else {
            assert_eq!(changes, [format!("{key} (changed)")], "{key}");
        }
    }
    // Types count: 1 and "1" are different values.
    assert_eq!(
        of_text("sandbox = 1\n").changes(&of_text("sandbox = \"1\"\n")),
        ["sandbox (changed)"]
    );
    // A key Fido does not know (a newer Fido's, say) counts.
    assert_eq!(
        of_text("x = 1\n").changes(&of_text("x = 2\n")),
        ["x (changed)"]
    );
}

#[test]
fn each_mcp_server_is_a_part_of_its_own() {
    let one = "[mcp_servers.fs]\ncommand = \"fs-server\"\nargs = [\"/a\"]\n";
    let before = of_text(one);
    let after = of_text(&one.replace("/a", "/b"));
    assert_eq!(before.changes(&after), ["mcp_servers.fs (changed)"]);
    let two = of_text(&format!(
        "{one}[mcp_servers.git]\ncommand = \"git-server\"\n"
    ));
    assert_eq!(before.changes(&two), ["mcp_servers.git (new)"]);
    // Environment values of a server are values like any other.
    let env = of_text(&format!("{one}env = {{ A = \"1\" }}\n"));
    let env2 = of_text(&format!("{one}env = {{ A = \"2\" }}\n"));
    assert_eq!(env.changes(&env2), ["mcp_servers.fs (changed)"]);
}

#[test]
fn a_fido_toml_or_fido_folder_that_appears_is_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let empty = Fingerprint::of(dir.path(), None);
    assert!(empty.is_empty());
    let only_model = Fingerprint::of(dir.path(), Some(&table("model = \"m\"\n")));
    assert_eq!(empty.changes(&only_model), ["fido.toml (new)"]);
    std::fs::create_dir(dir.path().join(".fido")).unwrap();
    let with_dir = Fingerprint::of(dir.path(), None);
    assert_eq!(empty.changes(&with_dir), [".fido/ (new)"]);
}

#[test]
fn profiles_count_by_their_bytes_through_symlinks_as_the_loader_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join(".fido/agents");
    std::fs::create_dir_all(&agents).unwrap();
    let profile = "---\ndescription: reviewer\n---\nReview.\n";
    std::fs::write(agents.join("reviewer.md"), profile).unwrap();
    std::fs::write(agents.join("notes.txt"), "not a profile").unwrap();
    let outside = dir.path().join("docs.md");
    std::fs::write(&outside, profile).unwrap();
    std::os::unix::fs::symlink(&outside, agents.join("linked.md")).unwrap();
    let before = Fingerprint::of(dir.path(), None);
    assert_eq!(
        before.names(),
        [
            ".fido/",
            ".fido/agents/linked.md",
            ".fido/agents/reviewer.md"
        ]
    );
    std::fs::write(agents.join("notes.txt"), "still not one").unwrap();
    assert_eq!(
        before,
        Fingerprint::of(dir.path(), None),
        "only *.md counts"
    );
    std::fs::write(
        agents.join("reviewer.md"),
        profile.replace("Review", "Reviev"),
    )
    .unwrap();
    std::fs::write(&outside, profile.replace("reviewer", "Reviewer")).unwrap();
    assert_eq!(
        before.changes(&Fingerprint::of(dir.path(), None)),
        [
            ".fido/agents/linked.md (changed)",
            ".fido/agents/reviewer.md (changed)"
        ]
    );
}

#[test]
fn a_fifo_profile_is_named_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join(".fido/agents");
    std::fs::create_dir_all(&agents).unwrap();
    let fifo = agents.join("pipe.md");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let fingerprint = Fingerprint::of(dir.path(), None);
    assert_eq!(fingerprint.names(), [".fido/", ".fido/agents/pipe.md"]);
}

//! Trust follows content, through the real binary: `fido trust` records
//! what the workspace's `fido.toml` says; a one-byte change to a hook
//! command untrusts it (one warning, the hook does not run) until `fido
//! trust` again. Headless (`fido exec`, the script provider) and in the
//! terminal UI (tmux).

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use super::tui::{Tmux, start_fido};
use crate::common::FakeServer;
use crate::common::process::{fido_cmd_with_home, run_in};

/// A workspace, and a home beside it (the user's config directory is
/// `home/fido`) where the hook writes its marker.
struct Setup {
    ws: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let setup = Setup {
            ws: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
        };
        setup.hook_touches("ran");
        setup
    }

    fn marker(&self, name: &str) -> std::path::PathBuf {
        self.home.path().join(name)
    }

    /// A `fido.toml` whose SessionStart hook creates the marker `name`.
    fn hook_touches(&self, name: &str) {
        let command = format!("cat > /dev/null; touch {}", self.marker(name).display());
        let text = format!(
            "model = \"m\"\n\n[[hooks.SessionStart]]\ncommand = {}\n",
            serde_json::to_string(&command).unwrap()
        );
        std::fs::write(self.ws.path().join("fido.toml"), text).unwrap();
    }

    fn fido(&self, args: &[&str]) -> Output {
        let mut cmd = fido_cmd_with_home(self.home.path());
        cmd.args(args)
            .env("FIDO_PROVIDER", "script")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        run_in(self.ws.path(), cmd, None, Duration::from_secs(60))
    }

    fn trust(&self) -> String {
        let output = self.fido(&["trust", &self.ws.path().display().to_string()]);
        assert!(output.status.success(), "{}", stderr(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `fido exec` with the bundled script; its stderr.
    fn exec(&self) -> String {
        let ws = self.ws.path().display().to_string();
        let output = self.fido(&["exec", "-C", &ws, "show me around"]);
        assert!(output.status.success(), "{}", stderr(&output));
        stderr(&output)
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn canonical(path: &Path) -> String {
    std::fs::canonicalize(path).unwrap().display().to_string()
}

#[test]
fn a_one_byte_change_to_a_trusted_hook_command_untrusts_until_fido_trust() {
    let setup = Setup::new();
    let trusted = setup.trust();
    assert!(
        trusted.contains("recorded: fido.toml, hooks.SessionStart;"),
        "{trusted}"
    );
    let quiet = setup.exec();
    assert!(setup.marker("ran").exists(), "the trusted hook ran");
    assert!(!quiet.contains("warning"), "{quiet}");

    // One byte of the command: the marker's name.
    setup.hook_touches("raN");
    let warned = setup.exec();
    assert!(!setup.marker("raN").exists(), "the changed hook ran");
    let warnings: Vec<&str> = warned
        .lines()
        .filter(|line| line.starts_with("fido: warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warned}");
    let ws = canonical(setup.ws.path());
    assert!(
        warnings[0].contains("hooks.SessionStart (changed)")
            && warnings[0].contains(&format!("`fido trust {ws}`")),
        "{warned}"
    );

    setup.trust();
    let quiet = setup.exec();
    assert!(setup.marker("raN").exists(), "trusted again, the hook ran");
    assert!(!quiet.contains("warning"), "{quiet}");
}

/// A folder trusted while it had no `fido.toml`: one that a command
/// creates later is not trusted.
#[test]
fn a_fido_toml_that_appears_after_fido_trust_is_not_trusted() {
    let setup = Setup::new();
    std::fs::remove_file(setup.ws.path().join("fido.toml")).unwrap();
    let trusted = setup.trust();
    assert!(trusted.contains("recorded: no fido.toml"), "{trusted}");
    setup.hook_touches("ran");
    let warned = setup.exec();
    assert!(!setup.marker("ran").exists(), "the new file's hook ran");
    assert!(
        warned.contains("fido.toml (new)") && warned.contains("hooks.SessionStart (new)"),
        "{warned}"
    );
}

/// The terminal UI names the change in its transcript, the same sentence.
#[test]
fn the_terminal_ui_names_what_changed_since_fido_trust() {
    let setup = Setup::new();
    setup.trust();
    setup.hook_touches("raN");
    let server = FakeServer::start(vec![]);
    let home = setup.home.path().display().to_string();
    let tmux = Tmux::for_model(&server.base_url(), &[("XDG_CONFIG_HOME", home)]);
    start_fido(&tmux, setup.ws.path());
    let screen = tmux.wait_for("the warning", |s| s.contains("changed since"));
    assert!(screen.contains("hooks.SessionStart (changed)"), "{screen}");
    assert!(!setup.marker("raN").exists(), "the changed hook ran");
    tmux.keys(&["C-c", "C-c"]);
    tmux.wait_for("the shell again", |s| !s.contains("changed since"));
    tmux.assert_fido_gone(setup.ws.path());
}

//! The environment policy through the real binary (README, "Secrets"):
//! a command run by `bash_exec`, a hook and an MCP server started by
//! `fido` see what programs need but none of the secrets in Fido's
//! environment, except those the user config names in `env_passthrough`;
//! a workspace `fido.toml`, trusted or not, the environment and the
//! command line cannot name any.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::common::process::{RUN_TIMEOUT, run_in};
use crate::common::sse;
use crate::common::{FakeServer, Reply, fido_cmd_with_home};

/// Secrets as a developer's shell holds them, each with a value found
/// nowhere else.
const SECRETS: &[(&str, &str)] = &[
    ("GITHUB_TOKEN", "ghp-value-of-github-token"),
    ("AWS_SECRET_ACCESS_KEY", "value-of-aws-secret"),
    ("NPM_TOKEN", "value-of-npm-token"),
    ("SSH_AUTH_SOCK", "/tmp/value-of-ssh-auth-sock"),
    ("npm_config__auth", "value-of-npm-auth"),
    ("MYSQL_PWD", "value-of-mysql-pwd"),
    ("KUBECONFIG", "/tmp/value-of-kubeconfig"),
    ("DATABASE_URL", "postgres://app:value-of-db-password@db/app"),
];

/// The one secret the user config lets through.
const PASSED: (&str, &str) = ("DEPLOY_TOKEN", "value-of-deploy-token");

/// A workspace and a home whose user config is `config`.
struct Setup {
    ws: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Setup {
    fn new(config: &str) -> Setup {
        let setup = Setup {
            ws: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(setup.home.path().join("fido")).unwrap();
        std::fs::write(setup.home.path().join("fido/config.toml"), config).unwrap();
        setup
    }

    /// `fido -C WS ARGS` with the secrets and the passed one in its
    /// environment.
    fn fido(&self, args: &[&str]) -> Command {
        let mut cmd = fido_cmd_with_home(self.home.path());
        cmd.arg("-C")
            .arg(self.ws.path())
            .args(args)
            .envs(SECRETS.iter().copied())
            .env(PASSED.0, PASSED.1)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        run_in(self.ws.path(), self.fido(args), None, RUN_TIMEOUT)
    }

    /// What `bash_exec` printed of `command`.
    fn bash(&self, command: &str) -> String {
        let args = serde_json::json!({ "command": command }).to_string();
        let output = self.run(&["tool", "call", "bash_exec", "--args", &args]);
        assert!(output.status.success(), "{}", text(&output));
        let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
        printed["content"].as_str().unwrap().to_owned()
    }
}

fn text(output: &Output) -> String {
    format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `env`'s output (or any text holding the child's environment) has
/// `PATH` and the passed secret, and no other secret, by name or value.
fn assert_policy_kept(env: &str, passed: bool) {
    assert!(env.contains("PATH=/"), "PATH is missing:\n{env}");
    for (name, value) in SECRETS {
        assert!(!env.contains(value), "{name} reached the child:\n{env}");
        assert!(!env.contains(&format!("{name}=")), "{name} is set:\n{env}");
    }
    let line = format!("{}={}", PASSED.0, PASSED.1);
    assert_eq!(env.contains(&line), passed, "{}:\n{env}", PASSED.0);
}

fn passthrough_config() -> String {
    format!("env_passthrough = [\"{}\"]\n", PASSED.0)
}

#[test]
fn a_command_gets_no_secret_but_those_env_passthrough_names() {
    let setup = Setup::new(&passthrough_config());
    assert_policy_kept(&setup.bash("env"), true);
    // Without the key, not even that one.
    let setup = Setup::new("");
    assert_policy_kept(&setup.bash("env"), false);
}

#[test]
fn only_the_user_config_file_can_let_a_secret_through() {
    // A trusted workspace's fido.toml is ignored, with a warning.
    let setup = Setup::new("");
    std::fs::write(setup.ws.path().join("fido.toml"), passthrough_config()).unwrap();
    let trusted = setup.run(&["trust", &setup.ws.path().display().to_string()]);
    assert!(trusted.status.success(), "{}", text(&trusted));
    let args = r#"{"command": "env"}"#;
    let output = setup.run(&["tool", "call", "bash_exec", "--args", args]);
    assert!(output.status.success(), "{}", text(&output));
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_policy_kept(printed["content"].as_str().unwrap(), false);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("sets env_passthrough, which only your user config file may set"),
        "{stderr}"
    );
    // The environment and the command line are refused, by name.
    let mut cmd = setup.fido(&["tool", "call", "bash_exec", "--args", args]);
    cmd.env("FIDO_ENV_PASSTHROUGH", PASSED.0);
    let output = run_in(setup.ws.path(), cmd, None, RUN_TIMEOUT);
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(
            "environment variable FIDO_ENV_PASSTHROUGH: `env_passthrough` can be set only in your user config file"
        ),
        "{}",
        text(&output)
    );
    let flag = format!("env_passthrough={}", PASSED.0);
    let output = setup.run(&["-c", &flag, "tool", "call", "bash_exec", "--args", args]);
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("command line: `env_passthrough` can be set only in your user config file"),
        "{}",
        text(&output)
    );
}

#[test]
fn a_bad_name_in_env_passthrough_is_a_clear_error() {
    let setup = Setup::new("env_passthrough = [\"GOOD\", \"NOT=ONE\"]\n");
    let output = setup.run(&[
        "tool",
        "call",
        "bash_exec",
        "--args",
        r#"{"command":"true"}"#,
    ]);
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("a list of environment variable names (letters, digits and `_`, not starting with a digit); `NOT=ONE` is not one"),
        "{}",
        text(&output)
    );
}

#[test]
fn a_hook_gets_no_secret_but_those_env_passthrough_names() {
    let out = tempfile::tempdir().unwrap();
    let env_file = out.path().join("env.txt");
    let hook = format!(
        "[[hooks.SessionStart]]\ncommand = \"env > {}\"\n",
        env_file.display()
    );
    let setup = Setup::new(&format!("{}{hook}", passthrough_config()));
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("done"))]);
    let mut cmd = setup.fido(&["exec", "--json", "--", "go"]);
    cmd.env("FIDO_PROVIDER", "openai")
        .env("FIDO_BASE_URL", server.base_url())
        .env("FIDO_MODEL", "test-model")
        .env("FIDO_API_KEY", "value-of-fido-api-key");
    let output = run_in(setup.ws.path(), cmd, None, RUN_TIMEOUT);
    assert!(output.status.success(), "{}", text(&output));
    let env = std::fs::read_to_string(&env_file).unwrap();
    assert_policy_kept(&env, true);
    assert!(!env.contains("value-of-fido-api-key"), "{env}");
}

/// The MCP fixture's `env` tool: the value of one variable in the
/// server's environment, or `<unset>`.
fn mcp_env(setup: &Setup, name: &str) -> String {
    let args = serde_json::json!({ "name": name }).to_string();
    let output = setup.run(&["tool", "call", "mcp__fix__env", "--args", &args]);
    assert!(output.status.success(), "{}", text(&output));
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    printed["content"].as_str().unwrap().to_owned()
}

#[test]
fn an_mcp_server_gets_no_secret_but_those_env_passthrough_names() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_fixture.py");
    let config = format!(
        "{}[mcp_servers.fix]\ncommand = \"python3\"\nargs = [\"{}\"]\nenv = {{ OWN_TOKEN = \"given\" }}\n",
        passthrough_config(),
        fixture.display()
    );
    let setup = Setup::new(&config);
    assert!(mcp_env(&setup, "PATH").starts_with('/'));
    for (name, _) in SECRETS {
        assert_eq!(mcp_env(&setup, name), "<unset>", "{name}");
    }
    assert_eq!(mcp_env(&setup, PASSED.0), PASSED.1);
    // What the config gives the server itself is its own.
    assert_eq!(mcp_env(&setup, "OWN_TOKEN"), "given");
}

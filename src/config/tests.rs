use std::path::Path;

use super::*;
use crate::protocol::{ApprovalPolicy, SandboxMode};
use crate::sandbox::SandboxRequirement;

fn env(pairs: &[(&str, &str)], home: &Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    v.push(("HOME".into(), home.display().to_string()));
    v
}

fn overrides(dir: &Path) -> Overrides {
    Overrides {
        workspace: Some(dir.to_path_buf()),
        values: vec![],
    }
}

#[test]
fn a_number_too_large_for_its_setting_is_refused_not_wrapped() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // 2^32 + 1 would wrap to 1 step in the 32 bits that hold it.
    let err = Config::load_from(
        &overrides(dir.path()),
        &env(&[("FIDO_MAX_STEPS", "4294967297")], home.path()),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("FIDO_MAX_STEPS") && err.contains("a whole number from 1 to 4294967295"),
        "{err}"
    );
    let cfg = Config::load_from(
        &overrides(dir.path()),
        &env(&[("FIDO_MAX_STEPS", "4294967295")], home.path()),
    )
    .unwrap();
    assert_eq!(cfg.agent.max_steps, u32::MAX);
}

#[test]
fn defaults_and_layers_flags_beat_env_beat_files() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fido.toml"),
        "model = \"from-file\"\nmax_steps = 7\n",
    )
    .unwrap();
    let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
    assert_eq!(cfg.model, "from-file");
    assert_eq!(cfg.agent.max_steps, 7);
    assert_eq!(cfg.provider, ProviderKind::OpenAi);
    assert_eq!(cfg.plan_file, cfg.workspace.join(".fido-plan.json"));

    let cfg = Config::load_from(
        &overrides(dir.path()),
        &env(&[("FIDO_MODEL", "from-env")], home.path()),
    )
    .unwrap();
    assert_eq!(cfg.model, "from-env");

    let mut flags = overrides(dir.path());
    flags.values.push(("model".into(), "from-flag".into()));
    let cfg = Config::load_from(&flags, &env(&[("FIDO_MODEL", "from-env")], home.path())).unwrap();
    assert_eq!(cfg.model, "from-flag");
}

#[test]
fn user_file_is_beaten_by_workspace_file() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".config/fido")).unwrap();
    std::fs::write(
        home.path().join(".config/fido/config.toml"),
        "api_key = \"k\"\nmodel = \"user\"\nFIDO_MAX_STEPS = 9\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("fido.toml"), "model = \"ws\"\n").unwrap();
    let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
    assert_eq!(cfg.model, "ws");
    assert_eq!(cfg.agent.max_steps, 9);
    assert_eq!(cfg.api_key.unwrap().expose(), "k");
}

#[test]
fn bad_values_are_one_clear_sentence_naming_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let err = Config::load_from(
        &overrides(dir.path()),
        &env(&[("FIDO_MAX_STEPS", "many")], home.path()),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("FIDO_MAX_STEPS") && err.contains("many"),
        "{err}"
    );

    std::fs::write(dir.path().join("fido.toml"), "modle = \"x\"\n").unwrap();
    let err = Config::load_from(&overrides(dir.path()), &env(&[], home.path()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown key `modle`"), "{err}");

    std::fs::write(dir.path().join("fido.toml"), "model = [1\n").unwrap();
    let err = Config::load_from(&overrides(dir.path()), &env(&[], home.path()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not valid TOML"), "{err}");
}

#[test]
fn loopback_detection() {
    assert!(is_loopback_url("http://127.0.0.1:8080/v1"));
    assert!(is_loopback_url("http://localhost/v1"));
    assert!(is_loopback_url("http://[::1]:11434/v1"));
    assert!(!is_loopback_url("https://api.openai.com/v1"));
    assert!(!is_loopback_url("http://127.0.0.1.evil.com/v1"));
}

/// A value for each trusted-only key that differs from its default.
const TRUSTED_ONLY: &[(&str, &str)] = &[
    ("provider", "\"anthropic\""),
    ("base_url", "\"http://attacker.invalid/v1\""),
    ("api_key", "\"stolen\""),
    ("script", "\"/etc/passwd\""),
    ("plan_file", "\"elsewhere.json\""),
    ("sandbox", "\"best_effort\""),
    ("sandbox_mode", "\"danger-full-access\""),
    ("approval_policy", "\"never\""),
    ("network", "true"),
    ("network_allow", "[\"example.com\", \"127.0.0.1:8080\"]"),
    ("network_deny", "[\"*.example.org\"]"),
    ("command_max_processes", "\"100000\""),
    ("command_tmpdir_mib", "\"65536\""),
    ("writable_roots", "[\"/\"]"),
    ("delegate_write", "\"allow\""),
    ("delegate_merge", "\"auto\""),
];

fn trusted_only_changed(cfg: &Config, key: &str) -> bool {
    match key {
        "provider" => cfg.provider != ProviderKind::OpenAi,
        "base_url" => cfg.base_url.contains("attacker"),
        "api_key" => cfg.api_key.is_some(),
        "script" => cfg.script.is_some(),
        "plan_file" => cfg.plan_file.ends_with("elsewhere.json"),
        "sandbox" => cfg.delegation.sandbox != SandboxRequirement::Required,
        "sandbox_mode" => cfg.sandbox.mode != SandboxMode::DEFAULT,
        "approval_policy" => cfg.approvals.approval_policy.is_some(),
        "network" => cfg.sandbox.network != NetworkAccess::Off,
        "network_allow" => !cfg.network_rules.allow.is_empty(),
        "network_deny" => !cfg.network_rules.deny.is_empty(),
        "writable_roots" => !cfg.sandbox.writable_roots.is_empty(),
        "command_max_processes" => cfg.sandbox.limits.max_processes != 4096,
        "command_tmpdir_mib" => cfg.sandbox.limits.tmpdir_mib != 1024,
        "delegate_write" => cfg.approvals.delegate_write.is_some(),
        "delegate_merge" => cfg.approvals.delegate_merge.is_some(),
        other => panic!("no check for {other}"),
    }
}

#[test]
fn every_trusted_only_key_is_listed_and_checked() {
    let listed: Vec<&str> = KEYS
        .iter()
        .filter(|(_, _, scope)| *scope == Scope::Trusted)
        .map(|(key, _, _)| *key)
        .collect();
    let checked: Vec<&str> = TRUSTED_ONLY.iter().map(|(key, _)| *key).collect();
    assert_eq!(listed, checked);
}

#[test]
fn an_untrusted_workspace_file_cannot_set_a_trusted_only_key() {
    for (key, value) in TRUSTED_ONLY {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("fido.toml"),
            format!("{key} = {value}\nmodel = \"ws\"\n"),
        )
        .unwrap();
        let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
        assert!(!trusted_only_changed(&cfg, key), "{key} took effect");
        assert_eq!(cfg.model, "ws", "safe keys still apply");
        assert!(!cfg.workspace_trusted);
        assert_eq!(cfg.warnings.len(), 1, "{key}: {:?}", cfg.warnings);
        let warning = &cfg.warnings[0];
        assert!(warning.contains(&format!("ignored: {key}.")), "{warning}");
        assert!(warning.contains("fido trust "), "{warning}");
    }
}

#[test]
fn a_trusted_workspace_file_is_read_in_full() {
    for (key, value) in TRUSTED_ONLY {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fido.toml"), format!("{key} = {value}\n")).unwrap();
        TrustStore::in_dir(&home.path().join(".config/fido"))
            .trust(dir.path())
            .unwrap();
        let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
        assert!(cfg.workspace_trusted);
        assert!(trusted_only_changed(&cfg, key), "{key} was not applied");
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    }
}

#[test]
fn the_user_file_and_environment_stay_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".config/fido")).unwrap();
    std::fs::write(
        home.path().join(".config/fido/config.toml"),
        "sandbox_mode = \"read-only\"\nwritable_roots = [\"/tmp\"]\n",
    )
    .unwrap();
    let cfg = Config::load_from(
        &overrides(dir.path()),
        &env(&[("FIDO_APPROVAL_POLICY", "untrusted")], home.path()),
    )
    .unwrap();
    assert_eq!(cfg.sandbox.mode, SandboxMode::ReadOnly);
    assert_eq!(
        cfg.approvals.approval_policy,
        Some(ApprovalPolicy::Untrusted)
    );
    assert_eq!(
        cfg.sandbox.writable_roots,
        vec![std::fs::canonicalize("/tmp").unwrap()]
    );
}

#[test]
fn plan_file_must_stay_inside_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
    for value in [
        "../plan.json",
        "/etc/passwd",
        "sub/../../plan.json",
        "link/plan.json",
        ".",
    ] {
        let err = Config::load_from(
            &overrides(dir.path()),
            &env(&[("FIDO_PLAN_FILE", value)], home.path()),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("outside the workspace"), "{value}: {err}");
    }
    let cfg = Config::load_from(
        &overrides(dir.path()),
        &env(&[("FIDO_PLAN_FILE", "state/plan.json")], home.path()),
    )
    .unwrap();
    assert_eq!(cfg.plan_file, cfg.workspace.join("state/plan.json"));
}

#[test]
fn safety_values_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    for (var, value, needle) in [
        ("FIDO_SANDBOX_MODE", "off", "workspace-write"),
        ("FIDO_APPROVAL_POLICY", "sometimes", "on-request"),
        ("FIDO_NETWORK", "maybe", "true, false or \"allowlist\""),
        ("FIDO_WRITABLE_ROOTS", "/no/such/dir", "/no/such/dir"),
    ] {
        let err = Config::load_from(&overrides(dir.path()), &env(&[(var, value)], home.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{var}: {err}");
    }
    let cfg = Config::load_from(
        &overrides(dir.path()),
        &env(&[("FIDO_SANDBOX_MODE", "read_only")], home.path()),
    )
    .unwrap();
    assert_eq!(cfg.sandbox.mode, SandboxMode::ReadOnly);
}

#[test]
fn api_key_debug_hides_the_key() {
    assert_eq!(
        format!("{:?}", crate::provider::ApiKey::new("secret".into())),
        "ApiKey(…)"
    );
}

#[test]
fn hooks_come_from_the_user_file_and_a_trusted_workspace_only() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".config/fido")).unwrap();
    std::fs::write(
        home.path().join(".config/fido/config.toml"),
        "[[hooks.Stop]]\ncommand = \"user-stop\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("fido.toml"),
        "[[hooks.PreToolUse]]\nmatcher = \"patch\"\ncommand = \"ws-guard\"\n",
    )
    .unwrap();
    let commands = |cfg: &Config| -> Vec<String> {
        cfg.hooks.hooks.iter().map(|h| h.command.clone()).collect()
    };
    let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
    assert_eq!(commands(&cfg), ["user-stop"]);
    assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
    assert!(
        cfg.warnings[0].contains("ignored: hooks."),
        "{:?}",
        cfg.warnings
    );

    TrustStore::in_dir(&home.path().join(".config/fido"))
        .trust(dir.path())
        .unwrap();
    let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
    assert_eq!(commands(&cfg), ["user-stop", "ws-guard"]);
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);

    std::fs::write(
        dir.path().join("fido.toml"),
        "[[hooks.PreToolUse]]\ncommand = \"c\"\nwhen = 1\n",
    )
    .unwrap();
    // The change untrusts the folder (its hooks are ignored); trusted
    // again, the bad hook is an error.
    let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
    assert_eq!(commands(&cfg), ["user-stop"]);
    TrustStore::in_dir(&home.path().join(".config/fido"))
        .trust(dir.path())
        .unwrap();
    let err = Config::load_from(&overrides(dir.path()), &env(&[], home.path()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("fido.toml") && err.contains("hooks.PreToolUse[0].when"),
        "{err}"
    );
}

#[test]
fn host_lists_keep_their_ports_from_a_file_and_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".config/fido")).unwrap();
    std::fs::write(
        home.path().join(".config/fido/config.toml"),
        "network_allow = [\"localhost:8080\", \"*.example.org\", \"[::1]:9\"]\n",
    )
    .unwrap();
    let cfg = Config::load_from(
        &overrides(dir.path()),
        &env(
            &[("FIDO_NETWORK_DENY", "a.example.org, b.example.org:81")],
            home.path(),
        ),
    )
    .unwrap();
    let shown = |rules: &[crate::net::HostRule]| -> Vec<String> {
        rules.iter().map(ToString::to_string).collect()
    };
    let rules = &cfg.network_rules;
    assert_eq!(
        shown(&rules.allow),
        ["localhost:8080", "*.example.org", "[::1]:9"]
    );
    assert_eq!(shown(&rules.deny), ["a.example.org", "b.example.org:81"]);
    let err = Config::load_from(
        &overrides(dir.path()),
        &env(&[("FIDO_NETWORK_DENY", "http://x")], home.path()),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("FIDO_NETWORK_DENY") && err.contains("HOST:PORT"),
        "{err}"
    );
}

#[test]
fn the_host_lists_are_empty_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
    assert_eq!(cfg.network_rules, crate::net::NetRules::default());
}

#[test]
fn network_is_a_flag_or_allowlist_and_off_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let load = |pairs: &[(&str, &str)]| {
        Config::load_from(&overrides(dir.path()), &env(pairs, home.path()))
    };
    assert_eq!(load(&[]).unwrap().sandbox.network, NetworkAccess::Off);
    for (text, access) in [
        ("allowlist", NetworkAccess::Allowlist),
        ("true", NetworkAccess::On),
        ("yes", NetworkAccess::On),
        ("false", NetworkAccess::Off),
        ("0", NetworkAccess::Off),
    ] {
        let cfg = load(&[("FIDO_NETWORK", text)]).unwrap();
        assert_eq!(cfg.sandbox.network, access, "{text}");
    }
    let err = load(&[("FIDO_NETWORK", "proxy")]).unwrap_err().to_string();
    assert_eq!(
        err,
        "environment variable FIDO_NETWORK: `network` = \"proxy\" is not valid: expected true, false or \"allowlist\""
    );

    std::fs::create_dir_all(home.path().join(".config/fido")).unwrap();
    let file = home.path().join(".config/fido/config.toml");
    for (line, access) in [
        ("network = \"allowlist\"\n", NetworkAccess::Allowlist),
        ("network = true\n", NetworkAccess::On),
        ("network = false\n", NetworkAccess::Off),
    ] {
        std::fs::write(&file, line).unwrap();
        assert_eq!(load(&[]).unwrap().sandbox.network, access, "{line}");
    }
    std::fs::write(&file, "network = 3\n").unwrap();
    let err = load(&[]).unwrap_err().to_string();
    assert!(err.contains("true, false or \"allowlist\""), "{err}");
}

#[test]
fn an_untrusted_workspace_cannot_open_the_network_by_allowlist() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fido.toml"), "network = \"allowlist\"\n").unwrap();
    let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
    assert_eq!(cfg.sandbox.network, NetworkAccess::Off);
}

/// Trust follows content: a trusted file whose hook command changes by one
/// byte is read as untrusted, with one warning naming the hook and the
/// command that trusts it again; a change of `model` alone keeps trust.
#[test]
fn a_changed_hook_untrusts_the_workspace_with_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let file = dir.path().join("fido.toml");
    let hook = "[[hooks.PreToolUse]]\ncommand = \"ws-guard\"\n";
    std::fs::write(&file, format!("model = \"a\"\n{hook}")).unwrap();
    TrustStore::in_dir(&home.path().join(".config/fido"))
        .trust(dir.path())
        .unwrap();
    let load = || Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
    std::fs::write(&file, format!("model = \"b\"\n{hook}")).unwrap();
    let cfg = load();
    assert!(
        cfg.workspace_trusted && cfg.warnings.is_empty(),
        "{:?}",
        cfg.warnings
    );
    assert_eq!(cfg.hooks.hooks.len(), 1);

    std::fs::write(
        &file,
        format!("model = \"b\"\n{}", hook.replace("guard", "guarD")),
    )
    .unwrap();
    let cfg = load();
    assert!(!cfg.workspace_trusted);
    assert!(cfg.hooks.hooks.is_empty(), "the changed hook is not read");
    assert_eq!(cfg.model, "b", "safe keys still apply");
    assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
    let warning = &cfg.warnings[0];
    let workspace = cfg.workspace.display();
    assert!(
        warning.contains("hooks.PreToolUse (changed)")
            && warning.contains("(ignored: hooks)")
            && warning.contains(&format!("`fido trust {workspace}`")),
        "{warning}"
    );
}

/// A folder an older Fido trusted by path alone is not trusted: one
/// warning says why and how to trust it again.
#[test]
fn an_older_fidos_trust_is_not_trust_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("fido.toml"),
        "sandbox_mode = \"read-only\"\n",
    )
    .unwrap();
    let config_dir = home.path().join(".config/fido");
    std::fs::create_dir_all(&config_dir).unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let old = serde_json::json!({ "trusted": [root] });
    std::fs::write(config_dir.join("trust.json"), old.to_string()).unwrap();
    let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
    assert!(!cfg.workspace_trusted);
    assert_eq!(cfg.sandbox.mode, SandboxMode::WorkspaceWrite);
    assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
    assert!(
        cfg.warnings[0].contains("trusted by an older Fido")
            && cfg.warnings[0].contains("(ignored: sandbox_mode)")
            && cfg.warnings[0].contains("fido trust "),
        "{:?}",
        cfg.warnings
    );
}

//! Secrets in a child's environment (`sandbox::env`): the parent puts a
//! canary secret among the variables it spawns the probe child from, the
//! way `bash_exec` (or the supervisor, for a subagent) would; the child
//! must find neither its name nor its value.

use std::ffi::OsString;
use std::io;

use super::super::probe::{Probe, RefusedBy};

/// The canary's name: a secret by the policy's first rule (`*TOKEN*`).
pub(in super::super) const CANARY_NAME: &str = "FIDO_CHECK_CANARY_TOKEN";
/// How the canary's value begins; the parent adds its pid.
const CANARY_VALUE: &str = "fido-check-canary-";

/// The canary as the parent adds it to its own environment.
pub(in super::super) fn canary() -> (OsString, OsString) {
    let value = format!("{CANARY_VALUE}{}", std::process::id());
    (CANARY_NAME.into(), value.into())
}

/// `Ok` (got through) when the canary is among `vars`, by name or by
/// value (under another name); else ENOENT, the variable is not there.
fn find_canary(vars: impl IntoIterator<Item = (OsString, OsString)>) -> io::Result<()> {
    let seen = vars.into_iter().any(|(name, value)| {
        name == CANARY_NAME || value.to_string_lossy().starts_with(CANARY_VALUE)
    });
    if seen {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(libc::ENOENT))
    }
}

pub(in super::super) const SECRET_ENV: Probe =
    Probe::new("secret-env", |_| find_canary(std::env::vars_os()))
        .refused_by(RefusedBy::Always("env policy"))
        .with_refusal_errno("ENOENT");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::env::{EnvPolicy, Inherit, SUBAGENT_ENV};

    fn var(name: &str, value: &str) -> (OsString, OsString) {
        (name.into(), value.into())
    }

    #[test]
    fn the_canary_is_found_by_name_or_value_and_the_policy_removes_it() {
        let path = var("PATH", "/bin");
        let errno = |found: io::Result<()>| found.err().and_then(|e| e.raw_os_error());
        assert_eq!(errno(find_canary([path.clone()])), Some(libc::ENOENT));
        assert!(find_canary([path.clone(), canary()]).is_ok());
        let renamed = var("INNOCENT", &canary().1.to_string_lossy());
        assert!(find_canary([renamed]).is_ok());
        // Through the policy of every kind of child, it is gone.
        for inherit in [Inherit::All, SUBAGENT_ENV] {
            let env = EnvPolicy::default().child_env(inherit, [path.clone(), canary()]);
            assert_eq!(errno(find_canary(env)), Some(libc::ENOENT));
        }
    }
}

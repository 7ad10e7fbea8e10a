//! The fork bomb of the process-limit probes: `sleep`s started until the
//! kernel refuses one, then killed and reaped.

use std::io;

/// Starts up to `most` `sleep` children, stopping at the first the kernel
/// refuses; kills and reaps them all. `Ok`: none was refused.
pub(super) fn start_sleepers(most: usize) -> io::Result<()> {
    let mut children = Vec::new();
    let result = loop {
        if children.len() >= most {
            break Ok(());
        }
        match std::process::Command::new("sleep")
            .arg("30")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
        {
            Ok(child) => children.push(child),
            Err(err) => break Err(err),
        }
    };
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
    result
}

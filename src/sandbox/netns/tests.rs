//! Real commands through [`CommandSandbox::apply`] behind a fake proxy:
//! `fido sandbox check`'s stand-in, threads that take descriptors from the
//! bridge (and connections on its own listener, for the port-only
//! fallback) and answer each with `HTTP/1.1 200 OK`.

use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::stand_in::ProxyStandIn as FakeProxy;
use super::*;
use crate::process::ProcessGroup;
use crate::protocol::SandboxMode;
use crate::sandbox::SandboxError;
use crate::sandbox::pidns::tests::{running, skip_unless_ci};
use crate::sandbox::{CommandPolicy, CommandSandbox};

fn forced_port_only() -> NetworkConfinement {
    NetworkConfinement::PortOnly {
        reason: "forced by the test".to_owned(),
    }
}

/// Both paths where this kernel has the namespaces, else the fallback
/// only (and a failure under `CI=true`).
fn confinements() -> Vec<NetworkConfinement> {
    let mut all = vec![forced_port_only()];
    match network_confinement() {
        NetworkConfinement::Namespace => all.push(NetworkConfinement::Namespace),
        NetworkConfinement::PortOnly { reason } => skip_unless_ci(&reason),
    }
    all
}

/// A `workspace-write` sandbox behind `proxy`; the workspace is the
/// returned folder.
fn sandbox(
    proxy: &FakeProxy,
    confinement: NetworkConfinement,
) -> (Arc<CommandSandbox>, tempfile::TempDir) {
    let workspace = tempfile::tempdir().unwrap();
    let policy = CommandPolicy {
        mode: SandboxMode::WorkspaceWrite,
        network: crate::protocol::NetworkAccess::Off,
        workspace: std::fs::canonicalize(workspace.path()).unwrap(),
        writable_roots: Vec::<PathBuf>::new(),
        deny: Vec::new(),
        limits: Default::default(),
    };
    let sandbox = CommandSandbox::prepare(&policy)
        .unwrap()
        .with_proxy_confined(proxy.route(), confinement)
        .unwrap();
    assert!(sandbox.proxy().is_some());
    (Arc::new(sandbox), workspace)
}

fn bash(sandbox: &Arc<CommandSandbox>, port: u16, script: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("bash");
    let proxy = format!("http://127.0.0.1:{port}");
    command
        .args(["-c", script])
        .env("PORT", port.to_string())
        .env("HTTP_PROXY", &proxy)
        .env("http_proxy", &proxy)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    sandbox.apply(&mut command);
    command
}

async fn output(mut command: tokio::process::Command) -> std::process::Output {
    tokio::time::timeout(Duration::from_secs(20), command.output())
        .await
        .expect("the command finished in time")
        .expect("the command ran")
}

/// What the command prints for each way out: only the proxy answers.
const WAYS_OUT: &str = r#"
exec 3<>/dev/tcp/127.0.0.1/$PORT || exit 10
printf 'GET http://example.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n' >&3
head -n 1 <&3 | tr -d '\r'
(exec 4<>/dev/tcp/127.0.0.1/$OTHER) 2>/dev/null && echo other-port-reached
(exec 4<>/dev/tcp/127.0.0.2/$PORT) 2>/dev/null && echo second-loopback-reached
(echo x > /dev/udp/127.0.0.1/$OTHER) 2>/dev/null && echo udp-sent
python3 -c '
import errno, socket, urllib.request
print(urllib.request.urlopen("http://example.test/", timeout=10).read().decode())
for args in [(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
             (socket.AF_INET, socket.SOCK_DGRAM, 0),
             (socket.AF_INET6, socket.SOCK_DGRAM, 0),
             (socket.AF_PACKET, socket.SOCK_RAW, 0),
             (socket.AF_UNIX, socket.SOCK_STREAM, 0)]:
    try:
        socket.socket(*args)
        print("made", args)
    except OSError as e:
        print(errno.errorcode[e.errno])
import os
# TCP Fast Open connects without connect(2), past the Landlock port rule.
try:
    socket.socket().sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", int(os.environ["OTHER"])))
    print("fast-open-sent")
except OSError as e:
    print(errno.errorcode[e.errno])
'
"#;

#[tokio::test]
async fn the_proxy_port_reaches_the_proxy_and_no_other_way_out_works() {
    let proxy = FakeProxy::start().unwrap();
    let other = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    other.set_nonblocking(true).unwrap();
    let other_port = other.local_addr().unwrap().port();
    for confinement in confinements() {
        let before = proxy.served();
        let (sandbox, _workspace) = sandbox(&proxy, confinement.clone());
        let mut command = bash(&sandbox, proxy.route().port, WAYS_OUT);
        command.env("OTHER", other_port.to_string());
        let out = output(command).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let expected = "HTTP/1.1 200 OK\nok\nEPERM\nEPERM\nEPERM\nEPERM\nEPERM\nEPERM\n";
        assert_eq!(
            stdout,
            expected,
            "{confinement}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{confinement}: {out:?}");
        assert!(
            other.accept().is_err(),
            "{confinement}: the other port was reached"
        );
        // Two requests (bash's and python's), each through the way this
        // confinement gives.
        let after = proxy.served();
        let served = match confinement {
            NetworkConfinement::Namespace => (before.0 + 2, before.1),
            NetworkConfinement::PortOnly { .. } => (before.0, before.1 + 2),
        };
        assert_eq!(after, served, "{confinement}");
    }
}

#[tokio::test]
async fn curl_goes_through_the_proxy() {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        skip_unless_ci("no curl here");
        return;
    }
    let proxy = FakeProxy::start().unwrap();
    for confinement in confinements() {
        let before = proxy.served();
        let (sandbox, _workspace) = sandbox(&proxy, confinement.clone());
        let script = "curl -sS --max-time 10 http://example.test/";
        let out = output(bash(&sandbox, proxy.route().port, script)).await;
        assert_eq!(out.stdout, b"ok", "{confinement}: {out:?}");
        // The proxy itself counted the request, on the way this
        // confinement gives: the answer came from it, not from elsewhere.
        let after = proxy.served();
        let served = match confinement {
            NetworkConfinement::Namespace => (before.0 + 1, before.1),
            NetworkConfinement::PortOnly { .. } => (before.0, before.1 + 1),
        };
        assert_eq!(after, served, "{confinement}");
    }
}

/// The proxy's port on another address of this machine (127.0.0.2 and,
/// where there is IPv6, ::1), with a listener there: in the namespace it is
/// out of reach; in the port-only fallback Landlock knows ports only, so it
/// is reached, as the module's documentation says.
#[tokio::test]
async fn the_proxys_port_on_another_address_is_out_of_reach_only_in_the_namespace() {
    let proxy = FakeProxy::start().unwrap();
    let port = proxy.route().port;
    let mut others = vec![TcpListener::bind(("127.0.0.2", port)).unwrap()];
    others.extend(TcpListener::bind(("::1", port)));
    for other in &others {
        other.set_nonblocking(true).unwrap();
    }
    let script = "for a in 127.0.0.2 ::1; do (exec 3<>/dev/tcp/$a/$PORT) 2>/dev/null && echo reached $a; done; echo tried";
    for confinement in confinements() {
        let (sandbox, _workspace) = sandbox(&proxy, confinement.clone());
        let out = output(bash(&sandbox, port, script)).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.ends_with("tried\n"), "{confinement}: {out:?}");
        // Accepted by this test's own listeners, not as the shell says.
        let reached: Vec<bool> = others.iter().map(|l| l.accept().is_ok()).collect();
        match confinement {
            NetworkConfinement::Namespace => {
                assert!(!reached.contains(&true), "{confinement}: {stdout}");
            }
            NetworkConfinement::PortOnly { .. } => {
                assert!(reached.iter().all(|r| *r), "{confinement}: {stdout}");
            }
        }
    }
}

#[tokio::test]
async fn a_command_in_the_namespace_sees_only_loopback() {
    if let NetworkConfinement::PortOnly { reason } = network_confinement() {
        skip_unless_ci(&reason);
        return;
    }
    let proxy = FakeProxy::start().unwrap();
    let (sandbox, _workspace) = sandbox(&proxy, NetworkConfinement::Namespace);
    // The user is itself inside; /proc/net/dev lists the namespace's
    // own interfaces.
    let script =
        "readlink /proc/self/ns/net; id -u; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '";
    let out = output(bash(&sandbox, proxy.route().port, script)).await;
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{out:?}");
    assert_ne!(lines[0], ours.to_string_lossy(), "{out:?}");
    assert_eq!(lines[1], uid.to_string());
    assert_eq!(lines[2], "lo");
}

#[tokio::test]
async fn the_exit_code_and_the_signal_of_the_command_are_mirrored() {
    let proxy = FakeProxy::start().unwrap();
    for confinement in confinements() {
        let (sandbox, _workspace) = sandbox(&proxy, confinement.clone());
        let out = output(bash(&sandbox, proxy.route().port, "exit 7")).await;
        assert_eq!(out.status.code(), Some(7), "{confinement}");
        let out = output(bash(&sandbox, proxy.route().port, "kill -TERM $$")).await;
        assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{confinement}");
    }
}

/// Waits until no process runs `words` (within 5 s).
fn assert_gone(words: &[&str], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !running(words).is_empty() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_running(words: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while running(words).is_empty() {
        assert!(Instant::now() < deadline, "{words:?} never started");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test]
async fn nothing_is_left_behind_when_the_group_or_the_keeper_is_killed() {
    if let NetworkConfinement::PortOnly { reason } = network_confinement() {
        skip_unless_ci(&reason);
        return;
    }
    let proxy = FakeProxy::start().unwrap();
    let (sandbox, _workspace) = sandbox(&proxy, NetworkConfinement::Namespace);
    // The group killed: keeper and command both go.
    let sleeper = ["sleep", "303.25"];
    let mut group =
        ProcessGroup::spawn(&mut bash(&sandbox, proxy.route().port, "exec sleep 303.25")).unwrap();
    wait_running(&sleeper);
    let keeper = group.pid();
    assert!(std::path::Path::new(&format!("/proc/{keeper}")).exists());
    group.kill().unwrap();
    let status = group.wait().await.unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert_gone(&sleeper, "the command outlived its killed group");
    // The keeper alone killed: the command follows it.
    let sleeper = ["sleep", "303.5"];
    let mut command = bash(&sandbox, proxy.route().port, "exec sleep 303.5");
    let mut child = command.spawn().unwrap();
    wait_running(&sleeper);
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    assert_gone(&sleeper, "the command outlived its keeper");
    // A command that ends: its keeper ends with it (its parent as this
    // process's `/proc` names it: the keeper, or the init of the
    // command's PID namespace, whose keepers end before it is reaped).
    let script = "read -r _ _ _ ppid _ < /proc/self/stat; echo $ppid";
    let out = output(bash(&sandbox, proxy.route().port, script)).await;
    let keeper = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(!keeper.is_empty() && keeper != "0", "{out:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{keeper}")).exists() {
        assert!(Instant::now() < deadline, "the keeper outlived its command");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_control_message_has_the_kernels_layout() {
    let int = size_of::<libc::c_int>() as u32;
    // SAFETY: CMSG_SPACE is arithmetic.
    assert_eq!(size_of::<OneDescriptor>(), unsafe { libc::CMSG_SPACE(int) }
        as usize);
    // SAFETY: CMSG_DATA on a zeroed header only offsets its pointer.
    let offset = unsafe {
        let message: OneDescriptor = std::mem::zeroed();
        let header = &message.header as *const libc::cmsghdr;
        libc::CMSG_DATA(header).offset_from(header.cast::<u8>())
    };
    assert_eq!(offset as usize, std::mem::offset_of!(OneDescriptor, fd));
}

#[test]
fn the_allowlist_does_not_apply_without_a_sandbox_or_to_a_subagent() {
    let proxy = FakeProxy::start().unwrap();
    let unconfined = CommandSandbox::unconfined().with_proxy(proxy.route());
    assert!(matches!(
        unconfined,
        Err(SandboxError::AllowlistNotApplicable { .. })
    ));
    // The shell's scratch folder goes with it.
    let scratch = tempfile::tempdir().unwrap();
    let shell = CommandSandbox::subagent_shell(scratch.path().join("scratch"));
    let shell = shell.with_proxy(proxy.route());
    assert!(matches!(
        shell,
        Err(SandboxError::AllowlistNotApplicable { .. })
    ));
}

#[test]
fn the_confinement_says_what_it_is() {
    assert!(
        NetworkConfinement::Namespace
            .to_string()
            .contains("namespace")
    );
    assert!(
        forced_port_only()
            .to_string()
            .contains("forced by the test")
    );
}

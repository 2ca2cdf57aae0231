//! The image (issue 55): the runtime stage of `docs/deploy/Dockerfile`, built here
//! without a registry base. No base image can be pulled on the machines that run the
//! tests, so the test stands in for `gcr.io/distroless/cc-debian12:nonroot` with what
//! that base holds (its passwd entries, and the shared libraries `ldd` names for the
//! binary, each of which the base must provide), places what each `COPY` of the stage
//! copies (this test's build of `justonce` for the release binary), and takes the
//! stage's USER, WORKDIR, ENV, VOLUME, EXPOSE, HEALTHCHECK, STOPSIGNAL, ENTRYPOINT
//! and CMD from the Dockerfile. Debian's `buildah` builds it `from scratch`, commits
//! it and pushes it to the tests' own registry; the image pulled back is run from its
//! root filesystem (`podman run` does not work on these machines): read-only but for
//! its volume, chrooted, as the image's user. It must start as that non-root user,
//! answer its healthcheck and `/readyz`, run a guarded call through MCP over HTTP
//! whose retry is replayed under the same key with one refund downstream, and drain
//! on its stop signal. A library, user or file the image lacks makes it fail. And the
//! compose file's two hosts, each a container of the image with the compose file's
//! command, configuration and secrets, share one PostgreSQL journal: a call answered
//! by one is replayed by the other.
//!
//! Skipped where `buildah` is missing or the test is not root (buildah from scratch
//! and chroot need root), but under `CI=true`, which fails instead.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use justonce::__private::{Behaviour, LocalApi, TestRegistry};
use serde_json::{Value, json};

use crate::support::mcp_http::{HttpClient, read_reply};

const DOCKERFILE: &str = include_str!("../../docs/deploy/Dockerfile");
const COMPOSE: &str = include_str!("../../docs/deploy/compose/compose.yaml");
const COMPOSE_CONFIG: &str = include_str!("../../docs/deploy/compose/justonce.toml");
const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The libraries `gcr.io/distroless/cc-debian12` holds (glibc, libgcc, libstdc++,
/// OpenSSL): the binary may need no other, or the Dockerfile's image would not start.
const BASE_LIBRARIES: &[&str] = &[
    "linux-vdso.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libresolv.so.2",
    "libutil.so.1",
    "libgcc_s.so.1",
    "libstdc++.so.6",
    "libssl.so.3",
    "libcrypto.so.3",
];

/// The base's `/etc/passwd` and `/etc/group` (distroless': root, nobody, nonroot).
const BASE_PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\n\
    nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n\
    nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
const BASE_GROUP: &str = "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n";

/// A bound on a hang, not a timing assertion.
const WAIT: Duration = Duration::from_secs(60);

/// The Dockerfile's last stage, as the test reads it.
#[derive(Debug, Default)]
struct RuntimeStage {
    copies: Vec<Copy>,
    user: String,
    workdir: String,
    env: Vec<(String, String)>,
    volumes: Vec<String>,
    exposed: Vec<String>,
    /// `--interval=10s` … then the command's words.
    healthcheck: (Vec<String>, Vec<String>),
    stop_signal: String,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
}

#[derive(Debug)]
struct Copy {
    from_build: bool,
    chown: Option<String>,
    source: String,
    dest: String,
}

/// The instructions of `text`, continuation lines joined, comments dropped.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => pending.push_str(part),
            None => {
                pending.push_str(trimmed);
                let (word, rest) = pending.split_once(' ').unwrap_or((&pending, ""));
                out.push((word.to_ascii_uppercase(), rest.trim().to_owned()));
                pending.clear();
            }
        }
    }
    out
}

fn json_words(instruction: &str, text: &str) -> Vec<String> {
    serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("{instruction} {text}: not the exec (JSON) form: {e}"))
}

/// Parses the last stage of the Dockerfile.
fn runtime_stage(dockerfile: &str) -> RuntimeStage {
    let all = instructions(dockerfile);
    let last_from = all.iter().rposition(|(w, _)| w == "FROM").expect("a FROM");
    let mut stage = RuntimeStage::default();
    for (word, rest) in &all[last_from + 1..] {
        match word.as_str() {
            "COPY" => {
                let mut words: Vec<&str> = rest.split_whitespace().collect();
                let options: Vec<&str> = words
                    .iter()
                    .take_while(|w| w.starts_with("--"))
                    .copied()
                    .collect();
                words.drain(..options.len());
                assert_eq!(words.len(), 2, "COPY {rest}: one source, one destination");
                stage.copies.push(Copy {
                    from_build: options.contains(&"--from=build"),
                    chown: options
                        .iter()
                        .find_map(|o| o.strip_prefix("--chown="))
                        .map(str::to_owned),
                    source: words[0].to_owned(),
                    dest: words[1].to_owned(),
                });
            }
            "USER" => rest.clone_into(&mut stage.user),
            "WORKDIR" => rest.clone_into(&mut stage.workdir),
            "ENV" => {
                let (k, v) = rest.split_once('=').expect("ENV KEY=VALUE");
                stage.env.push((k.to_owned(), v.to_owned()));
            }
            "VOLUME" => stage.volumes.extend(json_words(word, rest)),
            "EXPOSE" => stage
                .exposed
                .extend(rest.split_whitespace().map(str::to_owned)),
            "HEALTHCHECK" => {
                let (options, command) = rest.split_once("CMD ").expect("HEALTHCHECK … CMD [..]");
                stage.healthcheck = (
                    options.split_whitespace().map(str::to_owned).collect(),
                    json_words(word, command),
                );
            }
            "STOPSIGNAL" => rest.clone_into(&mut stage.stop_signal),
            "ENTRYPOINT" => stage.entrypoint = json_words(word, rest),
            "CMD" => stage.cmd = json_words(word, rest),
            other => panic!("the image test does not know {other} in the runtime stage: teach it"),
        }
    }
    stage
}

/// `buildah` with a storage of its own (vfs, under a directory removed afterwards).
struct Buildah {
    bin: PathBuf,
    dir: tempfile::TempDir,
}

impl Buildah {
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.bin);
        command
            .arg("--root")
            .arg(self.dir.path().join("storage"))
            .arg("--runroot")
            .arg(self.dir.path().join("run"))
            .args(["--storage-driver", "vfs"])
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// Runs `buildah ARGS`; its stdout, trimmed.
    fn run(&self, args: &[&str]) -> String {
        let out = self.command(args).output().expect("run buildah");
        assert!(
            out.status.success(),
            "buildah {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for Buildah {
    fn drop(&mut self) {
        let _ = self.command(&["rm", "--all"]).output();
    }
}

/// `buildah`, or `None` (after saying why the test is skipped) where it cannot run:
/// not installed, or not root. Under `CI=true` a panic instead.
fn buildah(test: &str) -> Option<PathBuf> {
    let found = ["/usr/bin/buildah", "/usr/local/bin/buildah"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let why = match (&found, root) {
        (Some(_), true) => return found,
        (None, _) => "no buildah (apt-get install buildah)",
        (Some(_), false) => "not root (buildah from scratch and chroot need root)",
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true and the image cannot be built: {why}");
    }
    eprintln!("skipped ({why}): {test}");
    None
}

/// The shared libraries `ldd` names for `bin`: (name, path; `None` for the vDSO).
fn libraries(bin: &Path) -> Vec<(String, Option<PathBuf>)> {
    let out = Command::new("ldd").arg(bin).output().expect("run ldd");
    assert!(out.status.success(), "ldd {}: {out:?}", bin.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let (name, path) = match line.split_once(" => ") {
                Some((name, rest)) => (name, rest.split_whitespace().next()),
                None => {
                    let first = line.split_whitespace().next()?;
                    let name = Path::new(first).file_name()?.to_str()?;
                    (name, first.starts_with('/').then_some(first))
                }
            };
            Some((name.to_owned(), path.map(PathBuf::from)))
        })
        .collect()
}

fn write(path: &Path, contents: &[u8], mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, contents).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn dir(path: &Path, mode: u32, owner: Option<(u32, u32)>) {
    std::fs::create_dir_all(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    }
}

/// `/a/b` under `root`.
fn inside(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

fn numeric_owner(spec: &str) -> (u32, u32) {
    let (uid, gid) = spec.split_once(':').unwrap_or((spec, spec));
    (
        uid.parse().expect("a numeric --chown uid"),
        gid.parse().expect("a numeric --chown gid"),
    )
}

/// Fills `root` with what the base image holds and what the stage's COPYs copy.
fn stage_files(root: &Path, stage: &RuntimeStage, binary: &Path) {
    write(&root.join("etc/passwd"), BASE_PASSWD.as_bytes(), 0o644);
    write(&root.join("etc/group"), BASE_GROUP.as_bytes(), 0o644);
    dir(&root.join("tmp"), 0o1777, None);
    dir(&root.join("home/nonroot"), 0o700, Some((65532, 65532)));
    // What a container runtime mounts over: the mount points exist in the base.
    dir(&root.join("proc"), 0o555, None);
    dir(&root.join("dev"), 0o755, None);
    for (name, path) in libraries(binary) {
        assert!(
            BASE_LIBRARIES.contains(&name.as_str()),
            "the binary needs {name}, which the Dockerfile's runtime base does not hold"
        );
        if let Some(path) = path {
            let bytes = std::fs::read(&path).unwrap();
            write(&inside(root, path.to_str().unwrap()), &bytes, 0o755);
        }
    }
    for copy in &stage.copies {
        let dest = inside(root, &copy.dest);
        match (copy.from_build, copy.source.as_str()) {
            (true, "/out/usr/local/bin/justonce") => {
                write(&dest, &std::fs::read(binary).unwrap(), 0o755);
            }
            (true, "/out/var/lib/justonce") => {
                // `install -d -m 0700` in the build stage.
                let owner = copy.chown.as_deref().map(numeric_owner);
                dir(&dest, 0o700, owner);
            }
            (false, source) => {
                let bytes = std::fs::read(Path::new(REPO).join(source))
                    .unwrap_or_else(|e| panic!("COPY {source}: {e}"));
                write(&dest, &bytes, 0o644);
            }
            (true, source) => {
                panic!(
                    "the image test does not know what the build stage puts at {source}: teach it"
                )
            }
        }
    }
}

/// The image's user, looked up in its `/etc/passwd` (a name or a uid, `:gid`
/// optional): uid, gid and home.
fn image_user(root: &Path, user: &str) -> (u32, u32, String) {
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).expect("the image's /etc/passwd");
    let (name, group) = user.split_once(':').unwrap_or((user, ""));
    let entry = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 7 && (f[0] == name || f[2] == name))
        .unwrap_or_else(|| panic!("the image's user {user:?} has no entry in its /etc/passwd"));
    let gid = if group.is_empty() { entry[3] } else { group };
    (
        entry[2].parse().unwrap(),
        gid.parse().unwrap(),
        entry[5].to_owned(),
    )
}

/// The pulled image, ready to run from its root filesystem.
struct Image {
    root: PathBuf,
    uid: u32,
    gid: u32,
    workdir: String,
    env: Vec<(String, String)>,
    volumes: Vec<String>,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    healthcheck: Vec<String>,
    stop_signal: String,
}

impl Image {
    /// The image's config (as pulled) over the container's root `root`.
    fn new(root: PathBuf, config: &Value) -> Self {
        let words = |key: &str| -> Vec<String> {
            serde_json::from_value(config[key].clone()).unwrap_or_default()
        };
        let user = config["User"].as_str().unwrap_or("");
        let (uid, gid, home) = image_user(&root, user);
        let mut env: Vec<(String, String)> = words("Env")
            .iter()
            .filter_map(|e| e.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        // What a container runtime adds.
        env.push(("HOME".into(), home));
        env.push((
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ));
        env.push(("HOSTNAME".into(), "image-test".into()));
        let healthcheck: Vec<String> =
            serde_json::from_value(config["Healthcheck"]["Test"].clone()).unwrap_or_default();
        Self {
            uid,
            gid,
            workdir: config["WorkingDir"].as_str().unwrap_or("/").to_owned(),
            env,
            volumes: config["Volumes"]
                .as_object()
                .map(|v| v.keys().cloned().collect())
                .unwrap_or_default(),
            entrypoint: words("Entrypoint"),
            cmd: words("Cmd"),
            healthcheck,
            stop_signal: config["StopSignal"]
                .as_str()
                .unwrap_or("SIGTERM")
                .to_owned(),
            root,
        }
    }

    /// The image's entrypoint with `args`, run as its user from its root filesystem,
    /// read-only but for its volumes, with its environment and `env`.
    fn command(&self, args: &[String], env: &[(&str, &str)]) -> Command {
        // The volumes stay writable: each is a mount of its own before the root is
        // bound read-only (the remount changes the top mount only).
        let script = "set -e; root=$1 wd=$2 uid=$3 gid=$4 volumes=$5; shift 5; \
             for v in $volumes; do mount --bind \"$root$v\" \"$root$v\"; done; \
             mount --rbind \"$root\" \"$root\"; mount -o remount,bind,ro \"$root\"; \
             exec unshare --root=\"$root\" --wd=\"$wd\" --setuid \"$uid\" --setgid \"$gid\" -- \"$@\"";
        let mut command = Command::new("unshare");
        command
            .args([
                "--mount",
                "--propagation",
                "private",
                "--",
                "/bin/sh",
                "-c",
                script,
                "sh",
            ])
            .arg(&self.root)
            .arg(&self.workdir)
            .arg(self.uid.to_string())
            .arg(self.gid.to_string())
            .arg(self.volumes.join(" "))
            .args(&self.entrypoint)
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(env.iter().copied())
            .stdin(Stdio::null());
        command
    }

    fn output(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        self.command(&args, env).output().expect("run the image")
    }

    /// The healthcheck's command, pointed at `port` instead of the one it names, run
    /// in the image: its exit code.
    fn healthcheck(&self, port: u16) -> Option<i32> {
        assert_eq!(self.healthcheck.first().map(String::as_str), Some("CMD"));
        let words: Vec<String> = self.healthcheck[1..]
            .iter()
            .map(|w| w.replace(":8080/", &format!(":{port}/")))
            .collect();
        let (program, args) = words.split_first().expect("a healthcheck command");
        assert_eq!(
            self.entrypoint.first(),
            Some(program),
            "the healthcheck runs the image's own binary (there is no curl or shell)"
        );
        let mut command = self.command(args, &[]);
        let status = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        status.code()
    }
}

/// Builds the runtime stage from scratch and pushes it to `registry`: the image's
/// reference there.
fn build_and_push(buildah: &Buildah, stage: &RuntimeStage, registry: &TestRegistry) -> String {
    let binary = std::env::var_os("JUSTONCE_TEST_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_justonce")),
        PathBuf::from,
    );
    let container = buildah.run(&["from", "scratch"]);
    let root = PathBuf::from(buildah.run(&["mount", &container]));
    stage_files(&root, stage, &binary);
    buildah.run(&["umount", &container]);

    let mut config: Vec<String> = vec![
        "--user".into(),
        stage.user.clone(),
        "--workingdir".into(),
        stage.workdir.clone(),
        "--entrypoint".into(),
        serde_json::to_string(&stage.entrypoint).unwrap(),
        "--cmd".into(),
        serde_json::to_string(&stage.cmd).unwrap(),
        "--healthcheck".into(),
        format!("CMD {}", stage.healthcheck.1.join(" ")),
        "--stop-signal".into(),
        stage.stop_signal.clone(),
    ];
    for option in &stage.healthcheck.0 {
        let (name, value) = option
            .trim_start_matches("--")
            .split_once('=')
            .expect("HEALTHCHECK --option=value");
        config.push(format!("--healthcheck-{name}"));
        config.push(value.to_owned());
    }
    for (key, value) in &stage.env {
        config.push("--env".into());
        config.push(format!("{key}={value}"));
    }
    for volume in &stage.volumes {
        config.push("--volume".into());
        config.push(volume.clone());
    }
    for port in &stage.exposed {
        config.push("--port".into());
        config.push(port.clone());
    }
    let mut args: Vec<&str> = vec!["config"];
    args.extend(config.iter().map(String::as_str));
    args.push(&container);
    buildah.run(&args);
    buildah.run(&[
        "commit",
        "--quiet",
        "--format",
        "docker",
        &container,
        "localhost/justonce:image-test",
    ]);

    let reference = format!("docker://{}/justonce/host:test", registry.address());
    buildah.run(&[
        "push",
        "--quiet",
        "--tls-verify=false",
        "localhost/justonce:image-test",
        &reference,
    ]);
    buildah.run(&["rmi", "--force", "localhost/justonce:image-test"]);
    reference
}

/// A container of the image `reference`, pulled from its registry: the image as a
/// runtime would run it.
fn pull(buildah: &Buildah, reference: &str) -> Image {
    let pulled = buildah.run(&["from", "--quiet", "--tls-verify=false", reference]);
    let root = PathBuf::from(buildah.run(&["mount", &pulled]));
    let inspected: Value =
        serde_json::from_str(&buildah.run(&["inspect", "--type", "container", &pulled])).unwrap();
    let config = &inspected["Docker"]["config"];
    let image = Image::new(root, config);
    assert_ne!(image.uid, 0, "the image runs as a user other than root");
    assert!(
        !image.healthcheck.is_empty(),
        "the healthcheck survived the registry: {config}"
    );
    image
}

/// `GET PATH` on `addr` without a token: the status and the body.
fn probe(addr: SocketAddr, path: &str) -> (u16, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let reply = read_reply(&mut HttpClient::new(addr, None).send_raw(request.as_bytes()));
    (reply.status, reply.body)
}

/// The `Uid:`, `Gid:` and `Groups:` lines of process `pid`.
fn credentials(pid: u32) -> BTreeMap<String, String> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| matches!(*k, "Uid" | "Gid" | "Groups"))
        .map(|(k, v)| {
            (
                k.to_owned(),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            )
        })
        .collect()
}

/// The server the image's CMD starts, on a free loopback port instead of the one it
/// names; killed when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `command` (a `serve` with `--http`, and maybe `--metrics`) in `image`, each
/// listener on a free loopback port instead of the one it names.
fn serve(image: &Image, command: &[String], env: &[(&str, &str)]) -> Served {
    assert_eq!(command[0], "serve", "{command:?}");
    assert!(command.iter().any(|w| w == "--http"), "{command:?}");
    let mut args = command.to_vec();
    for at in 1..args.len() {
        if matches!(args[at - 1].as_str(), "--http" | "--metrics") {
            args[at] = "127.0.0.1:0".into();
        }
    }
    let mut child = image
        .command(&args, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the image's CMD");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let Some(addr) = line
        .trim()
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
    else {
        let _ = child.kill();
        let _ = child.wait();
        let mut log = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut log)
            .unwrap();
        panic!("the image's serve printed no endpoint ({line:?}); its log:\n{log}");
    };
    Served {
        addr: addr.parse().unwrap(),
        child,
    }
}

fn meta(result: &Value, key: &str) -> Value {
    result["_meta"][format!("dev.justonce/{key}")].clone()
}

#[test]
fn the_dockerfiles_runtime_stage_built_from_scratch_runs_as_its_user_and_answers_a_guarded_call_once()
 {
    let test = "the_dockerfiles_runtime_stage_built_from_scratch_runs_as_its_user_and_answers_a_guarded_call_once";
    let Some(bin) = buildah(test) else {
        return;
    };
    let Some(registry) = TestRegistry::start(test) else {
        return;
    };
    let stage = runtime_stage(DOCKERFILE);
    let buildah = Buildah {
        bin,
        dir: tempfile::tempdir().unwrap(),
    };
    let image = pull(&buildah, &build_and_push(&buildah, &stage, &registry));

    // What an operator mounts: a tool of the repository's and the HTTP config that
    // lets it reach the payments API (the test's, on this machine's loopback).
    let payments = LocalApi::start().unwrap();
    payments.script([Behaviour::ApplyThenDrop]);
    let mounted = inside(&image.root, "/run/justonce");
    let refund = justonce::__private::EXAMPLE_TOOLS
        .iter()
        .find(|(name, _)| *name == "refund")
        .expect("the refund example tool")
        .1;
    write(&mounted.join("tools/refund.wasm"), refund, 0o644);
    mount_http_config(&image, &payments);
    let env = [
        ("JUSTONCE_TOOLS", "/run/justonce/tools"),
        ("JUSTONCE_HTTP_CONFIG", "/run/justonce/http.json"),
    ];

    // A token, made with the image itself, in its volume.
    let added = image.output(&["token", "add", "agent"], &env);
    assert!(added.status.success(), "token add in the image: {added:?}");
    let token = String::from_utf8(added.stdout).unwrap().trim().to_owned();

    let served = serve(&image, &image.cmd, &env);
    let pid = served.child.id();
    let ids = credentials(pid);
    let (uid, gid) = (image.uid.to_string(), image.gid.to_string());
    assert_eq!(ids["Uid"], [uid.as_str(); 4].join(" "), "{ids:?}");
    assert_eq!(ids["Gid"], [gid.as_str(); 4].join(" "), "{ids:?}");
    assert!(
        ids["Groups"].is_empty() || ids["Groups"] == gid,
        "no other group: {ids:?}"
    );
    assert_eq!(probe(served.addr, "/readyz"), (200, "ok\n".to_owned()));
    assert_eq!(image.healthcheck(served.addr.port()), Some(0), "healthy");

    // The agent's call: the refund lands and its response is lost; the host retries
    // under the same key within the call and answers. Then the agent retries.
    let args = json!({ "order_id": 4417, "amount_cents": 1299 });
    let conversation = json!({ "_meta": { "dev.justonce/conversation": "order-4417" } });
    let mut agent = HttpClient::new(served.addr, Some(token));
    let first = agent
        .call("refund", args.clone(), conversation.clone())
        .tool_result();
    let retry = agent
        .call("refund", args, conversation.clone())
        .tool_result();
    assert_eq!(meta(&first, "replayed"), false, "{first}");
    assert_eq!(meta(&retry, "replayed"), true, "{retry}");
    assert_eq!(meta(&retry, "key"), meta(&first, "key"));
    assert_eq!(retry["structuredContent"], first["structuredContent"]);
    let requests = payments.requests();
    assert_eq!(
        requests.len(),
        2,
        "the lost response was retried once: {requests:?}"
    );
    assert!(
        requests[0].key.is_some() && requests[0].key == requests[1].key,
        "both attempts carried one key: {requests:?}"
    );
    assert_eq!(payments.applied().len(), 1, "one refund");
    assert_eq!(
        first["structuredContent"]["refund_id"],
        payments.applied()[0].id.as_str()
    );
    // The opposite case: another order is another refund.
    let other = agent
        .call(
            "refund",
            json!({ "order_id": 4418, "amount_cents": 1299 }),
            conversation,
        )
        .tool_result();
    assert_eq!(meta(&other, "replayed"), false);
    assert_ne!(meta(&other, "key"), meta(&first, "key"));
    assert_eq!(payments.applied().len(), 2);

    // The journal is the image's user's, in its volume.
    let db = inside(&image.root, "/var/lib/justonce/state.db");
    assert_eq!(
        std::fs::metadata(&db).map(|m| m.uid()).ok(),
        Some(image.uid)
    );

    // The image's stop signal drains and exits 0; the healthcheck then says unhealthy.
    let mut served = served;
    let signal = image.stop_signal.trim_start_matches("SIG");
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = served.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the image's serve did not stop on its stop signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut log = String::new();
    served
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert_eq!(status.code(), Some(0), "drained: {log}");
    assert!(log.contains("drained"), "{log}");
    // Read-only but for its volume, the image writes everything it keeps there.
    assert!(
        !log.contains("Read-only file system"),
        "the image writes outside its volume: {log}"
    );
    assert_eq!(image.healthcheck(served.addr.port()), Some(1), "unhealthy");
}

/// The HTTP config that lets `refund` reach `payments`, written into the container
/// (what an operator mounts) at `/run/justonce/http.json`.
fn mount_http_config(image: &Image, payments: &LocalApi) {
    write(
        &inside(&image.root, "/run/justonce/http.json"),
        json!({ "services": { "payments": payments.url() }, "allow": { "refund": [payments.url()] } })
            .to_string()
            .as_bytes(),
        0o644,
    );
}

/// The compose file's `command` (the hosts' one).
fn compose_command() -> Vec<String> {
    let line = COMPOSE
        .lines()
        .find_map(|l| l.trim().strip_prefix("command:"))
        .expect("compose.yaml has a command");
    serde_json::from_str(line.trim()).expect("the command is a JSON array")
}

#[test]
fn the_compose_files_two_hosts_share_one_postgresql_journal_and_one_replays_the_others_call() {
    let test =
        "the_compose_files_two_hosts_share_one_postgresql_journal_and_one_replays_the_others_call";
    let Some(bin) = buildah(test) else {
        return;
    };
    let Some(cluster) = justonce::__private::postgres_testing::cluster(test) else {
        return;
    };
    let Some(database) = cluster.password_login(&cluster.database()) else {
        eprintln!("skipped (no password login on the test cluster): {test}");
        return;
    };
    let Some(registry) = TestRegistry::start(test) else {
        return;
    };
    let buildah = Buildah {
        bin,
        dir: tempfile::tempdir().unwrap(),
    };
    let reference = build_and_push(&buildah, &runtime_stage(DOCKERFILE), &registry);

    // The secrets as compose/secrets/README makes them: the tokens file with the
    // binary, both owned by root with mode 0644.
    let secrets = tempfile::tempdir().unwrap();
    let tokens_file = secrets.path().join("tokens.json");
    let added = crate::support::cli::justonce_command(None)
        .args(["token", "add", "agent", "--tokens"])
        .arg(&tokens_file)
        .output()
        .unwrap();
    assert!(added.status.success(), "{added:?}");
    let token = String::from_utf8(added.stdout).unwrap().trim().to_owned();
    let tokens = std::fs::read(&tokens_file).unwrap();
    let password = format!("{}\n", justonce::__private::postgres_testing::PASSWORD);

    let payments = LocalApi::start().unwrap();
    let command = compose_command();
    let hosts: Vec<(Image, Served)> = ["web-1", "web-2"]
        .into_iter()
        .map(|name| {
            let image = pull(&buildah, &reference);
            write(
                &inside(&image.root, "/etc/justonce/justonce.toml"),
                COMPOSE_CONFIG.as_bytes(),
                0o644,
            );
            write(
                &inside(&image.root, "/run/secrets/tokens.json"),
                &tokens,
                0o644,
            );
            write(
                &inside(&image.root, "/run/secrets/db-password"),
                password.as_bytes(),
                0o644,
            );
            mount_http_config(&image, &payments);
            // JUSTONCE_DB stands in for the compose network's `postgres` (the URL of
            // the configuration without its password, on the test's server).
            let env = [
                ("JUSTONCE_HOST_NAME", name),
                ("JUSTONCE_DB", database.as_str()),
                ("JUSTONCE_HTTP_CONFIG", "/run/justonce/http.json"),
            ];
            let served = serve(&image, &command, &env);
            assert_eq!(
                probe(served.addr, "/readyz"),
                (200, "ok\n".to_owned()),
                "{name}"
            );
            (image, served)
        })
        .collect();

    let args = json!({ "order_id": 4417, "amount_cents": 1299 });
    let conversation = json!({ "_meta": { "dev.justonce/conversation": "order-4417" } });
    let on = |host: usize| HttpClient::new(hosts[host].1.addr, Some(token.clone()));
    let first = on(0)
        .call("refund", args.clone(), conversation.clone())
        .tool_result();
    let retry = on(1)
        .call("refund", args, conversation.clone())
        .tool_result();
    assert_eq!(meta(&first, "replayed"), false, "{first}");
    assert_eq!(
        meta(&retry, "replayed"),
        true,
        "web-2 answers web-1's call: {retry}"
    );
    assert_eq!(meta(&retry, "key"), meta(&first, "key"));
    assert_eq!(retry["structuredContent"], first["structuredContent"]);
    assert_eq!(payments.applied().len(), 1, "one refund");
    // The opposite case: another order on web-2 is another refund.
    let other = on(1)
        .call(
            "refund",
            json!({ "order_id": 4418, "amount_cents": 1299 }),
            conversation,
        )
        .tool_result();
    assert_eq!(meta(&other, "replayed"), false, "{other}");
    assert_eq!(payments.applied().len(), 2);
    let keys: Vec<Option<String>> = payments.requests().into_iter().map(|r| r.key).collect();
    assert!(keys[0].is_some() && keys[0] != keys[1], "{keys:?}");
}

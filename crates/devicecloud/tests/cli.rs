//! The binary as users run it (docs/operations.md): admin commands print JSON, `serve` prints one
//! `listening …` line with the chosen ports, a port in use fails naming its variable, settings
//! come from file < environment < flags, the TLS listener starts only with usable files, JSON
//! logs name every request with its id, SIGTERM stops the service cleanly, and one SQLite store
//! serves one process.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_devicecloud");

struct Dir(std::path::PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let path = std::env::temp_dir().join(format!("dc-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Dir(path)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn command(dir: &Dir) -> Command {
    let mut c = Command::new(BIN);
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("DEVICECLOUD_DATA_DIR", &dir.0)
        .env("DEVICECLOUD_LOG", "warn");
    c
}

fn admin(dir: &Dir, args: &[&str]) -> Value {
    let out = command(dir).arg("admin").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "admin {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Starts `serve` and returns the child and its start line.
fn serve(mut command: Command) -> (Child, String) {
    let mut child = command
        .arg("serve")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line.trim().to_string())
}

fn http_addr(line: &str) -> String {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("http="))
        .unwrap_or_else(|| panic!("no http= in {line:?}"))
        .to_string()
}

/// A one-shot HTTP/1.1 form POST over a plain socket; returns the whole answer.
fn post_form(addr: &str, path: &str, form: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// A one-shot HTTP/1.1 GET with a bearer token over a plain socket; returns the whole answer.
fn get_with_token(addr: &str, path: &str, token: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// An MQTT 3.1.1 CONNECT over a plain socket; returns the 4-byte CONNACK.
fn mqtt_connect(addr: &str, user: &str, password: &str) -> [u8; 4] {
    use std::io::{Read, Write};
    let field = |s: &str| {
        let mut v = (s.len() as u16).to_be_bytes().to_vec();
        v.extend_from_slice(s.as_bytes());
        v
    };
    let mut body = field("MQTT");
    body.extend_from_slice(&[4, 0b1100_0010, 0, 30]);
    for s in ["demo-test", user, password] {
        body.extend(field(s));
    }
    let mut packet = vec![0x10, body.len() as u8];
    packet.extend(body);
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(&packet).unwrap();
    let mut ack = [0u8; 4];
    stream.read_exact(&mut ack).unwrap();
    ack
}

fn terminate(child: &mut Child) -> std::process::ExitStatus {
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    for _ in 0..200 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    panic!("serve did not stop within 10 s of SIGTERM");
}

#[test]
fn admin_commands_print_json_and_the_accounts_work() {
    let dir = Dir::new("admin");
    let client = admin(&dir, &["create-client", "--name", "integration"]);
    assert_eq!(
        client.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["client_id", "client_secret"]
    );
    let user = admin(
        &dir,
        &[
            "create-user",
            "--username",
            "ops@example.com",
            "--password",
            "long-password",
            "--admin",
        ],
    );
    assert_eq!(
        user.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["id_user", "username"]
    );
    assert_eq!(user["username"], "ops@example.com");

    let mut c = command(&dir);
    c.env("DEVICECLOUD_HTTP_ADDR", "127.0.0.1:0")
        .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0");
    let (mut child, line) = serve(c);
    assert!(line.starts_with("listening http=127.0.0.1:"), "{line}");
    let addr = http_addr(&line);
    assert!(
        !addr.ends_with(":0"),
        "port 0 must be replaced by the chosen port: {line}"
    );

    // A second account created while serve runs is usable at once.
    admin(
        &dir,
        &[
            "create-user",
            "--username",
            "late@example.com",
            "--password",
            "long-password",
        ],
    );
    let form = format!(
        "grant_type=password&client_id={}&client_secret={}&username=late%40example.com&password=long-password",
        client["client_id"].as_str().unwrap(),
        client["client_secret"].as_str().unwrap()
    );
    let answer = post_form(&addr, "/oauth2/token", &form);
    assert!(answer.starts_with("HTTP/1.1 200"), "token answer: {answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap_or("")).unwrap();
    assert_eq!(body["token_type"], "Bearer");
    assert!(terminate(&mut child).success(), "serve must exit 0 on SIGTERM");
}

#[test]
fn duplicate_user_fails_with_a_message() {
    let dir = Dir::new("dup");
    admin(
        &dir,
        &[
            "create-user",
            "--username",
            "a@example.com",
            "--password",
            "long-password",
        ],
    );
    let out = command(&dir)
        .args([
            "admin",
            "create-user",
            "--username",
            "A@example.com",
            "--password",
            "other-password",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
}

#[test]
fn create_user_takes_the_password_from_stdin_and_checks_its_length() {
    use std::io::Write;
    let dir = Dir::new("passwords");
    let create = |args: &[&str], stdin: &str| {
        let mut child = command(&dir)
            .args(["admin", "create-user"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    // The rules, and the words, of the API and the dashboard.
    let short = create(&["--username", "a@example.com", "--password", "x"], "");
    assert!(!short.status.success());
    let said = String::from_utf8_lossy(&short.stderr).to_string();
    assert!(
        said.contains("Password should contain at least 8 characters."),
        "{said}"
    );
    let short = create(&["--username", "a@example.com"], "1234567\n");
    assert!(!short.status.success());
    let long = "x".repeat(1025);
    let long = create(&["--username", "a@example.com", "--password", &long], "");
    let said = String::from_utf8_lossy(&long.stderr).to_string();
    assert!(
        said.contains("Password should contain at most 1024 characters."),
        "{said}"
    );
    let blank = create(&["--username", " ", "--password", "long-enough"], "");
    let said = String::from_utf8_lossy(&blank.stderr).to_string();
    assert!(said.contains("Username cannot be blank."), "{said}");
    let made = create(&["--username", "a@example.com"], "from-standard-input\n");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let client = admin(&dir, &["create-client", "--name", "c"]);

    let mut c = command(&dir);
    c.env("DEVICECLOUD_HTTP_ADDR", "127.0.0.1:0")
        .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0");
    let (mut child, line) = serve(c);
    let form = format!(
        "grant_type=password&client_id={}&client_secret={}&username=a%40example.com&password=from-standard-input",
        client["client_id"].as_str().unwrap(),
        client["client_secret"].as_str().unwrap()
    );
    let answer = post_form(&http_addr(&line), "/oauth2/token", &form);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(terminate(&mut child).success());
}

#[test]
fn what_serve_writes_in_the_data_dir_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let parent = Dir::new("modes");
    let data = Dir(parent.0.join("data"));
    let mode = |name: &str| std::fs::metadata(data.0.join(name)).unwrap().permissions().mode() & 0o777;
    let run = || {
        let mut c = command(&data);
        c.env("DEVICECLOUD_HTTP_ADDR", "127.0.0.1:0")
            .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0");
        let (mut child, line) = serve(c);
        assert!(line.starts_with("listening"), "{line}");
        assert!(terminate(&mut child).success());
    };
    run();
    assert_eq!(mode(""), 0o700, "the data dir");
    for name in ["devicecloud.db", "secret.key", "signing.key"] {
        assert_eq!(mode(name), 0o600, "{name}");
    }
    for entry in std::fs::read_dir(&data.0).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        assert_eq!(mode(&name) & 0o077, 0, "{name} is readable by others");
    }
    // A store an older version left readable is tightened at start.
    std::fs::set_permissions(data.0.join("devicecloud.db"), std::fs::Permissions::from_mode(0o644)).unwrap();
    run();
    assert_eq!(mode("devicecloud.db"), 0o600);
    let backup = parent.0.join("copy.db");
    admin(&data, &["backup", "--to", backup.to_str().unwrap()]);
    let backup_mode = std::fs::metadata(&backup).unwrap().permissions().mode() & 0o777;
    assert_eq!(backup_mode, 0o600);
}

#[test]
fn a_port_in_use_names_the_variable() {
    let dir = Dir::new("port");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = command(&dir)
        .env("DEVICECLOUD_HTTP_ADDR", &addr)
        .arg("serve")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("DEVICECLOUD_HTTP_ADDR={addr}")),
        "stderr: {stderr}"
    );
}

/// One SQLite store serves one process: a second `serve` on it stops with a message that says
/// so, and once the first has stopped (here: killed) the store serves again.
#[test]
fn a_second_serve_on_one_sqlite_store_refuses_to_start() {
    let dir = Dir::new("second");
    let listen_anywhere = |mut c: Command| {
        c.env("DEVICECLOUD_HTTP_ADDR", "127.0.0.1:0")
            .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0");
        c
    };
    let (mut first, line) = serve(listen_anywhere(command(&dir)));
    assert!(line.starts_with("listening"), "{line}");
    let mut second = listen_anywhere(command(&dir))
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: a second server that does start would otherwise run until killed.
    let mut status = None;
    for _ in 0..100 {
        status = second.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let Some(status) = status else {
        second.kill().unwrap();
        panic!("a second serve started on the same SQLite store");
    };
    assert!(!status.success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("another devicecloud serve is already running on the SQLite store"),
        "stderr: {stderr}"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    let (mut again, line) = serve(listen_anywhere(command(&dir)));
    assert!(
        line.starts_with("listening"),
        "a killed server leaves no lock behind: {line}"
    );
    terminate(&mut again);
}

#[test]
fn environment_beats_file_and_flags_beat_environment() {
    let dir = Dir::new("settings");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().to_string();
    let config = dir.0.join("devicecloud.toml");
    std::fs::write(&config, format!("http_addr = \"{busy}\"\n")).unwrap();

    // File alone: the busy port is used and refused.
    let out = command(&dir)
        .arg("--config")
        .arg(&config)
        .arg("serve")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains(&busy));

    // Environment wins over the file.
    let mut c = command(&dir);
    // (MQTT on a free port too: the default 1883 may be taken on the machine.)
    c.arg("--config")
        .arg(&config)
        .env("DEVICECLOUD_HTTP_ADDR", "127.0.0.1:0")
        .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0");
    let (mut child, line) = serve(c);
    assert_ne!(http_addr(&line), busy);
    terminate(&mut child);

    // A flag wins over the environment.
    let mut c = command(&dir);
    c.env("DEVICECLOUD_HTTP_ADDR", &busy)
        .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0")
        .args(["--http-addr", "127.0.0.1:0"]);
    let (mut child, line) = serve(c);
    assert_ne!(http_addr(&line), busy);
    terminate(&mut child);

    // Unknown keys in the file are refused rather than ignored.
    std::fs::write(&config, "htp_addr = \"127.0.0.1:0\"\n").unwrap();
    let out = command(&dir)
        .arg("--config")
        .arg(&config)
        .arg("serve")
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn the_tls_listener_starts_beside_the_plain_one_or_names_what_it_lacks() {
    let dir = Dir::new("tls");
    let (cert, key) = (dir.0.join("cert.pem"), dir.0.join("key.pem"));
    let tls = |cert: &std::path::Path, key: Option<&std::path::Path>| {
        let mut c = command(&dir);
        c.env("DEVICECLOUD_HTTP_ADDR", "127.0.0.1:0")
            .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0")
            .env("DEVICECLOUD_MQTT_TLS_ADDR", "127.0.0.1:0")
            .env("DEVICECLOUD_MQTT_TLS_CERT", cert);
        if let Some(key) = key {
            c.env("DEVICECLOUD_MQTT_TLS_KEY", key);
        }
        c
    };
    let fails = |mut c: Command| {
        let out = c.arg("serve").output().unwrap();
        assert!(!out.status.success(), "serve must refuse to start");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };

    // An address without a key: the missing setting is named.
    let stderr = fails(tls(&cert, None));
    assert!(stderr.contains("DEVICECLOUD_MQTT_TLS_KEY"), "stderr: {stderr}");
    // Files that are not there: the file is named.
    let stderr = fails(tls(&cert, Some(&key)));
    assert!(stderr.contains(&cert.display().to_string()), "stderr: {stderr}");

    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    let (mut child, line) = serve(tls(&cert, Some(&key)));
    let mqtts = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("mqtts="))
        .unwrap_or_else(|| panic!("no mqtts= in {line:?}"));
    assert!(line.contains(" mqtt=127.0.0.1:"), "the plain listener stays: {line}");
    assert!(mqtts.starts_with("127.0.0.1:") && !mqtts.ends_with(":0"), "{line}");
    assert!(terminate(&mut child).success(), "serve must exit 0 on SIGTERM");
}

#[test]
fn demo_prints_credentials_that_work() {
    let dir = Dir::new("demo");
    let mut child = command(&dir)
        .env("DEVICECLOUD_HTTP_ADDR", "127.0.0.1:0")
        .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0")
        .arg("demo")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let done = line.contains("stop with Ctrl-C");
        printed.push(line);
        if done {
            break;
        }
    }
    let text = printed.join("\n");
    let addr = http_addr(&printed[0]);
    let value = |key: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
            .to_string()
    };
    let form = format!(
        "grant_type=password&client_id={}&client_secret={}&username=admin%40devicecloud.demo&password=demo-password",
        value("client_id="),
        value("client_secret=")
    );
    let answer = post_form(&addr, "/oauth2/token", &form);
    assert!(answer.starts_with("HTTP/1.1 200"), "token answer: {answer}");
    assert!(
        text.contains(&format!("curl -s 'http://{addr}/api/v2/group/index?sort=label'")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "dashboard    http://{addr}/  (sign in as admin@devicecloud.demo / demo-password)"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "curl -s -g 'http://{addr}/api/v2/data-downsampled?filter[id_group]="
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("API docs     http://{addr}/api/docs  ")),
        "{text}"
    );
    let docs = get_with_headers(&addr, "/api/docs", "");
    assert!(docs.starts_with("HTTP/1.1 200"), "{docs}");

    // The printed ping line reaches a simulated gateway of the demo fleet and gets its pong.
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap_or("")).unwrap();
    let token = body["access_token"].as_str().unwrap();
    let ping_path = text
        .split(&format!("curl -s 'http://{addr}"))
        .find_map(|rest| rest.split('\'').next().filter(|p| p.ends_with("/ping")))
        .unwrap_or_else(|| panic!("no ping line in {text}"))
        .to_string();
    let mut pinged = String::new();
    for _ in 0..100 {
        pinged = get_with_token(&addr, &ping_path, token);
        if pinged.starts_with("HTTP/1.1 200") {
            break;
        }
        // The fleet connects right after the service starts.
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(pinged.starts_with("HTTP/1.1 200"), "ping answer: {pinged}");
    assert!(
        pinged.ends_with(r#"{"status":200,"payload":{"data":"pong","result":"success"}}"#),
        "{pinged}"
    );

    // The printed downsampled line answers with the fleet's data (curl reads it with -g, so
    // the brackets are not taken as a URL pattern).
    let downsampled_path = text
        .split(&format!("curl -s -g 'http://{addr}"))
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap_or_else(|| panic!("no downsampled line in {text}"))
        .to_string();
    let mut downsampled = String::new();
    for _ in 0..100 {
        downsampled = get_with_token(&addr, &downsampled_path, token);
        if downsampled.contains("\"count_val\"") {
            break;
        }
        // The fleet's first measurements arrive shortly after it connects.
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        downsampled.starts_with("HTTP/1.1 200"),
        "downsampled answer: {downsampled}"
    );
    assert!(downsampled.contains("\"count_val\""), "{downsampled}");

    // The printed gateway credentials are accepted over MQTT (CONNACK return code 0).
    let mqtt = printed[0]
        .split_whitespace()
        .find_map(|w| w.strip_prefix("mqtt="))
        .unwrap()
        .to_string();
    let device_token = text
        .split("device token ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert_eq!(mqtt_connect(&mqtt, "DEMO-GW-1", &device_token), [0x20, 2, 0, 0]);
    assert_eq!(mqtt_connect(&mqtt, "DEMO-GW-1", "wrong"), [0x20, 2, 0, 4]);
    assert!(terminate(&mut child).success());
}

#[test]
fn simulate_provisions_a_fleet_through_the_api_and_connects_it() {
    let dir = Dir::new("simulate");
    let client = admin(&dir, &["create-client", "--name", "sim"]);
    admin(
        &dir,
        &[
            "create-user",
            "--username",
            "sim@example.com",
            "--password",
            "long-password",
            "--admin",
        ],
    );
    let mut c = command(&dir);
    c.env("DEVICECLOUD_HTTP_ADDR", "127.0.0.1:0")
        .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0");
    let (mut child, line) = serve(c);
    let addr = http_addr(&line);
    let mqtt = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("mqtt="))
        .unwrap()
        .to_string();
    let form = format!(
        "grant_type=password&client_id={}&client_secret={}&username=sim%40example.com&password=long-password",
        client["client_id"].as_str().unwrap(),
        client["client_secret"].as_str().unwrap()
    );
    let answer = post_form(&addr, "/oauth2/token", &form);
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap_or("")).unwrap();
    let token = body["access_token"].as_str().unwrap();
    let out = command(&dir)
        .args([
            "simulate",
            "--api",
            &format!("http://{addr}"),
            "--token",
            token,
            "--gateways",
            "3",
        ])
        .args(["--rate", "5", "--duration", "3", "--mqtt", &mqtt])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("provisioned 3 gateways in group "), "{stdout}");
    // The progress line shows the whole fleet connected and measuring.
    let last = stdout.lines().rfind(|l| l.starts_with("t=")).unwrap_or_default();
    assert!(last.contains("connected 3/3"), "{stdout}");
    let measurements: u64 = last
        .split("measurements ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(measurements > 0, "{stdout}");
    assert!(terminate(&mut child).success());
}

/// A one-shot HTTP/1.1 GET with extra header lines over a plain socket; returns the whole answer.
fn get_with_headers(addr: &str, path: &str, headers: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// The value of a header in a whole HTTP answer (names compared case-insensitively).
fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    let head = answer.split("\r\n\r\n").next().unwrap_or_default();
    head.lines().skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn json_logs_name_every_request_with_its_id() {
    let dir = Dir::new("json-logs");
    let mut c = command(&dir);
    c.env("DEVICECLOUD_HTTP_ADDR", "127.0.0.1:0")
        .env("DEVICECLOUD_MQTT_ADDR", "127.0.0.1:0")
        .env("DEVICECLOUD_LOG", "info")
        .env("DEVICECLOUD_LOG_FORMAT", "json");
    let (mut child, line) = serve(c);
    let addr = http_addr(&line);

    let answer = get_with_headers(&addr, "/healthz", "X-Request-Id: test-123\r\n");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(header(&answer, "x-request-id"), Some("test-123"), "{answer}");
    // An id with a space in it is not taken: a fresh one (a UUID) is made and answered.
    let answer = get_with_headers(&addr, "/api/v2/group/index", "X-Request-Id: two words\r\n");
    let made = header(&answer, "x-request-id").unwrap_or_else(|| panic!("no id: {answer}"));
    assert!(made.len() == 36 && made.matches('-').count() == 4, "{made}");
    // Errors carry it too.
    let answer = get_with_headers(&addr, "/no/such/page", "");
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(header(&answer, "x-request-id").is_some(), "{answer}");

    assert!(terminate(&mut child).success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    let requests: Vec<&Value> = lines.iter().filter(|l| l["span"]["name"] == "request").collect();
    let health: Vec<&&Value> = requests
        .iter()
        .filter(|l| l["span"]["request_id"] == "test-123")
        .collect();
    assert_eq!(health.len(), 1, "one line for the request: {stderr}");
    let health = health[0];
    assert_eq!(health["level"], "INFO");
    assert_eq!(health["span"]["route"], "/healthz");
    assert_eq!(health["span"]["method"], "GET");
    assert_eq!(health["status"], 200);
    assert!(health["duration_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{health}");
    assert!(health["timestamp"].is_string(), "{health}");

    let groups = requests
        .iter()
        .find(|l| l["span"]["request_id"] == made)
        .unwrap_or_else(|| panic!("no line for {made}: {stderr}"));
    assert_eq!(groups["span"]["route"], "/api/v2/group/index");
    assert_eq!(groups["status"], 401);
    assert!(
        requests
            .iter()
            .any(|l| l["span"]["route"] == "unmatched" && l["status"] == 404),
        "{stderr}"
    );
}

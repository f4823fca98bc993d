//! Starting the real binary from a Kafka `server.properties`: Kafka's own file starts the
//! broker (keys with no meaning here are announced once), a Kafka key this broker does not
//! implement stops start-up with its reason.

#[allow(dead_code)]
mod common;

/// Kafka 4.x's KRaft `config/server.properties` (`tests/fixtures`, the same file the config unit
/// tests load), as shipped except for the two addresses a test must own: the listener port (any
/// free one) and `log.dirs` (a fresh directory).
fn kafka_server_properties(data: &std::path::Path) -> String {
    let shipped = include_str!("fixtures/kafka-4.4-server.properties");
    let swap = |text: String, from: &str, to: &str| {
        assert!(text.contains(from), "the fixture has {from}");
        text.replace(from, to)
    };
    let text = swap(
        shipped.to_string(),
        "listeners=PLAINTEXT://:9092,",
        "listeners=PLAINTEXT://127.0.0.1:0,",
    );
    swap(
        text,
        "log.dirs=/tmp/kraft-combined-logs\n",
        &format!("log.dirs={}\n", data.display()),
    )
}

/// Run `ringleader serve --config <file>` with no --listen or --data-dir: both come from the
/// file. Returns the child and its stderr lines as they arrive.
fn serve_with_config(
    config: &std::path::Path,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ringleader"))
        .args(["serve", "--cores", "1", "--config"])
        .arg(config)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn ringleader");
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

#[test]
fn kafkas_own_server_properties_starts_the_broker() {
    let dir = common::data_dir("kafka-props");
    let data = dir.join("kraft-combined-logs");
    let config = dir.join("server.properties");
    std::fs::write(&config, kafka_server_properties(&data)).unwrap();
    let (mut child, lines) = serve_with_config(&config);
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let addr = loop {
        let line = lines
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
            .unwrap_or_else(|_| panic!("no 'listening on' line:\n{}", seen.join("\n")));
        if let Some(rest) = line.split("listening on ").nth(1) {
            let addr = rest.split_whitespace().next().unwrap_or("");
            break addr.parse::<std::net::SocketAddr>().expect("an address");
        }
        seen.push(line);
    };
    // The listener and the data directory are the file's.
    assert_eq!(addr.ip().to_string(), "127.0.0.1");
    assert!(data.join("meta.properties").exists(), "data under log.dirs");
    let mut c = common::Client::connect(addr);
    common::create_topic(&mut c, "from-kafka-config", 1);
    // Each key with no meaning here is announced once, naming where it came from.
    let announced: Vec<&String> = seen
        .iter()
        .filter(|l| l.contains("config key accepted, has no effect here"))
        .collect();
    // 14 since the listeners of issue 18: listener.security.protocol.map is served now.
    assert_eq!(announced.len(), 14, "{announced:#?}");
    for key in [
        "process.roles",
        "num.io.threads",
        "transaction.state.log.min.isr",
    ] {
        let n = announced
            .iter()
            .filter(|l| l.contains(&format!("key={key} ")))
            .count();
        assert_eq!(n, 1, "{key} announced once: {announced:#?}");
    }
    assert!(
        announced[0].contains("server.properties:3"),
        "{}",
        announced[0]
    );
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_kafka_key_not_implemented_stops_start_up_with_its_reason() {
    let dir = common::data_dir("kafka-props-refused");
    let data = dir.join("data");
    let config = dir.join("server.properties");
    // A JKS keystore's password: only unencrypted PEM is read here (issue 18's TLS).
    let text = kafka_server_properties(&data) + "ssl.keystore.password=changeit\n";
    std::fs::write(&config, text).unwrap();
    let (mut child, lines) = serve_with_config(&config);
    // Bounded: a key that stops being refused would otherwise leave a serving broker and a test
    // (and CI) waiting for it forever.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("the broker started (or hung) instead of refusing the key");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // Every line: the reader thread ends (and the channel closes) at the pipe's end.
    let out: Vec<String> = lines.iter().collect();
    assert_eq!(status.code(), Some(2), "{out:#?}");
    assert!(
        out.iter().any(|l| l.contains(
            "config key \"ssl.keystore.password\" (from ") && l.contains(
            "server.properties:27) is a Kafka broker setting Ringleader does not support: only PEM keystores are read here")),
        "{out:#?}"
    );
    assert!(
        !data.exists(),
        "nothing written before the config is refused"
    );
    std::fs::remove_dir_all(&dir).ok();
}

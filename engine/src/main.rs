//! The `ringleader` binary: `ringleader serve` runs the broker.

use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<mimalloc::MiMalloc> =
    wire::alloc::GuardedAlloc(mimalloc::MiMalloc);

/// `--features system-alloc`: malloc itself, for heap profilers that interpose it (heaptrack).
#[cfg(feature = "system-alloc")]
#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<std::alloc::System> =
    wire::alloc::GuardedAlloc(std::alloc::System);

#[derive(Parser)]
#[command(
    name = "ringleader",
    version,
    about = "A Kafka-compatible group coordinator broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker.
    Serve {
        /// Address to accept Kafka clients on. Default: the PLAINTEXT entry of `listeners` when
        /// the config sets it, else 127.0.0.1:9092.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Where topics, group state and offsets are kept. Default: `log.dirs` when the config
        /// sets it, else ./data.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Number of shards (one pinned executor each). Default: every available core.
        #[arg(long)]
        cores: Option<usize>,
        /// A Kafka-style .properties file (Kafka key names and defaults).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override one config key: --set name=value (repeatable; applied after --config).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        sets: Vec<String>,
        /// Serve Prometheus metrics (latency histograms, counters) on this address. Off by default.
        #[arg(long)]
        metrics_listen: Option<SocketAddr>,
        /// `always` (the default): nothing is acknowledged before it is fdatasynced. `never` is
        /// for benchmarks only: log writes are acknowledged from the page cache, as a one-node
        /// Kafka does, and can be lost on power loss — it measures what the fsync costs.
        #[arg(long, value_enum, default_value_t = Fsync::Always)]
        fsync: Fsync,
    },
    /// Print the latency and counter tables of a broker started with --metrics-listen.
    Stats {
        /// The broker's --metrics-listen address.
        addr: String,
    },
    /// Inspect and manage consumer groups over the Kafka protocol (like kafka-consumer-groups.sh).
    Groups(tools::groups::GroupsArgs),
    /// List and describe transactions and a partition's producers over the Kafka protocol (like
    /// kafka-transactions.sh).
    Transactions(tools::transactions::TransactionsArgs),
    /// Add, delete and list users' SCRAM credentials over the Kafka protocol (like
    /// kafka-configs.sh --entity-type users).
    Users(tools::users::UsersArgs),
    /// Add, remove and list ACLs over the Kafka protocol (like kafka-acls.sh).
    Acls(tools::acls::AclsArgs),
    /// Print or verify `__consumer_offsets` segment files (like kafka-dump-log.sh --offsets-decoder).
    DumpLog(tools::dump_log::DumpLogArgs),
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Fsync {
    Always,
    Never,
}

/// Exit code for bad configuration or arguments (clap also uses 2 for usage errors).
const EXIT_CONFIG: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.command {
        Command::Serve {
            listen,
            data_dir,
            cores,
            config,
            sets,
            metrics_listen,
            fsync,
        } => {
            if fsync == Fsync::Never {
                tracing::warn!(
                    "--fsync=never: writes are acknowledged before they are durable; a power loss \
                     or kernel crash can lose acknowledged commits. For benchmarks only."
                );
                storage::io::skip_fsync_for_benchmarks();
            }
            serve(listen, data_dir, cores, config, sets, metrics_listen)
        }
        Command::Stats { addr } => {
            match tools::stats::print_stats(&addr, &mut std::io::stdout().lock()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ringleader stats: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Groups(args) => {
            let code = tools::groups::run(&args, &mut std::io::stdout().lock());
            ExitCode::from(code.clamp(0, 255) as u8)
        }
        Command::Transactions(args) => {
            let code = tools::transactions::run(&args, &mut std::io::stdout().lock());
            ExitCode::from(code.clamp(0, 255) as u8)
        }
        Command::Users(args) => {
            let code = tools::users::run(&args, &mut std::io::stdout().lock());
            ExitCode::from(code.clamp(0, 255) as u8)
        }
        Command::Acls(args) => {
            let code = tools::acls::run(&args, &mut std::io::stdout().lock());
            ExitCode::from(code.clamp(0, 255) as u8)
        }
        Command::DumpLog(args) => {
            let code = tools::dump_log::run(
                &args,
                &mut std::io::stdout().lock(),
                &mut std::io::stderr().lock(),
            );
            ExitCode::from(code.clamp(0, 255) as u8)
        }
    }
}

fn serve(
    listen: Option<SocketAddr>,
    data_dir: Option<PathBuf>,
    cores: Option<usize>,
    config: Option<PathBuf>,
    sets: Vec<String>,
    metrics_listen: Option<SocketAddr>,
) -> ExitCode {
    let config = match engine::config::Config::load(config.as_deref(), &sets) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ringleader: configuration error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    fail_fast_on_panic();
    for n in config.accepted_without_effect() {
        tracing::warn!(
            key = %n.key,
            from = %n.source_desc,
            "config key accepted, has no effect here: {}",
            n.reason
        );
    }
    // The command line wins over the config file, which wins over the defaults: --listen
    // replaces the PLAINTEXT listener's address. TLS files are read here, before binding.
    let plans = match engine::listeners::plan(&config, listen) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ringleader: configuration error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let data_dir = data_dir
        .or_else(|| config.data_dir())
        .unwrap_or_else(|| PathBuf::from("./data"));
    let cores = cores.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    if cores == 0 {
        eprintln!("ringleader: --cores must be at least 1");
        return ExitCode::from(EXIT_CONFIG);
    }
    let listeners = match engine::runtime::server::bind_planned(plans, cores) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("{e:#}");
            return ExitCode::FAILURE;
        }
    };
    let served = listeners.resolve(None);
    let opening = std::time::Instant::now();
    let broker = match engine::open_broker_with(config, &data_dir, served) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!("{e:#}");
            return ExitCode::FAILURE;
        }
    };
    // Start-up in phases, so a slow start says where it spent its time (the shards log
    // "listening on" once every partition is loaded).
    tracing::info!(
        millis = opening.elapsed().as_millis() as u64,
        data_dir = %data_dir.display(),
        "data directory opened; starting the shards"
    );
    // Register signal handling before serving so a signal during start-up is not lost.
    let mut signals = match signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ]) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot install signal handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let server = match engine::start(broker.clone(), listeners) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e:#}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(
        shards = cores,
        data_dir = %data_dir.display(),
        cluster_id = %broker.cluster_id,
        node_id = broker.node_id,
        advertised = %format!("{}:{}", broker.host, broker.port),
        "listening on {}", server.local_addr
    );
    for l in &broker.listeners {
        tracing::info!(
            listener = %l.name,
            protocol = l.protocol.name(),
            advertised = %format!("{}:{}", l.advertised_host, l.advertised_port),
            "listener {} on {}", l.name, l.addr
        );
    }
    if let Some(addr) = metrics_listen {
        match engine::metrics::serve(addr, broker.metrics.clone()) {
            Ok(local) => tracing::info!("metrics on http://{local}/metrics"),
            Err(e) => {
                tracing::error!("cannot serve metrics on {addr}: {e}");
                server.shutdown();
                let _ = server.join();
                return ExitCode::FAILURE;
            }
        }
    }
    let flag = server.shutdown_flag();
    let handle = signals.handle();
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            tracing::info!(signal = sig, "shutting down");
            flag.store(true, Ordering::Release);
        }
    });
    let result = server.join();
    handle.close();
    match result {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A panic anywhere outside the decode guard (`wire::guard::contain`) is a bug: log it and end
/// the process with exit code 101. Left alone, the shard that panicked would be gone while the
/// others keep serving, and every call routed to it would hang. Acknowledged writes are already
/// durable, so exiting loses nothing a client was told.
fn fail_fast_on_panic() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if wire::guard::contained() {
            // A hostile frame; the decoder's caller answers it and closes the connection.
            return;
        }
        default_hook(info);
        let thread = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        let at = info
            .location()
            .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
        // One line, so that log tooling keeps it whole.
        tracing::error!(
            thread,
            "panic outside the decode guard{at}: {}; stopping the broker (exit code 101)",
            message.replace('\n', " ")
        );
        std::process::exit(101);
    }));
}

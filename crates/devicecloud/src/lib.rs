//! The `devicecloud` binary: subcommands, settings, logging and start-up; nothing else. A
//! library only so that its tests can read the command line definition ([`Cli`]) that the
//! completions and the man page are generated from.

mod admin;
mod backup;
mod demo;
mod file_modes;
mod limits;
mod retention;
mod settings;
mod simulate;
mod store_lock;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand};
use devicecloud_server::{Listeners, Running};
use devicecloud_store::Db;
use tokio::net::TcpListener;

use settings::{Flags, LogFormat, Settings};

/// The version `--version` prints: the package's, and the commit it was built from (`unknown`
/// outside a git checkout), which `build.rs` finds.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("DEVICECLOUD_GIT_COMMIT"),
    ")"
);

/// An IoT device cloud: MQTT gateways in, REST API out.
#[derive(Debug, Parser)]
#[command(name = "devicecloud", version = VERSION, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    flags: Flags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the service: REST API over HTTP and the background workers.
    Serve,
    /// Run the service on a fresh embedded store seeded with an administrator, an API client,
    /// groups and a simulated fleet of gateways streaming data, and print how to use it.
    Demo,
    /// A fleet of simulated GO, CORE and PLUS gateways against a running server.
    Simulate(simulate::SimulateArgs),
    /// Bootstrap and operations on the store.
    #[command(subcommand)]
    Admin(admin::AdminCommand),
    /// Print the completion script of a shell on stdout (docs/operations.md, "Installing").
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page devicecloud(1) on stdout, or write it and one page per subcommand
    /// (devicecloud-serve(1), …) into a directory.
    Man {
        /// Write every page into this directory instead, such as /usr/local/share/man/man1.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<std::path::PathBuf>,
    },
}

/// Parses the command line and runs the command.
pub fn run() -> Result<()> {
    let cli = Cli::parse();
    // Generated from the definition alone: no setting can make them fail.
    match &cli.command {
        Command::Completions { shell } => {
            clap_complete::generate(*shell, &mut Cli::command(), "devicecloud", &mut std::io::stdout());
            return Ok(());
        }
        Command::Man { out_dir: None } => {
            clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
            return Ok(());
        }
        Command::Man { out_dir: Some(dir) } => {
            std::fs::create_dir_all(dir)
                .and_then(|()| clap_mangen::generate_to(Cli::command(), dir))
                .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
            return Ok(());
        }
        _ => {}
    }
    // Before the settings make the data dir, and before any thread starts.
    file_modes::private_from_now_on();
    let settings = Settings::load(&cli.flags)?;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&settings.log));
    // Colours only on a terminal: not in files, pipes or the journal.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match settings.log_format {
        LogFormat::Text => logs.init(),
        // The event's fields at the top level beside `message`, and the fields of the span it
        // happened in (a request's id, method and route) under `span` (docs/operations.md, "Logs").
        LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .init(),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Serve => serve(settings, None, None).await,
            Command::Demo => demo::run(settings).await,
            Command::Admin(command) => {
                println!("{}", admin::run(&settings, command).await?);
                Ok(())
            }
            Command::Simulate(args) => simulate::run(args, settings.mqtt_addr).await,
            Command::Completions { .. } | Command::Man { .. } => unreachable!("answered before the settings load"),
        }
    })
}

/// Connections the kernel queues for a listener before the accept loop takes them (it caps
/// the value at `net.core.somaxconn`): thousands of gateways reconnecting at once after a
/// network outage are queued rather than refused and retried a second later.
const LISTEN_BACKLOG: u32 = 4096;

/// Binds a listener, naming the setting on failure (docs/operations.md, "Settings").
async fn bind(addr: std::net::SocketAddr, variable: &str) -> Result<TcpListener> {
    let listen = || {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        // As `TcpListener::bind` does: a restarted service can bind while old connections of
        // the previous process linger in TIME_WAIT.
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(LISTEN_BACKLOG)
    };
    listen().with_context(|| format!("cannot listen on {variable}={addr}"))
}

/// Runs the service until SIGINT or SIGTERM; `db` is an already opened store (the demo seeds
/// one first), otherwise the configured one is opened.
///
/// Runs once the listeners are bound, with the HTTP and MQTT addresses chosen.
type OnReady = Box<dyn FnOnce(SocketAddr, SocketAddr) + Send>;

/// `on_ready` runs once the listeners are bound.
async fn serve(settings: Settings, db: Option<Db>, on_ready: Option<OnReady>) -> Result<()> {
    // The certificate and key are read before anything else is opened: a TLS listener that
    // cannot start stops the service at once, with the file at fault named.
    let tls = match settings.mqtt_tls()? {
        Some(tls) => {
            let acceptor = devicecloud_server::mqtt::tls::acceptor(tls.cert, tls.key)
                .context("cannot start the MQTT TLS listener (DEVICECLOUD_MQTT_TLS_CERT, DEVICECLOUD_MQTT_TLS_KEY)")?;
            Some((tls.addr, acceptor))
        }
        None => None,
    };
    // Held until the process ends: a second `serve` on the same SQLite store stops here.
    let _store_lock = store_lock::acquire(&settings.database_url()?)?;
    if let Some(store) = store_lock::sqlite_file(&settings.database_url()?) {
        file_modes::tighten_store(&store).with_context(|| format!("cannot make {} private (0600)", store.display()))?;
    }
    let db = match db {
        Some(db) => db,
        None => Db::connect(&settings.database_url()?)
            .await
            .context("cannot open the store")?,
    };
    let http = bind(settings.http_addr, "DEVICECLOUD_HTTP_ADDR").await?;
    let mqtt = bind(settings.mqtt_addr, "DEVICECLOUD_MQTT_ADDR").await?;
    let mqtts = match tls {
        Some((addr, acceptor)) => Some((bind(addr, "DEVICECLOUD_MQTT_TLS_ADDR").await?, acceptor)),
        None => None,
    };
    let listeners = Listeners { http, mqtt, mqtts };
    let backend = db.backend();
    let running = Running::start(db, settings.server(), listeners).context("cannot start the service")?;
    let addresses = running.addresses;
    let stop = stop_signal().context("cannot install the signal handlers")?;
    // The one line scripts and tests read to learn the chosen ports.
    match addresses.mqtts {
        Some(mqtts) => println!(
            "listening http={} mqtt={} mqtts={mqtts}",
            addresses.http, addresses.mqtt
        ),
        None => println!("listening http={} mqtt={}", addresses.http, addresses.mqtt),
    }
    if let Some(on_ready) = on_ready {
        on_ready(addresses.http, addresses.mqtt);
    }
    tracing::info!(http = %addresses.http, mqtt = %addresses.mqtt, mqtts = ?addresses.mqtts, ?backend, "devicecloud started");
    stop.await;
    tracing::info!("shutting down");
    if !running.stop(Duration::from_secs(20)).await {
        tracing::warn!("shutdown timed out; stopping anyway");
    }
    Ok(())
}

/// A future that ends on SIGINT or SIGTERM. The handlers are installed by this call, before
/// the listening line is printed: a signal sent as soon as that line is read stops the service
/// cleanly instead of killing it with the default action.
#[cfg(unix)]
fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

/// A future that ends on Ctrl-C.
#[cfg(not(unix))]
fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

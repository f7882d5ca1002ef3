//! The `devicecloud` binary: subcommands, settings, logging and start-up; nothing else. A
//! library only so that its tests can read the command line definition ([`Cli`]) that the
//! completions and the man page are generated from.

mod admin;
mod backup;
mod demo;
mod file_modes;
mod serve;
mod settings;
mod simulate;
mod store_lock;

use std::io::IsTerminal;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand};

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
            Command::Serve => serve::serve(settings, None, None).await,
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

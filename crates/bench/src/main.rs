//! `devicecloud-bench …`: benchmarks against a real `devicecloud serve` child process on
//! loopback, so the figures in docs/benchmarks.md come from one command and one run.
//!
//! Load loops are bounded by time and stop by themselves; only 127.0.0.1 is ever targeted.
//!
//! The benchmarks are a crate of their own so that the `devicecloud` binary is only the command
//! line. They reach the service as an outside user does: they run the `devicecloud` executable
//! (`serve`, and `admin` for the first accounts; see `server::locate` for where it is found) and
//! speak HTTP and MQTT to it, and they link no code of the binary crate (its settings and limits
//! stay private to it). Two exceptions, both on purpose: the store crate, to seed large data
//! directly in the server's database and to check acknowledged points there independently of the
//! API, and the server crate for the one constant the store's own rate is measured with
//! (`settings::INGEST_BATCH_POINTS`, the ingest writer's batch size).

mod abuse;
mod alarms;
mod api;
mod chunks;
mod cluster;
mod commands;
mod crash;
mod dashboard;
mod firmware;
mod idle;
mod ingest;
mod jobs;
mod mixed;
mod publisher;
mod read;
mod retention;
mod server;
mod stream;
mod throughput;
mod under_load;
mod webhook;

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;

/// Benchmarks of devicecloud against a `devicecloud serve` child process on loopback (see
/// docs/benchmarks.md).
#[derive(Debug, Parser)]
#[command(name = "devicecloud-bench", version, about)]
struct Cli {
    /// The `devicecloud` executable to run as the server under test [default: the file
    /// `devicecloud` in the same directory as this executable, e.g. target/release/devicecloud].
    #[arg(long, env = "DEVICECLOUD_BENCH_SERVER_BIN", global = true, value_name = "PATH")]
    server_bin: Option<PathBuf>,
    #[command(subcommand)]
    command: BenchCommand,
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    server::locate(cli.server_bin)?;
    run(cli.command).await
}

/// The benchmarks.
#[derive(Debug, clap::Subcommand)]
enum BenchCommand {
    /// Retention removing old points while gateways publish at full rate (SQLite): ingest
    /// throughput and API write latency against the same load with nothing to remove. With a
    /// PostgreSQL `--database-url` (an empty database): the time a pass takes to drop one day's
    /// partition of `--points` points.
    Retention(retention::RetentionOptions),
    /// The API while gateways publish at full rate: write and read latency of a steady API mix
    /// with and without ingest, and ingest throughput with and without the API mix.
    Mixed(mixed::MixedOptions),
    /// The front door under attack while gateways publish: deep expands, giant filters,
    /// made-up methods, 1 MB bodies, slow headers and bodies, thousands of idle sockets;
    /// `/healthz` latency, resident memory, and every acknowledged point checked on the store.
    Abuse(abuse::AbuseOptions),
    /// Gateways publish into several groups, first alone, then with live stream clients spread
    /// over the groups: durable points/s with and without clients, and PUBACK → client latency.
    Stream(stream::StreamOptions),
    /// Alarm rules on the commit path: durable points/s without and under 1,000 rules, rule
    /// evaluations/s, PUBACK → `alarm` on the stream, and the inactivity timer's CPU with
    /// 100,000 devices watched.
    Alarms(alarms::AlarmsOptions),
    /// The bytes a stored point takes in a compressed chunk, and the time to pack and read it:
    /// pcodec (the store's codec) against Gorilla, over chunk sizes and three kinds of series.
    /// No server is started.
    Chunks(chunks::ChunksOptions),
    /// Many gateways connected and idle: the server's resident memory per connection, then
    /// pings to random ones of them.
    Idle(idle::IdleOptions),
    /// Gateways publish QoS 1 measurement batches over MQTT: durable points/s, PUBACK latency,
    /// and the store's own rate for the same rows.
    Ingest(ingest::IngestOptions),
    /// Gateways publish QoS 1 batches while the server is killed (SIGKILL) and restarted; fails
    /// unless every acknowledged point is stored and counted once.
    Crash {
        /// Kill-and-restart cycles.
        #[arg(long, default_value_t = 20)]
        cycles: usize,
        /// Publishing gateways.
        #[arg(long, default_value_t = 4)]
        gateways: usize,
    },
    /// The read API on large data made in the store: downsampled (daily, three weeks hourly)
    /// against a GROUP BY over the raw rows, the first page of raw data of a 100-container
    /// group, and the CSV download of a large session with the server's memory.
    Read(read::ReadOptions),
    /// Pings through HTTP → MQTT → simulated gateway → HTTP across many gateways: latency
    /// percentiles and commands/s.
    Commands(commands::CommandsOptions),
    /// Jobs over many connected gateways while others ingest: a desired change's way to a
    /// connected gateway and to one after its hello, a ping job and a twin job without a rate
    /// limit, and the ingest rate meanwhile against alone.
    Jobs(jobs::JobsOptions),
    /// A firmware campaign over simulated gateways that check, download and install the image
    /// while others ingest: its time, the ingest rate meanwhile against alone, the server's
    /// memory; then a campaign with failing installs and the share of the fleet it tried before
    /// it halted.
    Firmware(firmware::FirmwareOptions),
    /// Several nodes on one PostgreSQL database: pings through the node holding the gateways
    /// and relayed through another node, and durable ingest on one node against all nodes.
    Cluster(cluster::ClusterOptions),
    /// Measurements at a paced rate over MQTT to one measurements webhook on loopback: latency
    /// from PUBACK to the receiver's 2xx, and the outbox at start and end.
    Webhook {
        /// Points per second, all gateways together.
        #[arg(long, default_value_t = 10_000)]
        rate: usize,
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        #[arg(long, default_value_t = 10)]
        gateways: usize,
    },
    /// The webhook receiver is down while the server is killed (SIGKILL) and restarted under
    /// load; fails unless every acknowledged point reaches it once it is up.
    WebhookCrash {
        #[arg(long, default_value_t = 5)]
        cycles: usize,
        #[arg(long, default_value_t = 2)]
        gateways: usize,
    },
    /// Every dashboard page, signed in through the sign-in form, with a group of gateways and a
    /// year of data behind one device's charts: p50 / p99 per page.
    Dashboard(dashboard::DashboardOptions),
    /// Authenticated `GET /api/v2/group/index?per-page=20` against `GET /healthz`, with N groups.
    Api(api::ApiOptions),
}

async fn run(command: BenchCommand) -> Result<()> {
    match command {
        BenchCommand::Retention(options) => retention::retention(options).await,
        BenchCommand::Mixed(options) => mixed::mixed(options).await,
        BenchCommand::Abuse(options) => abuse::abuse(options).await,
        BenchCommand::Crash { cycles, gateways } => crash::crash(cycles, gateways).await,
        BenchCommand::Stream(options) => stream::stream(options).await,
        BenchCommand::Alarms(options) => alarms::alarms(options).await,
        BenchCommand::Idle(options) => idle::idle(options).await,
        BenchCommand::Commands(options) => commands::commands(options).await,
        BenchCommand::Jobs(options) => jobs::jobs(options).await,
        BenchCommand::Firmware(options) => firmware::firmware(options).await,
        BenchCommand::Cluster(options) => cluster::cluster(options).await,
        BenchCommand::Webhook {
            rate,
            seconds,
            gateways,
        } => webhook::latency(rate, seconds, gateways).await,
        BenchCommand::WebhookCrash { cycles, gateways } => webhook::crash(cycles, gateways).await,
        BenchCommand::Ingest(options) => ingest::ingest(options).await,
        BenchCommand::Read(options) => read::read(options).await,
        BenchCommand::Dashboard(options) => dashboard::dashboard(options).await,
        BenchCommand::Api(options) => api::api(options).await,
        BenchCommand::Chunks(options) => chunks::chunks(&options),
    }
}

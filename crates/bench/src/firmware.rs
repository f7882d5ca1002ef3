//! `bench firmware`: a firmware campaign over a fleet of simulated gateways while 50 other
//! gateways ingest at full rate (docs/benchmarks.md, "Firmware").
//!
//! 1. Ingest alone: the 50 gateways publishing 500-point messages as fast as acknowledged.
//! 2. One job updates every gateway of the fleet with a signed image of `--image-mib` MiB: each
//!    simulated gateway (the `devicecloud-simulator` crate, as in `devicecloud simulate`) checks
//!    the manifest's signature, downloads the image over HTTP, checks its size and sha256,
//!    restarts and says hello with the new version. Measured: the time from the job's creation
//!    to its end, the ingest rate meanwhile against alone, and the server's resident memory
//!    (its peak during the campaign against before it).
//! 3. A campaign over another group whose gateways fail `--halt-fail-percent` of their installs,
//!    with `max_failures_percent` 10: the share of that fleet it tried before it halted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use devicecloud_protocol::ModuleKind;
use devicecloud_simulator::{Fleet, FleetOptions, GatewaySpec, Provisioner};
use serde_json::{Value, json};

use super::jobs::{ingest_while, timed_job};
use super::server::{GatewayCredentials, ServerUnderTest, cpu_seconds, provision, provision_group, rss_kib};

/// What `bench firmware` takes.
#[derive(Clone, Debug, clap::Args)]
pub struct FirmwareOptions {
    /// Gateways the campaign updates.
    #[arg(long, default_value_t = 10_000)]
    pub gateways: usize,
    /// Size of the image, MiB.
    #[arg(long, default_value_t = 1)]
    pub image_mib: usize,
    /// The campaign's `rate_per_minute`.
    #[arg(long, default_value_t = 6000)]
    pub rate_per_minute: u64,
    /// Gateways ingesting meanwhile.
    #[arg(long, default_value_t = 50)]
    pub ingest_gateways: usize,
    /// Seconds of ingest alone, the baseline.
    #[arg(long, default_value_t = 10)]
    pub baseline_seconds: u64,
    /// Longest the campaign's ingest is measured, seconds (the publishers stop then).
    #[arg(long, default_value_t = 180)]
    pub campaign_seconds: u64,
    /// Gateways of the halting campaign (0: skip it).
    #[arg(long, default_value_t = 1000)]
    pub halt_gateways: usize,
    /// Percent of the halting campaign's installs that fail.
    #[arg(long, default_value_t = 20)]
    pub halt_fail_percent: u8,
    /// Database of the server under test (default: a fresh SQLite file); must be empty.
    #[arg(long)]
    pub database_url: Option<String>,
}

/// CPU seconds of the server and of this process at one moment, and when.
struct Cpu {
    server: f64,
    bench: f64,
    at: Instant,
}

impl Cpu {
    fn now(pid: u32) -> Result<Cpu> {
        Ok(Cpu {
            server: cpu_seconds(pid)?,
            bench: cpu_seconds(std::process::id())?,
            at: Instant::now(),
        })
    }

    /// The cores the server and this process used on average since.
    fn cores_since(&self, pid: u32) -> Result<(f64, f64)> {
        let now = Cpu::now(pid)?;
        let wall = now.at.duration_since(self.at).as_secs_f64().max(1e-9);
        Ok(((now.server - self.server) / wall, (now.bench - self.bench) / wall))
    }
}

/// The simulator's gateways for provisioned CORE credentials.
fn specs(fleet: &[GatewayCredentials]) -> Vec<GatewaySpec> {
    fleet
        .iter()
        .map(|g| GatewaySpec {
            id: Some(g.id.clone()),
            ..GatewaySpec::new(&g.serial, &g.token, ModuleKind::Core)
        })
        .collect()
}

/// Uploads a CORE `app` image of `mib` MiB, `version`, for `group`; its id.
async fn upload(server: &ServerUnderTest, admin: &str, group: &str, version: &str, mib: usize) -> Result<String> {
    let bytes: Vec<u8> = (0..mib * 1024 * 1024)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let provisioner = Provisioner::new(&server.base, admin);
    Ok(provisioner
        .upload_firmware(ModuleKind::Core, "app", version, Some(group), bytes)
        .await?)
}

/// Creates a firmware job over `group` and waits for its end; the time it took and the job.
async fn campaign(
    http: &reqwest::Client,
    server: &ServerUnderTest,
    admin: &str,
    group: &str,
    id_firmware: &str,
    rate_per_minute: u64,
    max_failures_percent: u64,
) -> Result<(Duration, Value)> {
    let body = json!({"label": "bench campaign", "operation": {"firmware": id_firmware},
        "target": {"filter": {"id_group": group}}, "rate_per_minute": rate_per_minute,
        "max_failures_percent": max_failures_percent, "timeout_s": 300});
    timed_job(http, server, admin, &body, Duration::from_secs(900)).await
}

/// Starts `fleet` with updates from `server` (`fail_percent` of installs failing) and waits
/// until every gateway is connected.
async fn start_fleet(
    server: &ServerUnderTest,
    admin: &str,
    fleet: &[GatewayCredentials],
    fail_percent: u8,
) -> Result<Fleet> {
    let mut options = FleetOptions::new(server.mqtt, Duration::ZERO);
    options.firmware = Some(
        Provisioner::new(&server.base, admin)
            .firmware_source(fail_percent)
            .await?,
    );
    let started = Fleet::start(specs(fleet), options);
    if !started.wait_connected(fleet.len(), Duration::from_secs(300)).await {
        bail!(
            "not every gateway connected within 300 s ({} of {})",
            started.stats().connected,
            fleet.len()
        );
    }
    Ok(started)
}

pub async fn firmware(options: FirmwareOptions) -> Result<()> {
    let FirmwareOptions {
        gateways,
        image_mib,
        rate_per_minute,
        ingest_gateways,
        baseline_seconds,
        campaign_seconds,
        halt_gateways,
        halt_fail_percent,
        database_url,
    } = options;
    let server = ServerUnderTest::start(database_url).await?;
    let pid = server.pid().context("no server pid")?;
    let http = reqwest::Client::new();
    let (_, admin) = server.administrator(&http).await?;
    eprintln!("provisioning {gateways} gateways, {halt_gateways} failing ones and {ingest_gateways} ingesting ones…");
    let (group, fleet) = provision_group(&http, &server.base, &admin, "FW", gateways).await?;
    let ingesters = provision(&http, &server.base, &admin, "FW-INGEST", ingest_gateways).await?;
    let image = upload(&server, &admin, &group, "2.5.0", image_mib).await?;
    eprintln!("connecting {gateways} simulated gateways…");
    let updating = start_fleet(&server, &admin, &fleet, 0).await?;

    eprintln!("ingest alone for {baseline_seconds} s…");
    let baseline = Duration::from_secs(baseline_seconds);
    let cpu = Cpu::now(pid)?;
    let ((), alone) = ingest_while(&server, &ingesters, 1_700_000_000, baseline, async {
        tokio::time::sleep(baseline).await;
        Ok(())
    })
    .await?;
    let cpu_alone = cpu.cores_since(pid)?;

    eprintln!("campaign over {gateways} gateways, {image_mib} MiB image…");
    let before_kib = rss_kib(pid)?;
    let cpu = Cpu::now(pid)?;
    let peak = Arc::new(AtomicU64::new(before_kib));
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            while let Ok(kib) = rss_kib(pid) {
                peak.fetch_max(kib, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    let ((took, job), with) = ingest_while(
        &server,
        &ingesters,
        1_710_000_000,
        Duration::from_secs(campaign_seconds),
        campaign(&http, &server, &admin, &group, &image, rate_per_minute, 100),
    )
    .await?;
    sampler.abort();
    let cpu_campaign = cpu.cores_since(pid)?;
    let installed = updating.stats();
    updating.stop().await;

    let halted = if halt_gateways > 0 {
        eprintln!("a campaign over {halt_gateways} gateways, {halt_fail_percent} % of installs failing…");
        let (halt_group, halt_fleet) = provision_group(&http, &server.base, &admin, "FW-HALT", halt_gateways).await?;
        let halt_image = upload(&server, &admin, &halt_group, "3.0.0", image_mib).await?;
        let failing = start_fleet(&server, &admin, &halt_fleet, halt_fail_percent).await?;
        let (_, halt_job) = campaign(&http, &server, &admin, &halt_group, &halt_image, rate_per_minute, 10).await?;
        failing.stop().await;
        Some(halt_job)
    } else {
        None
    };
    server.stop(false).await;

    let succeeded = job["succeeded"].as_i64().unwrap_or(0);
    println!(
        "bench firmware: {gateways} simulated gateways, {image_mib} MiB image, rate_per_minute {rate_per_minute}, {ingest_gateways} ingesting"
    );
    println!(
        "campaign: {succeeded} of {gateways} updated in {:.1} s = {:.0} devices/min (status {}, failed {}, timed out {}; target <= 300 s, >= 2000/min)",
        took.as_secs_f64(),
        succeeded as f64 * 60.0 / took.as_secs_f64(),
        job["status"],
        job["failed"],
        job["timed_out"],
    );
    println!(
        "simulator: {} images installed, each manifest signature, size and sha256 checked; {} updates failed",
        installed.updates, installed.update_failures
    );
    println!(
        "ingest alone {alone:.0} points/s; during the campaign {with:.0} points/s = {:.2} of alone (target >= 0.9)",
        with / alone.max(1.0)
    );
    println!(
        "cores used (of the machine's): server {:.2}, this process (publishers and simulated gateways) {:.2} with ingest alone; \
         server {:.2}, this process {:.2} during the campaign",
        cpu_alone.0, cpu_alone.1, cpu_campaign.0, cpu_campaign.1
    );
    let peak_kib = peak.load(Ordering::Relaxed);
    println!(
        "server memory: {:.1} MiB before, peak {:.1} MiB during: growth {:.1} MiB (target <= 100 MiB)",
        before_kib as f64 / 1024.0,
        peak_kib as f64 / 1024.0,
        peak_kib.saturating_sub(before_kib) as f64 / 1024.0
    );
    if let Some(halt_job) = halted {
        let total = halt_job["total"].as_i64().unwrap_or(0);
        let tried = total - halt_job["cancelled"].as_i64().unwrap_or(0);
        println!(
            "halting campaign: status {}, tried {tried} of {total} = {:.1} % of the fleet ({} failed, {} succeeded; target < 20 %)",
            halt_job["status"],
            tried as f64 * 100.0 / total.max(1) as f64,
            halt_job["failed"],
            halt_job["succeeded"],
        );
    }
    Ok(())
}

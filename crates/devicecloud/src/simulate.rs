//! `devicecloud simulate`: a fleet of simulated gateways against any devicecloud server
//! (docs/operations.md), either provisioned through the REST API with a bearer token or given as
//! `SERIAL:TOKEN:KIND` triples, with a progress line while it runs.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use devicecloud_simulator::{Fleet, FleetOptions, GatewaySpec, Provisioner};

/// Options of `devicecloud simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Gateways to provision through the API (kinds in turn GO, CORE, PLUS).
    #[arg(long, default_value_t = 12)]
    pub gateways: usize,
    /// Measurement messages per second of each gateway (0: none, commands only).
    #[arg(long, default_value_t = 1.0)]
    pub rate: f64,
    /// Seconds to run; 0 runs until Ctrl-C.
    #[arg(long, default_value_t = 0)]
    pub duration: u64,
    /// The server's MQTT endpoint (default: the configured `DEVICECLOUD_MQTT_ADDR`).
    #[arg(long)]
    pub mqtt: Option<SocketAddr>,
    /// The server's HTTP address for provisioning, e.g. http://127.0.0.1:8080.
    #[arg(long)]
    pub api: Option<String>,
    /// Bearer token of a manager of `--group` (or of an administrator).
    #[arg(long)]
    pub token: Option<String>,
    /// Group to provision into; without it a group is created (administrators only).
    #[arg(long)]
    pub group: Option<String>,
    /// Serial prefix of provisioned gateways.
    #[arg(long, default_value = "SIM")]
    pub prefix: String,
    /// An already provisioned gateway as SERIAL:TOKEN:KIND (repeatable); no provisioning then.
    #[arg(long = "gateway")]
    pub existing: Vec<String>,
    /// GO modules power off and on again this often, in seconds (closing and opening sessions).
    #[arg(long)]
    pub power_cycle: Option<u64>,
    /// Percent of firmware updates made to fail after the download (half reported by event 221,
    /// half rolled back), to rehearse a campaign's halt. Updates need --api and --token (the
    /// gateways download from the API's address and check images with its public key).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub fail_updates: u8,
}

pub async fn run(args: SimulateArgs, default_mqtt: SocketAddr) -> Result<()> {
    let specs = if !args.existing.is_empty() {
        args.existing
            .iter()
            .map(|text| GatewaySpec::parse(text))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        let (Some(api), Some(token)) = (&args.api, &args.token) else {
            bail!("give --api and --token to provision gateways, or --gateway SERIAL:TOKEN:KIND");
        };
        let provisioner = Provisioner::new(api, token);
        let group = match &args.group {
            Some(group) => group.clone(),
            None => {
                provisioner
                    .create_group(&format!("Simulated fleet {}", args.prefix))
                    .await?
            }
        };
        let specs = provisioner.fleet(&group, &args.prefix, args.gateways).await?;
        println!("provisioned {} gateways in group {group}", specs.len());
        for spec in &specs {
            println!(
                "  {} {} {} token {}",
                spec.serial,
                spec.kind,
                spec.id.as_deref().unwrap_or_default(),
                spec.token
            );
        }
        specs
    };
    if !(args.rate >= 0.0 && args.rate.is_finite()) {
        bail!("--rate must be a number of messages per second, 0 or more");
    }
    let interval = if args.rate == 0.0 {
        Duration::ZERO
    } else {
        Duration::from_secs_f64(1.0 / args.rate)
    };
    let mut options = FleetOptions::new(args.mqtt.unwrap_or(default_mqtt), interval);
    options.power_cycle = args.power_cycle.map(Duration::from_secs);
    // With API access the gateways install firmware updates; without, they refuse them.
    if let (Some(api), Some(token)) = (&args.api, &args.token) {
        options.firmware = Some(Provisioner::new(api, token).firmware_source(args.fail_updates).await?);
    }
    let size = specs.len();
    let fleet = Fleet::start(specs, options);
    let started = Instant::now();
    let end = (args.duration > 0).then(|| started + Duration::from_secs(args.duration));
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = tick.tick() => {}
        }
        let s = fleet.stats();
        println!(
            "t={:>4}s connected {}/{size} measurements {} commands answered {} power cycles {} connects {} updates {} failed {}",
            started.elapsed().as_secs(),
            s.connected,
            s.measurements,
            s.commands,
            s.power_cycles,
            s.connects,
            s.updates,
            s.update_failures
        );
        if end.is_some_and(|end| Instant::now() >= end) {
            break;
        }
    }
    fleet.stop().await;
    Ok(())
}

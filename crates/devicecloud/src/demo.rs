//! `devicecloud demo`: the service on a fresh embedded store, seeded so that a newcomer can call
//! the API at once, with a simulated fleet of GO, CORE and PLUS gateways streaming data in the
//! same process, and the credentials and working `curl` lines printed (docs/operations.md).

use anyhow::{Context, Result};
use devicecloud_engine::auth::secrets::{random_token, token_hash};
use devicecloud_web::service::accounts as service_accounts;
use std::net::SocketAddr;
use std::time::Duration;

use devicecloud_engine::firmware::signing::Signer;
use devicecloud_protocol::ModuleKind;
use devicecloud_simulator::firmware::FirmwareSource;
use devicecloud_simulator::{Fleet, FleetOptions, GatewaySpec, History, mixed_kinds};

use devicecloud_simulator::model::datatype::VIBRATION;
use devicecloud_store::alarm_rules::{self, RuleRow};
use devicecloud_store::devices::{self, NewGateway};
use devicecloud_store::groups::{self, NewGroup};
use devicecloud_store::{Db, clients, memberships, new_id, unix_now};

use crate::settings::Settings;

const ADMIN: &str = "admin@devicecloud.demo";
const VIEWER: &str = "viewer@devicecloud.demo";
const PASSWORD: &str = "demo-password";
const GATEWAY: &str = "DEMO-GW-1";
/// Simulated gateways, spread over the demo groups.
const FLEET: usize = 12;
/// How often each simulated gateway sends a measurement message.
const FLEET_INTERVAL: Duration = Duration::from_secs(2);
/// How often the simulated GO modules power off and on (closing and opening data sessions).
const GO_POWER_CYCLE: Duration = Duration::from_secs(300);
/// How long a simulated GO module stays off: past the demo's silence rule (`RULES`).
const GO_POWER_OFF: Duration = Duration::from_secs(45);

/// The alarm rules of the demo's first group, so that its fleet raises and clears alarms on its
/// own: strong vibration of a GO module held for 6 s (readings are random between 0.5 and 4 mm/s;
/// it clears under 2), and a GO module silent for 30 s (each power cycle parks it for 45 s).
const RULES: [DemoRule; 2] = [
    DemoRule {
        label: "Strong vibration",
        severity: "major",
        condition: Some("value > 3.0"),
        clear_condition: Some("value < 2.0"),
        inactivity_s: None,
        for_s: 6,
    },
    DemoRule {
        label: "Van parked: no vibration data",
        severity: "warning",
        condition: None,
        clear_condition: None,
        inactivity_s: Some(30),
        for_s: 0,
    },
];

/// An alarm rule of the demo, on the vibration datatype of its first group.
struct DemoRule {
    label: &'static str,
    severity: &'static str,
    condition: Option<&'static str>,
    clear_condition: Option<&'static str>,
    inactivity_s: Option<i64>,
    for_s: i64,
}

pub async fn run(mut settings: Settings) -> Result<()> {
    // A fresh store every time: the demo never touches an existing data dir's database.
    settings.data_dir = settings.data_dir.join(format!("demo-{}", unix_now()));
    settings.database_url = None;
    let db = Db::connect(&settings.database_url()?)
        .await
        .context("cannot open the demo store")?;
    let seeded = seed(&db).await?;
    let data_dir = settings.data_dir.display().to_string();
    let key_file = settings.signing_key_file();
    let on_ready = move |http: SocketAddr, mqtt: SocketAddr| {
        let mut options = FleetOptions::new(mqtt, FLEET_INTERVAL);
        options.power_cycle = Some(GO_POWER_CYCLE);
        // Parked long enough for the demo's silence rule to raise an alarm, cleared on the way.
        options.power_off = GO_POWER_OFF;
        // The fleet installs firmware campaigns: it downloads from this service and checks
        // images with its key (the file the service made at start).
        match Signer::load(Some(&key_file)) {
            Ok(signer) => {
                options.firmware = Some(FirmwareSource {
                    http_base: format!("http://{http}"),
                    public_key: signer.public_key(),
                    fail_percent: 0,
                });
            }
            Err(e) => eprintln!("the demo fleet refuses firmware updates: {e}"),
        }
        // A week of readings every 5 minutes, so the dashboard's charts have a past.
        options.history = Some(History {
            span: Duration::from_secs(7 * 86_400),
            step: Duration::from_secs(300),
        });
        let fleet = seeded.fleet.clone();
        // The fleet lives as long as the process; the runtime ends it at shutdown.
        tokio::spawn(async move {
            let _fleet = Fleet::start(fleet, options);
            std::future::pending::<()>().await;
        });
        print_usage(&data_dir, http, mqtt, &seeded);
    };
    crate::serve::serve(settings, Some(db), Some(Box::new(on_ready))).await
}

/// What the demo store holds that the printed lines need.
struct Seeded {
    client_id: String,
    secret: String,
    device_token: String,
    /// The first group, which the viewer sees and the fleet streams into.
    first_group: String,
    /// The simulated gateways and their tokens.
    fleet: Vec<GatewaySpec>,
}

/// What a newcomer needs: where the API is, the accounts, and `curl` lines that work as printed.
fn print_usage(data_dir: &str, http: SocketAddr, mqtt: SocketAddr, seeded: &Seeded) {
    let base = format!("http://{http}");
    let Seeded {
        client_id,
        secret,
        device_token,
        first_group,
        fleet,
    } = seeded;
    let token_curl = format!(
        "TOKEN=$(curl -s -X POST {base}/oauth2/token -d grant_type=password -d client_id={client_id} -d client_secret={secret} -d username={ADMIN} -d password={PASSWORD} | sed -n 's/.*\"access_token\":\"\\([^\"]*\\)\".*/\\1/p')"
    );
    println!("devicecloud demo: store {data_dir}");
    println!("  dashboard    {base}/  (sign in as {ADMIN} / {PASSWORD})");
    println!("  API          {base}/api/v2/  (OpenAPI at {base}/api/v2/openapi.json)");
    println!("  API docs     {base}/api/docs  (Try it out: Authorize with the token below)");
    println!("  accounts     {ADMIN} (administrator) and {VIEWER} (viewer of one group), password {PASSWORD}");
    println!("  API client   client_id={client_id} client_secret={secret}");
    println!("  get a token  {token_curl}");
    println!("  list groups  curl -s '{base}/api/v2/group/index?sort=label' -H \"Authorization: Bearer $TOKEN\"");
    println!(
        "  downsampled  curl -s -g '{base}/api/v2/data-downsampled?filter[id_group]={first_group}' -H \"Authorization: Bearer $TOKEN\""
    );
    let kinds = fleet.iter().fold(String::new(), |mut acc, g| {
        if !acc.is_empty() {
            acc.push_str(", ");
        }
        acc.push_str(&format!("{} {}", g.serial, g.kind));
        acc
    });
    println!("  fleet        {} simulated gateways streaming: {kinds}", fleet.len());
    if let Some(gateway) = fleet.first() {
        println!(
            "  ping         curl -s '{base}/api/v2/physical-device/{}/ping' -H \"Authorization: Bearer $TOKEN\"",
            gateway.id.as_deref().unwrap_or_default()
        );
    }
    println!(
        "  alarms       {base}/alarms  (rules \"{}\" and \"{}\" on the vans of the first group)",
        RULES[0].label, RULES[1].label
    );
    println!("  alarm list   curl -s '{base}/api/v2/alarm?filter[status]=active' -H \"Authorization: Bearer $TOKEN\"");
    println!("  gateway      {GATEWAY} (CORE) at mqtt://{mqtt}, device token {device_token}");
    println!(
        "  publish      mosquitto_pub -h {} -p {} -q 1 -u {GATEWAY} -P {device_token} -t v1/gateway/measurements -m '{{\"values\": {{\"12\": 21.5}}}}'",
        mqtt.ip(),
        mqtt.port()
    );
    println!(
        "  or over HTTP curl -s -u {GATEWAY}:{device_token} {base}/gateway/v1/measurements -H 'Content-Type: application/json' -d '{{\"values\": {{\"12\": 21.5}}}}'"
    );
    println!("  stop with Ctrl-C");
}

/// Accounts, an API client, a few groups and one provisioned gateway.
async fn seed(db: &Db) -> Result<Seeded> {
    let now = unix_now();
    // Through the one account-creation path (service::accounts::register), with its rules.
    let account = |username: &str, is_admin: bool| {
        serde_json::from_value(serde_json::json!({"username": username, "password": PASSWORD, "is_admin": is_admin}))
    };
    service_accounts::register(db, &account(ADMIN, true)?).await?;
    let viewer = service_accounts::register(db, &account(VIEWER, false)?).await?;
    let (client_id, secret, device_token) = (new_id(), random_token(), random_token());
    let mut group_ids = Vec::new();
    clients::create(db, &client_id, "demo", &token_hash(&secret), now).await?;
    for (i, (label, kind)) in [
        ("Rotterdam water plant", "1"),
        ("Utrecht district heating", "1"),
        ("Fleet of service vans", "4"),
    ]
    .into_iter()
    .enumerate()
    {
        let group = groups::create(
            db,
            &NewGroup {
                label,
                r#type: kind,
                subtype: "",
                id_country: None,
            },
            now,
        )
        .await?;
        group_ids.push(group.id_group.clone());
        if i == 0 {
            memberships::put(db, &group.id_group, &viewer.id_user, "viewer").await?;
            let gateway = NewGateway {
                id_group: &group.id_group,
                serial_hardware: GATEWAY,
                kind: "CORE",
                label: "Pump house",
                expected_offline_interval: 600,
            };
            devices::provision(db, &gateway, &token_hash(&device_token), now).await?;
        }
    }
    for demo in RULES {
        let rule = RuleRow {
            id_alarm_rule: new_id(),
            id_group: group_ids[0].clone(),
            label: demo.label.into(),
            severity: demo.severity.into(),
            condition: demo.condition.map(str::to_string),
            clear_condition: demo.clear_condition.map(str::to_string),
            inactivity_s: demo.inactivity_s,
            datatype: Some(i64::from(VIBRATION)),
            source_device: None,
            for_s: demo.for_s,
            is_active: 1,
            created_at: now,
            updated_at: now,
            created_by: None,
        };
        alarm_rules::create(db, &rule, u64::MAX).await?;
    }
    // Half the fleet in the first group, the rest spread over the others.
    let mut fleet = Vec::with_capacity(FLEET);
    for (i, kind) in mixed_kinds(FLEET).into_iter().enumerate() {
        let group = match i % 4 {
            0 | 1 => &group_ids[0],
            2 => &group_ids[1],
            _ => &group_ids[2],
        };
        let serial = format!("DEMO-{kind}-{}", i + 1);
        let token = random_token();
        let label = match kind {
            ModuleKind::Go => "Service van",
            ModuleKind::Core => "Pumping station",
            ModuleKind::Plus => "Substation",
        };
        let gateway = NewGateway {
            id_group: group,
            serial_hardware: &serial,
            kind: kind.as_str(),
            label,
            expected_offline_interval: 600,
        };
        let row = devices::provision(db, &gateway, &token_hash(&token), now).await?;
        let mut spec = GatewaySpec::new(&serial, &token, kind);
        spec.id = Some(row.id_physical_device);
        // One CORE without Wi-Fi, to show the 501 answer.
        spec.wifi_enabled = i != 4;
        fleet.push(spec);
    }
    Ok(Seeded {
        client_id,
        secret,
        device_token,
        first_group: group_ids[0].clone(),
        fleet,
    })
}

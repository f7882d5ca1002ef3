//! `devicecloud demo`: the service on a fresh embedded store, seeded so that a newcomer can call
//! the API at once, with the credentials and working `curl` lines printed (contract §1).

use anyhow::{Context, Result};
use devicecloud_server::auth::secrets::{hash_password, random_token, token_hash};
use std::net::SocketAddr;

use devicecloud_store::devices::{self, NewGateway};
use devicecloud_store::groups::{self, NewGroup};
use devicecloud_store::{Db, accounts, clients, memberships, new_id, unix_now};

use crate::settings::Settings;

const ADMIN: &str = "admin@devicecloud.demo";
const VIEWER: &str = "viewer@devicecloud.demo";
const PASSWORD: &str = "demo-password";
const GATEWAY: &str = "DEMO-GW-1";

pub async fn run(mut settings: Settings) -> Result<()> {
    // A fresh store every time: the demo never touches an existing data dir's database.
    settings.data_dir = settings.data_dir.join(format!("demo-{}", unix_now()));
    settings.database_url = None;
    let db = Db::connect(&settings.database_url()?)
        .await
        .context("cannot open the demo store")?;
    let seeded = seed(&db).await?;
    let data_dir = settings.data_dir.display().to_string();
    let on_ready = move |http: SocketAddr, mqtt: SocketAddr| print_usage(&data_dir, http, mqtt, &seeded);
    crate::serve(settings, Some(db), Some(Box::new(on_ready))).await
}

/// What the demo store holds that the printed lines need.
struct Seeded {
    client_id: String,
    secret: String,
    device_token: String,
}

/// What a newcomer needs: where the API is, the accounts, and `curl` lines that work as printed.
fn print_usage(data_dir: &str, http: SocketAddr, mqtt: SocketAddr, seeded: &Seeded) {
    let base = format!("http://{http}");
    let Seeded {
        client_id,
        secret,
        device_token,
    } = seeded;
    let token_curl = format!(
        "TOKEN=$(curl -s -X POST {base}/oauth2/token -d grant_type=password -d client_id={client_id} -d client_secret={secret} -d username={ADMIN} -d password={PASSWORD} | sed -n 's/.*\"access_token\":\"\\([^\"]*\\)\".*/\\1/p')"
    );
    println!("devicecloud demo: store {data_dir}");
    println!("  API          {base}/api/v2/  (OpenAPI at {base}/api/v2/openapi.json)");
    println!("  accounts     {ADMIN} (administrator) and {VIEWER} (viewer of one group), password {PASSWORD}");
    println!("  API client   client_id={client_id} client_secret={secret}");
    println!("  get a token  {token_curl}");
    println!("  list groups  curl -s '{base}/api/v2/group/index?sort=label' -H \"Authorization: Bearer $TOKEN\"");
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
    let hash = hash_password(PASSWORD).map_err(anyhow::Error::msg)?;
    accounts::create(db, ADMIN, &hash, true, now).await?;
    let viewer = accounts::create(db, VIEWER, &hash, false, now).await?;
    let (client_id, secret, device_token) = (new_id(), random_token(), random_token());
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
    Ok(Seeded {
        client_id,
        secret,
        device_token,
    })
}
